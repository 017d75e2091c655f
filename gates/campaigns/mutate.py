"""python -m gates mutate: a mutation campaign over the training stack, judged by the gates.

How a campaign runs (docs/mutation.md):
1. The baseline: the tracked files of the checkout are copied to <work>/base (a fresh git repo, its
   DVC cache in <work>/cache), the profile's params overrides are written into its params.yaml,
   `dvc repro` builds every stage but the skipped ones (the scaling benchmark: performance, not
   correctness), a golden of this run is blessed into the copy's registry (so fresh_train's exact
   tier compares every mutant with the unmutated run), and the gates must pass on it. The base is
   reused while the code, catalogue profile and params are unchanged (a stamp of them).
2. Each mutant: the base is copied, the mutant's edits applied, `dvc repro` reruns exactly the
   stages whose deps changed (DVC knows a stage's deps; the upstream outputs are already there, so
   corpus and tokenizer rerun only for a tokenizer mutant), then `python -m gates check` judges it
   with this checkout's unmutated gate code. Mutants run in parallel (--jobs), each with a timeout.
3. A mutant no gate catches is `equivalent` when its runs are bitwise identical to the baseline
   (every loss, grad norm, eval, sample fingerprint, parameter digest and export md5), else a
   `hole`. Score = killed / (total - equivalent); score_strict counts only declared equivalents;
   score_gates counts only the mutants a gate caught (a fail, or an error no crashed stage explains),
   not those killed by a stage's crash or a timeout alone: stages record, the gates decide.

This module never imports torch: every stage runs in a subprocess.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contracts import outputs
from contracts.errors import XtrainError
from contracts.fileio import atomic_write_text, canonical_json
from contracts.validate import load_schema, validate
from contracts.yamlfile import load_pipeline
from gates.campaigns import children
from gates.campaigns.mutants import Catalogue, Mutant, apply, mutated_text
from gates.judges import catalogue as gate_catalogue
from gates.reading.dvcyaml import DvcYamlError, pipeline_stages
from params.config import narrow_scope

REPORT_FORMAT = "xtrain-mutation/2"  # 2: score_gates, killed_by_gates, stage_only
RUNS = ("single", "thread", "proc")
SAME_KEYS = (
    "train_loss",
    "grad_norm",
    "lr",
    "eval",
    "samples",
    "eval_mode_steps",
    "param_digest",
    "final_val_loss",
)
EXPORTS = ("fresh", "pinned")
Say = Callable[[str], None]


class CampaignError(XtrainError):
    exit_code = 2


def _earlier_campaign(path: Path) -> bool:
    """A work folder a campaign made before markers: its base (stamped), cache, mutants and log only."""
    names = {p.name for p in path.iterdir()}
    base = path / "base"
    return names <= {"base", "cache", "mutants", "outcomes.jsonl"} and (
        not base.exists() or (base / ".mutate-stamp").is_file()
    )


REPORT = outputs.json_kind("mutation report", REPORT_FORMAT)
WORK = outputs.Kind("mutation work folder", folder=True, marker=True, recognise=_earlier_campaign)


@dataclass
class Outcome:
    id: str
    area: str
    status: str  # killed | equivalent | hole | false-alarm | nondeterministic
    caught_by: list[str]
    expect: list[str]
    expected_caught: bool  # one of `expect` is among caught_by
    seconds: float
    rerun: list[str]  # the stages DVC ran
    restored: list[str]  # the stages DVC's run cache restored (same code, params and inputs seen before)
    identical: bool | None  # runs bitwise equal to the baseline (None: not compared)
    crashed_stage: str | None = None
    timed_out: bool = False
    message: str = ""
    declared_equivalent: bool = False
    gates: dict[str, str] = field(default_factory=dict)  # gate id -> status


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, bool]:
    """(exit code, output, timed out); on timeout the whole process group (torchrun too) is killed; a
    signal to the campaign ends it and raises (gates/campaigns/children.py)."""
    done = children.run(cmd, cwd, env, max(1.0, timeout), merge=True)
    return done.code, done.out, done.timed_out  # timed out: -9, the group was SIGKILLed


def tree_env(tree: Path) -> dict[str, str]:
    """The stages of `tree` import the tree's own (mutated) code, never an installed or outer copy;
    the rest of PYTHONPATH stays behind it (an offline runner's wheelhouse lives there: the GPU nightly
    failed `No module named dvc` when it was replaced)."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = os.pathsep.join([str(tree), *inherited])
    return {**os.environ, "DVC_NO_ANALYTICS": "1", "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}


def tail(text: str, n: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])


