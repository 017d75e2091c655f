"""Run records: what the training gates judge, read once into plain values.

The metrics of runs/single|thread|proc (schema-validated by gates/reading/artifacts.py, each held to
itself and, where params.yaml describes runs, to params.yaml: gates/reading/expect.py), the files
consistency recomputes (summary.json, the csv texts, checkpoints/latest, the final checkpoint's
parameter digest), the pilot cells' records and runs, and which training stages have not run. Every
file the gates of gates/judges/ddp.py, training.py, consistency.py and pilot.py look at is opened here,
in the order those gates used to look; the judges take these records and open nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.numpy import load_file

from gates.reading import expect
from gates.reading.artifacts import ArtifactError, Artifacts, NonFinite, StageNotRun
from params.config import Params
from params.pilot_cells import CELLS, cell_params, cells_for, eval_identity, pilot_section

Metrics = dict[str, Any]

RUN_STAGE = {"single": "train_single", "thread": "train@thread", "proc": "train@proc"}


def run_metrics(a: Artifacts, run: str, refuse_non_finite: bool = True) -> Metrics:
    return a.json(f"runs/{run}/metrics.json", "metrics.schema.json", RUN_STAGE[run], refuse_non_finite)


def describes_runs(params: Params | None) -> bool:
    """The judging project's params.yaml describes its runs (our pipeline); else the records are the truth."""
    return params is not None and params.describes_runs


@dataclass(frozen=True)
class Run:
    name: str  # single | thread | proc
    metrics: Metrics  # runs/<name>/metrics.json, validated
    problems: tuple[str, ...] = ()  # the record against itself and params.yaml (gates/reading/expect.py)


@dataclass(frozen=True)
class Runs:
    """The runs a gate compares (loss_match: single then the launcher; launcher_parity: thread then proc;
    cross_rank: one), in the order they were read."""

    runs: tuple[Run, ...]
    describes_runs: bool = False  # params.yaml describes the runs; else each record is its own truth

    def __getitem__(self, name: str) -> Run:
        return {r.name: r for r in self.runs}[name]


def read_runs(a: Artifacts, *names: str) -> Runs:
    """Each run's metrics (non-finite refused), then each one held to itself and params.yaml."""
    metrics = {n: run_metrics(a, n) for n in names}
    problems = {n: tuple(expect.run_problems(a.params, n, m)) for n, m in metrics.items()}
    return Runs(tuple(Run(n, m, problems[n]) for n, m in metrics.items()), describes_runs(a.params))


def read_loss_match(a: Artifacts, launcher: str) -> Runs:
    return read_runs(a, "single", launcher)


def read_launcher_parity(a: Artifacts) -> Runs:
    return read_runs(a, "thread", "proc")


def read_cross_rank(a: Artifacts, launcher: str) -> Runs:
    return read_runs(a, launcher)


# ---- finite: every run that ran, its first non-finite number or its record's problems --------------


@dataclass(frozen=True)
class Checked:
    name: str
    non_finite: str | None  # the first non-finite number (Artifacts.json's NonFinite), else None
    problems: tuple[str, ...] = ()  # the record against itself and params.yaml (when every number is finite)


@dataclass(frozen=True)
class FiniteRecords:
    checked: tuple[Checked, ...]  # the runs whose stage ran, in single, thread, proc order
    not_run: dict[str, str] = field(default_factory=dict)  # run -> why (its stage has not run)
    describes_runs: bool = False


def read_finite(a: Artifacts) -> FiniteRecords:
    checked, not_run = [], {}
    for run in RUN_STAGE:
        try:
            m = run_metrics(a, run)
        except StageNotRun as e:
            not_run[run] = str(e)
            continue
        except NonFinite as e:
            checked.append(Checked(run, str(e)))
            continue
        checked.append(Checked(run, None, tuple(expect.run_problems(a.params, run, m))))
    return FiniteRecords(tuple(checked), not_run, describes_runs(a.params))


def read_finite_picture(a: Artifacts) -> dict[str, Metrics]:
    """Every run that ran, its NaNs kept (what the picture draws)."""
    out = {}
    for run in RUN_STAGE:
        try:
            out[run] = run_metrics(
                a,
                run,
                refuse_non_finite=False,  # pragma: no mutate -- equivalent: None is False
            )
        except StageNotRun:
            continue
    return out


