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

from concurrent.futures import ThreadPoolExecutor

from gates.judges.gate import Gate, Picture, Thresholds
from gates.judges.outcome import Outcome, passed
from gates.reading import dvcstatus
from gates.reading.artifacts import Artifacts
from gates.reading.dvclock import DvcLock, dir_md5
from gates.reading.scope import DECLARED, Sources, declared_stages, required_stages, scope_problems
from registry.store import FileCheck

MAX_NAMED = 8  # files named in the message; the count says how many more


def upstream(lock: DvcLock, stages: set[str]) -> set[str]:
    """`stages` and every stage whose out one of them depends on (per dvc.lock's deps), transitively."""
    outs = {o.get("path", ""): s for s, body in lock.stages.items() for o in (body or {}).get("outs") or []}
    todo, seen = list(stages), set(stages)
    while todo:
        body = lock.stages.get(todo.pop()) or {}
        for dep in body.get("deps") or []:
            d = dep.get("path", "")
            for path, stage in outs.items():
                inside = d == path or d.startswith(path + "/") or path.startswith(d + "/")
                if inside and stage not in seen:
                    seen.add(stage)
                    todo.append(stage)
    return seen


def in_scope(lock: DvcLock, scope: list[str] | None) -> list[str]:
    """The stages to seal: every stage of dvc.yaml and dvc.lock, or the selected gates' and their inputs'."""
    every = set(lock.pipeline) | set(lock.stages) | lock.committed
    if scope is None:
        return sorted(every)
    return sorted(upstream(lock, set(scope) & every) | (set(scope) & every))


def missing(lock: DvcLock, stages: list[str]) -> list[str]:
    """What dvc.lock lacks: a stage dvc.yaml defines (or git HEAD's dvc.lock had), an out of one."""
    problems = []
    for stage in stages:
        if stage not in lock.stages:
            if stage in lock.pipeline or stage in lock.committed:
                problems.append(f"stage {stage} has no entry (dvc repro {stage})")
            continue
        recorded = {o.get("path") for o in (lock.stages[stage] or {}).get("outs") or []}
        problems += [
            f"stage {stage}: out {p} has no entry (dvc repro {stage})"
            for p in lock.pipeline.get(stage, [])
            if p not in recorded
        ]
    return problems


def sealed_paths(lock: DvcLock, stages: list[str]) -> list[tuple[str, str]]:
    """(path, recorded md5) of every out of `stages`, and of every folder dep that is no stage's out
    (registry/models, registry/pinned: the registry's content, sealed by the stages that read it)."""
    bodies = [lock.stages.get(s) or {} for s in stages]
    paths = {str(o.get("path", "")): str(o.get("md5", "")) for b in bodies for o in b.get("outs") or []}
    for body in bodies:
        for dep in body.get("deps") or []:
            path, md5 = str(dep.get("path", "")), str(dep.get("md5"))  # no md5: "None", no folder
            if md5.endswith(".dir") and lock.out(path) is None:
                paths.setdefault(path, md5)
    return sorted(paths.items())


def stale(lock: DvcLock, stages: list[str]) -> Outcome | None:
    """An error naming every stage whose deps, params or command differ from dvc.lock (what `dvc status`
    says, gates/reading/dvcstatus.py), or None. Outs are the seals' own check, before this one."""
    problems = [c for changes in dvcstatus.status(lock, stages).values() for c in changes if c.kind != "out"]
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


def out_of_scope(a: Artifacts, declared: list[str] | None) -> Outcome | None:
    """An error when dvc.yaml says less than the verdict needs (gates/reading/scope.py): no stage at
    all, a declared stage it lacks, a dep a declared stage's command imports that it does not declare.
    Checked before anything else: every later check judges only what dvc.yaml names."""
    problems = scope_problems(a.lock.definitions, declared, Sources(a.root))
    if not problems:
        return None
    return Outcome(
        "error", len(problems), "dvc.yaml defines every stage and dep the verdict needs",
        named(problems) + ": the verdict would judge less than the pipeline (restore dvc.yaml: git "
        "checkout dvc.yaml; or add each dep and dvc repro the stage)",
    )  # fmt: skip


def thawed(lock: DvcLock, stages: list[str]) -> tuple[Outcome | None, list[str]]:
    """An error naming each frozen stage whose deps or params changed since its dvc.lock entry (`dvc
    repro` never reruns a frozen stage, even with --force), and the frozen stages that did not change."""
    changes = dvcstatus.frozen(lock, stages)
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


def scope_while_hashing(
    a: Artifacts, declared: list[str] | None, sealed: list[tuple[str, str]]
) -> Outcome | None:
    """out_of_scope(), while the sealed files hash on other threads: parsing the code (~0.1 s) holds
    the GIL, hashing the outs (~0.1-0.2 s) mostly does not, so on two cores the two overlap."""
    with ThreadPoolExecutor(max_workers=1) as pool:  # pragma: no mutate -- equivalent: threads, not results
        hashed = pool.submit(prefetch, a.lock, sealed)
        wrong = out_of_scope(a, declared)
    return wrong or hashed.result()  # the scope is the first verdict; a file that cannot be hashed, later