def crashed_stages(out: str) -> str:
    """The stages `dvc repro --keep-going` names as failed ("failed to reproduce 'a'", "stages: 'a' and 'b'")."""
    lines = [x for x in out.splitlines() if "failed to reproduce" in x]
    names = re.findall(r"'([^']+)'", lines[-1]) if lines else []
    return ", ".join(names) or "dvc repro"


PROGRESS = re.compile(r"\[[a-z_]+[^\]]*\] ")  # a stage's progress line: "[pilot] dropout proc: FAILED (...)"


def error_line(out: str) -> str:
    """The stage's own error line (not DVC's summary, nor another stage's progress line such as the
    pilot's recorded crashes): the project's one-line `error:` or a raised Error."""
    skip = ("ERROR: failed", "WARNING: failed")
    lines = [x.strip() for x in out.splitlines() if not x.lstrip().startswith(skip)]
    lines = [x for x in lines if not PROGRESS.match(x)]
    ours = [x for x in lines if x.startswith("error:") or "RankFailed" in x or "RuntimeError" in x]
    any_error = [x for x in lines if "Error" in x]
    return (ours or any_error or [tail(out, 2)])[-1][:300]


def tracked_files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    return sorted(f for f in (o.decode() for o in out if o) if (root / f).is_file())


def drop_stages(tree: Path, skip: list[str]) -> None:
    """The scratch pipeline without the skipped stages (dvc.yaml and dvc.lock): the seals require every
    stage dvc.yaml defines, and the campaign never builds these. Read bounded, written as DVC writes
    them (ruamel round trip: DVC's dialect, anchors kept)."""
    from ruamel.yaml import YAML

    ry = YAML()
    for name in ("dvc.yaml", "dvc.lock"):
        path = tree / name
        if not path.exists():
            continue
        load_pipeline(path)  # bounded (size, depth, aliases) before the round trip reads it
        text = path.read_text(
            encoding="utf-8",  # pragma: no mutate -- equivalent: "UTF-8" is the same codec (None fails a test)
        )
        doc = ry.load(text)
        stages = doc.get("stages") or {}
        for stage in [k for k in stages if str(k).split("@")[0] in skip]:
            del stages[stage]
        buf = io.StringIO()
        ry.dump(doc, buf)
        atomic_write_text(path, buf.getvalue())
    narrow_scope(tree / "params.yaml", skip)  # params.yaml: read and written by params/ only


def stages(tree: Path, skip: list[str]) -> list[str]:
    """Every DVC stage of dvc.yaml (foreach items as name@key) except the skipped ones."""
    try:
        names = list(pipeline_stages(tree))
    except DvcYamlError as e:
        raise CampaignError(str(e)) from None
    return [n for n in names if n not in skip and n.split("@")[0] not in skip]


def judged_gates(skip: list[str]) -> list[str]:
    """Every gate of the catalogue except the skipped ids or prefixes. `seals` is not named: it always
    runs, scoped to the named gates' stages (named, it would seal every stage, the skipped ones too)."""
    return [
        g.id
        for g in gate_catalogue.GATES
        if g.id != "seals" and not any(g.id == s or g.id.startswith(s + ".") for s in skip)
    ]


