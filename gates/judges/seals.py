"""The seals gate: every file the verdict depends on equals what dvc repro wrote (dvc.lock).

Gates read only some files of some outs; a tamper elsewhere (a checkpoint, summary.json, loss.csv,
data/tokens.safetensors, a report) would pass unseen. This gate hashes, streaming, every out that
dvc.lock records for the stages in scope (each file of a folder out, compared through DVC's `.dir`
hash) and every folder dep (registry/models, registry/pinned), and refuses a dvc.lock that misses
a stage or an out of dvc.yaml. It also refuses stale artifacts: every stage whose deps (code,
schemas, other stages' outs), params values or command differ from dvc.lock, or that dvc.lock
has no entry for, as `dvc status` says (gates/reading/dvcstatus.py, held equal to it by a property test), so
a verdict always speaks of the tree as it is, never of the code that ran before an edit. A file is
hashed once per check (the other gates reuse the digest). Any difference is an error (exit 2)
naming the files.
"""

from __future__ import annotations

from gates.judges.gate import Gate, Picture, Thresholds
from gates.judges.outcome import Outcome, passed
from gates.reading.scope import DECLARED
from gates.reading.seal_records import Changes, SealRecords, SealRows, read_seal_rows, read_seals

MAX_NAMED = 8  # files named in the message; the count says how many more


def stale(status: Changes) -> Outcome | None:
    """An error naming every stage whose deps, params or command differ from dvc.lock (what `dvc status`
    says, gates/reading/dvcstatus.py), or None. Outs are the seals' own check, before this one."""
    problems = [c for changes in status.values() for c in changes if c.kind != "out"]
    if not problems:
        return None
    names = sorted({c.stage for c in problems})
    said = named([f"stage {c.stage}: {c.why}" for c in problems])
    return Outcome(
        "error", len(problems), "every dep and param equal to dvc.lock",
        "stale: " + said + ": the artifacts were made before this "
        f"edit and would be judged as this tree's (dvc repro {' '.join(names)}, or undo the edit)",
    )  # fmt: skip


def named(problems: list[str]) -> str:
    """The first MAX_NAMED problems, and how many more."""
    more = f" (and {len(problems) - MAX_NAMED} more)" if len(problems) > MAX_NAMED else ""
    return "; ".join(problems[:MAX_NAMED]) + more


def out_of_scope(problems: list[str]) -> Outcome | None:
    """An error when dvc.yaml says less than the verdict needs (gates/reading/scope.py): no stage at
    all, a declared stage it lacks, a dep a declared stage's command imports that it does not declare.
    Checked before anything else: every later check judges only what dvc.yaml names."""
    if not problems:
        return None
    return Outcome(
        "error", len(problems), "dvc.yaml defines every stage and dep the verdict needs",
        named(problems) + ": the verdict would judge less than the pipeline (restore dvc.yaml: git "
        "checkout dvc.yaml; or add each dep and dvc repro the stage)",
    )  # fmt: skip


def thawed(changes: Changes) -> tuple[Outcome | None, list[str]]:
    """An error naming each frozen stage whose deps or params changed since its dvc.lock entry (`dvc
    repro` never reruns a frozen stage, even with --force), and the frozen stages that did not change."""
    problems = [c for cs in changes.values() for c in cs]
    still = sorted(s for s, cs in changes.items() if not cs)
    if not problems:
        return None, still
    names = sorted({c.stage for c in problems})
    unfreeze = " && ".join(f"dvc unfreeze {n}" for n in names)
    return Outcome(
        "error", len(problems), "every frozen stage's deps and params equal to dvc.lock",
        "frozen: " + named([f"stage {c.stage}: {c.why}" for c in problems]) + ": dvc repro never reruns "
        f"a frozen stage, so its artifacts are older than this tree ({unfreeze} && dvc repro "
        f"{' '.join(names)}, or undo the edit)",
    ), still  # fmt: skip


def seals(r: SealRecords) -> Outcome:
    """The seals' verdict on what was read (gates/reading/seal_records.py), in order: the declared
    scope, dvc.lock's gaps, each sealed file, staleness, frozen stages."""
    wrong = out_of_scope(r.scope_problems)
    if wrong:
        return wrong
    r.hashed.get()  # a file that could not be hashed: after the scope's verdict
    if not r.stages:
        return Outcome("skip", None, "every file equal to dvc.lock", "no stage in dvc.yaml or dvc.lock")
    gaps = r.gaps.get()
    if gaps:
        return Outcome(
            "error", len(gaps), "dvc.lock records every stage and out",
            "dvc.lock is partial: " + "; ".join(gaps) + " (restore it: git checkout dvc.lock)",
        )  # fmt: skip
    files, problems = r.differences.get()
    if problems:
        return Outcome(
            "error", len(problems), "every file equal to dvc.lock",
            named(problems) + ": changed since dvc repro wrote it (dvc repro the stage, or restore it)",
        )  # fmt: skip
    old = stale(r.status.get())  # after the outs: a tampered out is named as such, not as its readers' dep
    if old:
        return old
    thaw, still = thawed(r.frozen.get())
    if thaw:
        return thaw
    return passed(files, "every file equal to dvc.lock", pass_text(files, r.stages, still, r.declared))


def pass_text(files: int, stages: list[str], still: list[str], declared: list[str] | None) -> str:
    """What the seals checked, with what the verdict rests on: frozen stages, an undeclared scope."""
    text = f"{files} files of {len(stages)} stages equal dvc.lock"
    if still:
        text += f"; frozen, not rerun by dvc repro (deps and params unchanged): {', '.join(still)}"
    if declared is None:
        text += f"; scope not declared ({DECLARED}): judged the stages dvc.yaml defines"
    return text


def seals_picture(r: SealRows, t: Thresholds) -> Picture:
    """Each sealed path: dvc.lock's md5 against the tree's (a folder: its `.dir` hash)."""
    from gates.judges.pictures import md5_table

    return Picture(
        md5_table(r.rows, "dvc.lock md5"),
        "Every out of dvc.lock (a folder by DVC's .dir hash of its files), every folder dep such as "
        "registry/models, and each file dep (code, schema) that changed since dvc repro, hashed now. "
        "Pass: every row equal, no stage or out missing from dvc.lock, no params value changed.",
    )


GATE = Gate(
    id="seals",
    checks="dvc.yaml defines every stage the params declare (gates.scope), each with every file its command "
    "imports; dvc.lock records every stage and out of dvc.yaml; every out (each file of a folder out), "
    "and every folder dep such as registry/models, equals its dvc.lock md5; no stage is stale as dvc "
    "status says, and no frozen stage's deps changed",
    threshold=lambda t: "every file equal to dvc.lock",
    judge=lambda r, t: seals(r),
    why="a gate reads some files of some outs: a tampered checkpoint, csv, report or token file would "
    "otherwise pass unseen, and a deleted dvc.lock (or entry) would switch every artifact check off",
    investigate="the message names each file and both md5s; dvc status says which stage is stale; "
    "dvc repro it, or restore the file (dvc checkout) and dvc.lock (git checkout dvc.lock)",
    takes=("scope",),
    picture=seals_picture,
    read=read_seals,
    read_for_picture=read_seal_rows,
)