def differences(lock: DvcLock, path: str, recorded: str) -> tuple[int, list[str]]:
    """(files hashed, why each differs) for one sealed path."""
    full = lock.root / path
    if not recorded.endswith(".dir"):
        if not full.is_file():
            return 0, [f"{path}: missing, dvc.lock recorded md5 {recorded}"]
        md5 = lock.md5(path)
        return 1, [] if md5 == recorded else [f"{path}: md5 {md5}, dvc.lock recorded {recorded}"]
    if not full.is_dir():
        return 0, [f"{path}: missing folder, dvc.lock recorded {recorded}"]
    return len(lock.listing(path)), lock.folder_changes(path, recorded)


def prefetch(lock: DvcLock, paths: list[tuple[str, str]]) -> None:
    """Hash every sealed file on two threads (hashlib releases the GIL on large blocks): most of the
    bytes are checkpoints, and one core alone took 0.5 s for the pipeline's 107 MB."""
    files = []
    for path, _ in paths:
        full = lock.root / path
        if full.is_file():
            files.append(path)
        elif full.is_dir():
            files += [p.relative_to(lock.root).as_posix() for p in full.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(max_workers=2) as pool:  # pragma: no mutate -- equivalent: threads, not results
        # pragma: no mutate start -- equivalent: the order of hashing (largest first) changes no digest
        list(pool.map(lock.md5, sorted(files, key=lambda f: -(lock.root / f).stat().st_size)))
        # pragma: no mutate end


def seals(a: Artifacts, declared: list[str] | None = None) -> Outcome:
    """The seals' verdict; `declared`: the stages the project declares its verdict needs (None: none)."""
    lock = a.lock
    stages = in_scope(lock, a.scope)
    sealed = sealed_paths(lock, stages)
    wrong = scope_while_hashing(a, declared, sealed)
    if wrong:
        return wrong
    if not stages:
        return Outcome("skip", None, "every file equal to dvc.lock", "no stage in dvc.yaml or dvc.lock")
    gaps = missing(lock, stages)
    if gaps:
        return Outcome(
            "error", len(gaps), "dvc.lock records every stage and out",
            "dvc.lock is partial: " + "; ".join(gaps) + " (restore it: git checkout dvc.lock)",
        )  # fmt: skip
    files, problems = 0, []
    for path, recorded in sealed:
        n, why = differences(lock, path, recorded)
        files, problems = files + n, problems + why
    if problems:
        return Outcome(
            "error", len(problems), "every file equal to dvc.lock",
            named(problems) + ": changed since dvc repro wrote it (dvc repro the stage, or restore it)",
        )  # fmt: skip
    old = stale(lock, stages)  # after the outs: a tampered out is named as such, not as its readers' dep
    if old:
        return old
    thaw, still = thawed(lock, stages)
    if thaw:
        return thaw
    return passed(files, "every file equal to dvc.lock", pass_text(files, stages, still, declared))


def pass_text(files: int, stages: list[str], still: list[str], declared: list[str] | None) -> str:
    """What the seals checked, with what the verdict rests on: frozen stages, an undeclared scope."""
    text = f"{files} files of {len(stages)} stages equal dvc.lock"
    if still:
        text += f"; frozen, not rerun by dvc repro (deps and params unchanged): {', '.join(still)}"
    if declared is None:
        text += f"; scope not declared ({DECLARED}): judged the stages dvc.yaml defines"
    return text


def recorded_md5(lock: DvcLock, c: dvcstatus.Change) -> str:
    dep = dvcstatus.entries(lock.stages.get(c.stage) or {}, "deps").get(c.name) or {}
    return str(dep.get("md5", "(no entry)"))


def seals_picture(a: Artifacts, t: Thresholds) -> Picture:
    """Each sealed path: dvc.lock's md5 against the tree's (a folder: its `.dir` hash)."""
    from gates.judges.pictures import md5_table

    lock = a.lock
    rows = []
    for path, recorded in sealed_paths(lock, in_scope(lock, a.scope)):
        full = lock.root / path
        if recorded.endswith(".dir"):
            now = dir_md5(lock.listing(path)) if full.is_dir() else None
            name = f"{path}/ ({len(lock.listing(path))} files)"  # a missing folder lists no file
        else:
            now, name = (lock.md5(path) if full.is_file() else None), path
        rows.append(FileCheck(name, recorded, now))
    changes = dvcstatus.status(lock, in_scope(lock, a.scope)).values()
    deps = {c.name: c for cs in changes for c in cs if c.kind == "dep"}
    rows += [
        FileCheck(f"{c.name} (dep)", recorded_md5(lock, c), dvcstatus.md5_now(lock, c.name))
        for c in deps.values()
    ]
    return Picture(
        md5_table(rows, "dvc.lock md5"),
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
    judge=lambda a, t: seals(
        a, required_stages(t, a.root, a.params.source) if a.params else declared_stages(t)
    ),
    why="a gate reads some files of some outs: a tampered checkpoint, csv, report or token file would "
    "otherwise pass unseen, and a deleted dvc.lock (or entry) would switch every artifact check off",
    investigate="the message names each file and both md5s; dvc status says which stage is stale; "
    "dvc repro it, or restore the file (dvc checkout) and dvc.lock (git checkout dvc.lock)",
    takes=("scope",),
    picture=seals_picture,
)