def skipping(cat: Catalogue, skip: list[str], picked: list[Mutant], root: Path) -> Catalogue:
    """`cat` with the stages `skip` also left out (`--skip-stage`), and every gate that reads one of
    them: a shorter campaign on the gates the picked mutants are expected to be caught by. A name that
    is not a stage of root's dvc.yaml, or a mutant left with no expected gate to catch it, is refused."""
    names = stages(root, [])
    unknown = sorted(set(skip) - {*names, *(n.split("@")[0] for n in names)})
    if unknown:
        raise CampaignError(f"--skip-stage {' '.join(unknown)}: not a stage of {root / 'dvc.yaml'}")
    stages_off = [*cat.skip_stages, *(s for s in skip if s not in cat.skip_stages)]
    off = set(names) - set(stages(root, skip))
    reads_off = [g.id for g in gate_catalogue.GATES if set(gate_catalogue.stages_read(g.id)) & off]
    gates_off = [*cat.skip_gates, *(g for g in reads_off if g not in cat.skip_gates)]
    judged = judged_gates(gates_off)
    for m in picked:  # "stage": caught by a crash, not by a gate
        if m.expect and "stage" not in m.expect and not any(matches(g, m.expect) for g in judged):
            raise CampaignError(
                f"mutant {m.id}: every gate it expects ({', '.join(m.expect)}) reads a skipped stage"
            )
    return dataclasses.replace(cat, skip_stages=stages_off, skip_gates=gates_off)


# not what the baseline's artifacts depend on (the gate code is the judge: the base is re-judged each time)
NOT_STAMPED = ("tests/", "docs/", "ci/", ".github/", "gates/", "README.md", "pyproject.toml")


def stamp(root: Path, files: list[str], overrides: list[str]) -> str:
    """What the baseline depends on: the code, params, pipeline and registry, and the profile's overrides."""
    h = hashlib.sha256("\n".join(overrides).encode())
    for rel in (f for f in files if not f.startswith(NOT_STAMPED)):
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes())
    return h.hexdigest()[:20]


def copy_files(root: Path, dest: Path, files: list[str]) -> None:
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)