# ---- consistency: each run's files, to recompute from its metrics.json -----------------------------


def param_digest(path: Path) -> str:
    """xtrain.core.checkpoint.param_digest of the weights in a checkpoint's model.safetensors."""
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise ArtifactError(f"{path}: not a readable safetensors file: {e}") from None
    h = hashlib.sha256()
    for name, t in sorted(tensors.items()):
        h.update(name.encode())
        h.update(t.tobytes())
    return h.hexdigest()


def final_checkpoint(m: Metrics) -> str:
    return f"step_{m['steps']:06d}"


@dataclass(frozen=True)
class RunFiles:
    """One run's files as they are on disk (metrics.json's NaNs kept: recomputation compares them too)."""

    name: str
    metrics: Metrics
    problems: tuple[str, ...]  # the record against its own config (expect.run_problems, no params.yaml)
    summary: Any  # summary.json, validated
    texts: dict[str, str]  # loss.csv, eval.csv
    latest: str  # checkpoints/latest, stripped
    digest: str | None  # param_digest of checkpoints/<final>/model.safetensors; None: no such file


def read_run_files(a: Artifacts, run: str) -> RunFiles:
    stage, base = RUN_STAGE[run], f"runs/{run}"
    m = run_metrics(a, run, refuse_non_finite=False)  # pragma: no mutate -- equivalent: None is False
    problems = tuple(expect.run_problems(None, run, m))
    summary = a.json(
        f"{base}/summary.json",
        "summary.schema.json",
        stage,
        refuse_non_finite=False,  # pragma: no mutate -- equivalent: None is False
    )
    texts = {name: a.path(f"{base}/{name}", stage).read_text() for name in ("loss.csv", "eval.csv")}
    latest = a.path(f"{base}/checkpoints/latest", stage).read_text().strip()
    model = f"{base}/checkpoints/{final_checkpoint(m)}/model.safetensors"
    digest = param_digest(a.path(model, stage)) if (a.root / model).is_file() else None
    return RunFiles(run, m, problems, summary, texts, latest, digest)


@dataclass(frozen=True)
class ConsistencyRecords:
    runs: tuple[RunFiles, ...]  # the runs whose stage ran, in single, thread, proc order
    not_run: dict[str, str] = field(default_factory=dict)  # run -> why


def read_consistency(a: Artifacts) -> ConsistencyRecords:
    runs, not_run = [], {}
    for run in RUN_STAGE:
        try:
            runs.append(read_run_files(a, run))
        except StageNotRun as e:
            not_run[run] = str(e)
    return ConsistencyRecords(tuple(runs), not_run)


# ---- pilot: one cell's records and runs ------------------------------------------------------------

PILOT_STAGE = "pilot"
PILOT_INDEX = "runs/pilot/pilot.json"
Key = tuple[str, str]  # (cell, launcher)


def pilot_run_path(cell: str, launcher: str) -> str:
    return f"runs/pilot/{cell}/{launcher}/metrics.json"


def pilot_metrics(a: Artifacts, cell: str, launcher: str) -> Metrics:
    return a.json(pilot_run_path(cell, launcher), "metrics.schema.json", PILOT_STAGE)


def pilot_index(a: Artifacts, cells: list[str], launchers: list[str]) -> dict[Key, dict | None]:
    """Each run's outcome as the stage recorded it (runs/pilot/pilot.json); None: not recorded."""
    runs = a.json(PILOT_INDEX, "pilot.schema.json", PILOT_STAGE)["runs"]
    return {(c, x): runs.get(c, {}).get(x) for c in cells for x in launchers}