@dataclass
class Campaign:
    root: Path  # the checkout: its files are the baseline, its gate code is the judge
    work: Path
    cat: Catalogue
    profile: str
    say: Say = print
    keep: bool = False

    @property
    def base(self) -> Path:
        return self.work / "base"

    def overrides(self) -> list[str]:
        if self.profile not in self.cat.profiles:
            raise CampaignError(f"{self.cat.source}: profiles: no profile {self.profile!r}")
        return self.cat.profiles[self.profile]

    def base_stamp(self, files: list[str]) -> str:
        """The baseline's key: its files, the profile's overrides and the stages it leaves out."""
        return stamp(
            self.root, files, [*self.overrides(), *(f"skip-stage {s}" for s in self.cat.skip_stages)]
        )

    def repro(self, tree: Path, timeout: float) -> tuple[int, str, bool]:
        # --keep-going: after a crash the stages that do not depend on it still run and are judged
        cmd = [sys.executable, "-m", "dvc", "repro", "--keep-going", *stages(tree, self.cat.skip_stages)]
        return run(cmd, tree, tree_env(tree), timeout)

    def check(self, tree: Path, timeout: float) -> tuple[dict[str, str], str]:
        """Gate id -> status, judged by the checkout's gate code; ({}, why) if no report came back."""
        report = tree / "reports" / "mutate-gates.json"
        report.unlink(missing_ok=True)
        only = judged_gates(self.cat.skip_gates)
        cmd = [sys.executable, "-m", "gates", "--root", str(tree), "--params", str(tree / "params.yaml")]
        code, out, _ = run([*cmd, "check", "--only", *only, "--report", str(report)], self.root,
                           {**tree_env(self.root)}, timeout)  # fmt: skip
        if not report.exists():
            return {}, f"gates check exited {code}: {tail(out)}"
        gates = json.loads(report.read_text())["gates"]
        said = [f"{g['id']}: {g['message']}" for g in gates if g["status"] in ("fail", "error")]
        said += [f"{g['id']} {NOT_A_KILL}: {g['message']}" for g in gates if g["status"] == "inconclusive"]
        return {g["id"]: g["status"] for g in gates}, "; ".join(said)

    def build_base(self) -> float:
        """Build (or reuse) the unmutated baseline; returns the seconds it took."""
        t0 = time.perf_counter()
        outputs.check(self.work, WORK)  # absent, empty or a campaign's: its base may be rebuilt
        self.work.mkdir(parents=True, exist_ok=True)
        outputs.write_marker(self.work, WORK)
        files = tracked_files(self.root)
        key = self.base_stamp(files)
        mark = self.base / ".mutate-stamp"
        if mark.exists() and mark.read_text() == key:
            self.say(f"baseline {self.base} is current (stamp {key})")
            self._verify()
            return time.perf_counter() - t0
        shutil.rmtree(self.base, ignore_errors=True)
        self.base.mkdir(parents=True)  # pragma: no mutate -- equivalent: its parent, work, is made above
        copy_files(self.root, self.base, files)
        drop_stages(self.base, self.cat.skip_stages)
        self._prepare_base()
        self.say(f"baseline: dvc repro in {self.base} ({self.profile} profile)")
        code, out, _ = self.repro(self.base, 3600)
        if code != 0:
            raise CampaignError(f"{self.base}: baseline dvc repro failed: {tail(out)}")
        self._bless_and_verify()
        mark.write_text(key)
        return time.perf_counter() - t0

    def _prepare_base(self) -> None:
        env = tree_env(self.base)
        steps = [
            ["git", "init", "-q"],
            [sys.executable, "-m", "dvc", "config", "--local", "cache.dir", str(self.work / "cache")],
        ]
        if self.overrides():
            steps.append([sys.executable, "-m", "pipeline.config", "set", *self.overrides()])
        for cmd in steps:
            code, out, _ = run(cmd, self.base, env, 300)
            if code != 0:
                raise CampaignError(f"{self.base}: {' '.join(cmd[:4])} failed: {tail(out)}")

    def _bless_and_verify(self) -> None:
        """The baseline's own golden (exact tier: every mutant is compared with it); then it must pass."""
        bless = [sys.executable, "-m", "registry", "bless", "--golden", "--reason",
                 f"mutation campaign baseline ({self.profile} profile)"]  # fmt: skip
        code, out, _ = run(bless, self.base, tree_env(self.base), 600)
        if code != 0:
            raise CampaignError(f"{self.base}: registry bless --golden failed: {tail(out)}")
        self._verify()

    def _verify(self) -> None:
        gates, why = self.check(self.base, 600)
        bad = {g: s for g, s in gates.items() if s not in ("pass", "skip")}
        if not gates or bad:
            raise CampaignError(f"{self.base}: the unmutated baseline does not pass the gates: {bad} {why}")
        self.say(f"baseline passes {len(gates)} gates")

    def mutant(self, m: Mutant) -> Outcome:
        """Copy the base, apply `m`, rerun what it affects, judge; the copy is removed unless --keep."""
        t0 = time.perf_counter()
        tree = self.work / "mutants" / m.id
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(
            self.base, tree, symlinks=True, ignore=shutil.ignore_patterns("tmp", "mutate-gates.json")
        )
        try:
            apply(m, tree)
            code, out, timed_out = self.repro(tree, self.cat.timeout_s)
            rerun = re.findall(r"Running stage '([^']+)'", out)
            restored = re.findall(r"Stage '([^']+)' is cached", out)
            crashed = None
            if code != 0 and not timed_out:
                crashed = crashed_stages(out)
            left = self.cat.timeout_s - (time.perf_counter() - t0)
            gates, why = self.check(tree, max(60.0, left)) if not timed_out else ({}, "timed out")
            identical = same_runs(self.base, tree) if not (crashed or timed_out) else False
            if crashed:
                why = f"stage {crashed} failed: {error_line(out)}; {why}"
        finally:
            if not self.keep:
                shutil.rmtree(tree, ignore_errors=True)
        seconds = time.perf_counter() - t0
        return classify(m, gates, identical, (rerun, restored), seconds, crashed, timed_out, why)