def pilot_shape_problems(params: Params, cell: str, launcher: str, m: Metrics) -> list[str]:
    """How a pilot run differs from its own record's config (gates/reading/expect.py: identity, length, eval
    steps, world) and from what params.yaml says it must be."""
    where, p = pilot_run_path(cell, launcher), pilot_section(params)
    out = expect.run_problems(None, f"pilot/{cell}/{launcher}", m)
    want = cell_params(params, cell).run_config(m["config"]["model"]["vocab_size"]).config_hash()
    if m["config_hash"] != want:
        out.append(f"{where}: config_hash {m['config_hash']}, params.yaml pilot cell {cell} gives {want}")
    if m["steps"] != p["steps"] or len(m["train_loss"]) != p["steps"]:
        out.append(f"{where}: {len(m['train_loss'])} losses, params.yaml pilot.steps is {p['steps']}")
    world = 1 if launcher == "single" else params["launchers"][launcher]["world"]
    if m["world"] != world:
        out.append(f"{where}: world {m['world']}, params.yaml says {world}")
    if cell == "resume" and m["resumed_from_step"] != p["resume_at"]:
        out.append(
            f"{where}: resumed_from_step {m['resumed_from_step']}, the resume cell must resume at "
            f"pilot.resume_at={p['resume_at']}: the resume path was not taken"
        )
    return out


@dataclass(frozen=True)
class PilotRecords:
    """One cell's pilot runs as params.yaml and runs/pilot/pilot.json give them. Nothing is read where the
    gate decides without it: gates.pilot missing, a cell not of this profile, single not a launcher."""

    cell: str
    profile: str  # params.yaml profile
    in_profile: bool  # the cell is among params.yaml pilot.cells.<profile> (with its reference cells)
    runs_on: tuple[str, ...] = ()  # the profiles whose pilot.cells name the cell
    launchers: tuple[str, ...] = ()  # params.yaml pilot.launchers
    recorded: dict[Key, dict | None] = field(default_factory=dict)  # pilot.json's record; None: absent
    runs: dict[Key, Metrics] = field(default_factory=dict)  # the runs recorded ok, read
    problems: tuple[str, ...] = ()  # each run read against its record and params.yaml (pilot_shape_problems)
    eval_identity: bool = False  # the cell's features act only in training (params/pilot_cells.py)


def pilot_setting(a: Artifacts, cell: str) -> PilotRecords:
    """What params.yaml says of the cell (no artifact read)."""
    params = a.params
    assert params is not None, "the gates need the resolved params"
    in_profile = cell in cells_for(params)
    return PilotRecords(
        cell,
        params["profile"],
        in_profile,
        tuple(k for k, v in pilot_section(params)["cells"].items() if cell in v),
        tuple(pilot_section(params)["launchers"]) if in_profile else (),
    )


def pilot_cells(cell: str) -> list[str]:
    return list(dict.fromkeys((cell, CELLS[cell].reference)))


def read_pilot(a: Artifacts, t: dict[str, Any], cell: str) -> PilotRecords:
    """The cell's and its reference cell's records, every run recorded ok read and held to params.yaml."""
    s = pilot_setting(a, cell)
    if t.get("pilot") is None or not s.in_profile or "single" not in s.launchers:
        return s
    recorded = pilot_index(a, pilot_cells(cell), list(s.launchers))
    runs = {k: pilot_metrics(a, *k) for k, r in recorded.items() if r is not None and r["status"] == "ok"}
    assert a.params is not None
    problems = [p for (c, x), m in runs.items() for p in pilot_shape_problems(a.params, c, x, m)]
    same = eval_identity(a.params, cell)
    return PilotRecords(cell, s.profile, True, s.runs_on, s.launchers, recorded, runs, tuple(problems), same)


def read_pilot_picture(a: Artifacts, cell: str) -> PilotRecords:
    """What the cell's picture draws: per launcher, the cell's run and its reference's, both recorded ok."""
    s = pilot_setting(a, cell)
    if not s.in_profile:
        return s
    ref_cell = CELLS[cell].reference
    recorded = pilot_index(a, pilot_cells(cell), list(s.launchers))
    runs = {}
    for launcher in s.launchers:
        pair = ((cell, launcher), (ref_cell, launcher) if ref_cell != cell else (cell, "single"))
        if all((r := recorded[k]) is not None and r["status"] == "ok" for k in pair):
            runs |= {k: pilot_metrics(a, *k) for k in pair}
    return PilotRecords(cell, s.profile, True, s.runs_on, s.launchers, recorded, runs)