def fingerprint(tree: Path) -> dict[str, Any]:
    """What must be bitwise equal for a mutant to be equivalent: every run's numbers, every export md5."""
    out: dict[str, Any] = {}
    for r in RUNS:
        path = tree / "runs" / r / "metrics.json"
        m = json.loads(path.read_text()) if path.exists() else None
        out[f"runs/{r}"] = {k: m.get(k) for k in SAME_KEYS} if m else None
    for e in EXPORTS:
        path = tree / "exports" / e / "manifest.json"
        out[f"exports/{e}"] = json.loads(path.read_text())["files"] if path.exists() else None
    return out


def same_runs(base: Path, tree: Path) -> bool:
    a, b = fingerprint(base), fingerprint(tree)
    return all(v is not None for v in a.values()) and a == b


def matches(gate: str, names: list[str]) -> bool:
    return any(gate == n or gate.startswith(n + ".") for n in names)


def classify(
    m: Mutant,
    gates: dict[str, str],
    identical: bool,
    ran: tuple[list[str], list[str]],  # (rerun, restored from the run cache)
    seconds: float,
    crashed: str | None,
    timed_out: bool,
    why: str,
) -> Outcome:
    # a crashed stage leaves its artifacts missing: the gates that read them error; name the crash instead
    caught = sorted(g for g, s in gates.items() if s == "fail" or (s == "error" and not crashed))
    killed = bool(caught or crashed or timed_out or not gates)
    if m.equivalent:  # the control: must pass and be bitwise equal
        status = "false-alarm" if killed else ("equivalent" if identical else "nondeterministic")
    else:
        status = "killed" if killed else ("equivalent" if identical else "hole")
    expected = any(matches(g, m.expect) for g in caught) or (bool(crashed) and "stage" in m.expect)
    return Outcome(
        m.id, m.area, status, caught, m.expect, expected, round(seconds, 1), *ran, identical,
        crashed, timed_out, why[:500], m.equivalent, gates,
    )  # fmt: skip


# An inconclusive gate (a measurement that could not judge: exit 3 of `gates check`) caught nothing: the
# mutant's verdict is decided without it (killed by another gate or a crash, else equivalent or a hole),
# so the score keeps its meaning, and the table and message name it, never passing it over.
NOT_A_KILL = "inconclusive (not a kill)"


def unsure(gates: dict[str, str]) -> list[str]:
    """The gates that were inconclusive on a mutant."""
    return [g for g, s in gates.items() if s == "inconclusive"]


def score(outcomes: list[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    killed = sum(o.status == "killed" for o in outcomes)
    equivalent = sum(o.status == "equivalent" for o in outcomes)
    declared = sum(o.declared_equivalent for o in outcomes)
    unexercised = [o.id for o in outcomes if o.status == "equivalent" and not o.declared_equivalent]
    # caught_by holds the gates that failed, or errored with no crashed stage to explain it (classify)
    by_gates = sum(o.status == "killed" and bool(o.caught_by) for o in outcomes)
    return {
        "total": n,
        "killed": killed,
        "killed_by_gates": by_gates,
        "stage_only": [o.id for o in outcomes if o.status == "killed" and not o.caught_by],
        "equivalent": equivalent,
        "holes": [o.id for o in outcomes if o.status == "hole"],
        "unexercised": unexercised,  # bitwise-identical runs: the gated configuration never takes the path
        "control_failures": [o.id for o in outcomes if o.status in ("false-alarm", "nondeterministic")],
        "score": round(killed / (n - equivalent), 4) if n > equivalent else None,
        "score_strict": round(killed / (n - declared), 4) if n > declared else None,
        "score_gates": round(by_gates / (n - equivalent), 4) if n > equivalent else None,
    }


def run_campaign(c: Campaign, mutants: list[Mutant], jobs: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    for m in mutants:  # every anchor matches the checkout before anything is built
        mutated_text(m, c.root)
    base_s = c.build_base()
    c.say(f"{len(mutants)} mutants, {jobs} at a time, timeout {c.cat.timeout_s}s each")

    log = c.work / "outcomes.jsonl"  # each verdict as it lands: a stopped campaign keeps its results
    log.unlink(missing_ok=True)

    def one(m: Mutant) -> Outcome:
        children.check("gates mutate")  # interrupted: a queued mutant is not even copied
        o = c.mutant(m)
        with log.open("a") as f:
            f.write(json.dumps(asdict(o)) + "\n")
        note = f"; {', '.join(not_sure)} {NOT_A_KILL}" if (not_sure := unsure(o.gates)) else ""
        c.say(f"  {o.id:<34} {o.status:<11} {o.seconds:7.1f}s  {', '.join(o.caught_by) or '-'}{note}")
        return o

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(one, mutants))
    report = {
        "format": REPORT_FORMAT,
        "profile": c.profile,
        "catalogue": c.cat.source,
        "judged_gates": judged_gates(c.cat.skip_gates),
        "skipped_stages": c.cat.skip_stages,
        "jobs": jobs,
        "baseline_s": round(base_s, 1),
        "wall_s": round(time.perf_counter() - t0, 1),
        **score(outcomes),
        "mutants": [asdict(o) for o in outcomes],
    }
    validate(report, load_schema("mutation_report.schema.json"), "mutation report")
    return report


def write(report: dict[str, Any], path: Path) -> None:
    outputs.write_file(path, canonical_json(report), REPORT)  # never over a file it did not write


def exit_code(report: dict[str, Any], strict: bool) -> int:
    """1 when a mutant is a hole, the control failed, or (strict) a mutant ran bitwise unchanged."""
    bad = report["holes"] or report["control_failures"] or (strict and report["unexercised"])
    return 1 if bad else 0


def table(report: dict[str, Any]) -> str:
    rows = [f"{'mutant':<34} {'area':<12} {'verdict':<11} {'s':>6}  caught by (expected)"]
    for o in report["mutants"]:
        crash = [f"{o['crashed_stage']} crashed"] if o["crashed_stage"] else []
        caught = ", ".join(crash + o["caught_by"] + (["timeout"] if o["timed_out"] else [])) or "-"
        if not_sure := unsure(o["gates"]):
            caught += f"; {', '.join(not_sure)} {NOT_A_KILL}"
        mark = (
            ""
            if not o["expect"]
            else (" ok" if o["expected_caught"] else f" (expected {', '.join(o['expect'])})")
        )
        rows.append(f"{o['id']:<34} {o['area']:<12} {o['status']:<11} {o['seconds']:6.1f}  {caught}{mark}")
    s = report
    rows.append(
        f"killed {s['killed']} of {s['total']}, equivalent {s['equivalent']} "
        f"(unexercised by the gated config: {len(s['unexercised'])}), holes {len(s['holes'])}; "
        f"score {s['score']} (strict {s['score_strict']}, by the gates alone {s['score_gates']}: "
        f"{len(s['stage_only'])} killed only by a stage crash or timeout); wall {s['wall_s']}s"
    )
    return "\n".join(rows)


def git_common_dir(root: Path) -> Path:
    out = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--path-format=absolute", "--git-common-dir"],
        capture_output=True, text=True,
    )  # fmt: skip
    if out.returncode != 0:
        raise CampaignError(f"{root}: not a git checkout: {out.stderr.strip()}")
    return Path(out.stdout.strip())
