"""Running the pilot's cells (params/pilot_cells.py) through the launchers, recording each run.

Every run is the real launcher code: `single` and `thread` in this process, `proc` in one torchrun
job that trains every cell in turn over one process group (launch.run_proc_many). A run trains
in its own folder runs/pilot/<cell>/<launcher>/ (metrics.json, loss.csv, ...); checkpoints are
dropped once the cell is done (the resume cell needs its own only between its two runs).

A run that fails is recorded, not raised: the pilot is a battery, and one crashed cell must not hide
the others' verdicts (stages record; the gates decide). Each run's outcome is `{"status": "ok"}` or
`{"status": "failed", "rank": R or None, "error": one line}`, and a failed run leaves no folder. The
torchrun job is proctree's supervised tree (no orphan; a hung or silent rank is named); when a cell
kills it, the job starts again for the cells after that one only, so restarts are bounded by the
cells and cost nothing when nothing fails. Bad input (params, tokens, worlds) is still an error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from contracts.errors import XtrainError, one_line
from contracts.fileio import atomic_write_json
from params.config import Params, check_world
from params.pilot_cells import cell_params, pilot_section
from xtrain.core import launch, launch_plan, proctree
from xtrain.core.launch_plan import RunSpec

NOTES = ".proc-notes"  # in the staging folder: the torchrun job's notes to the stage (never committed)
Record = dict[str, Any]
OK: Record = {"status": "ok"}


def cell_specs(
    params: Params, cell: str, launcher: str, out: Path, tokens: str, tokenizer: str
) -> list[RunSpec]:
    """The runs of one cell on one launcher, in order: one run; for `resume`, the run stopped at
    pilot.resume_at and its resume."""
    run_dir = str(out / cell / launcher)
    spec = launch_plan.build_spec(cell_params(params, cell), launcher, run_dir, tokens, tokenizer, False)
    if cell != "resume":
        return [dataclasses.replace(spec, checkpoints=False)]  # 0.25 s of a 0.6 s CPU run
    stop = pilot_section(params)["resume_at"]
    return [dataclasses.replace(spec, stop_after=stop), dataclasses.replace(spec, resume=True)]


def reset_peaks() -> None:
    """Each run's own CUDA peak (max RSS on cpu is a process high-water mark: not resettable)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for d in range(torch.cuda.device_count()):
            # a device this process has not used yet has no context, so no peak to reset (torch 2.11
            # raises "Invalid device argument" there: the H200 nightly's first pilot run)
            with contextlib.suppress(RuntimeError):
                torch.cuda.reset_peak_memory_stats(d)


def run_here(specs: list[RunSpec], launcher: str, world: int, timeout_s: float) -> float:
    """Train the runs with the single or thread launcher in this process; wall seconds."""
    t0 = time.perf_counter()
    for spec in specs:
        reset_peaks()
        if launcher == "single":
            launch.run_single(spec)
        else:
            launch.run_threads(spec, world, timeout_s)
    return time.perf_counter() - t0


def drop_checkpoints(out: Path) -> None:
    """Checkpoints are only the resume cell's means; the artifact keeps the metrics."""
    for ckpts in sorted(out.glob("*/*/checkpoints")):
        shutil.rmtree(ckpts)


def preflight(
    params: Params, cells: list[str], launchers: list[str], out: Path, files: tuple[str, str]
) -> dict:
    """Every run's specs, (cell, launcher) -> [RunSpec], inputs and worlds validated before any run:
    what fails here is bad input (an error of the stage), never a recorded run."""
    worlds = {"single": 1, **params.worlds()}
    specs = {}
    for cell in cells:
        for launcher in launchers:
            specs[cell, launcher] = cell_specs(params, cell, launcher, out, *files)
            for spec in specs[cell, launcher]:
                check_world(
                    spec.run.train,
                    worlds[launcher],
                    f"params.yaml launchers.{launcher}.world (pilot cell {cell})",
                )
    return specs


def failure(err: BaseException) -> Record:
    """A failed run's record: the failing rank (thread, proc; None for single) and the error's one line."""
    if isinstance(err, launch.RankFailed):  # "rank R failed: Type: message; laggards"
        return {"status": "failed", "rank": err.rank, "error": one_line(err).split(": ", 1)[-1][:300]}
    return {"status": "failed", "rank": None, "error": f"{type(err).__name__}: {one_line(err)}"[:300]}


def discard(out: Path, cell: str, launcher: str) -> None:
    """What a failed run left (its folder, its staging folder): a failed run has no metrics."""
    for path in (out / cell / launcher, out / cell / f".{launcher}.partial"):
        shutil.rmtree(path, ignore_errors=True)


def run_recorded(specs: list[RunSpec], launcher: str, world: int, timeout_s: float) -> tuple[Record, float]:
    """One cell's runs on the single or thread launcher: (its record, wall seconds). The inputs were
    validated before any run (preflight), so whatever a run raises is that run's failure, a
    ValidationError included (e.g. a resume refusing a checkpoint the run itself wrote wrongly)."""
    t0 = time.perf_counter()
    try:
        run_here(specs, launcher, world, timeout_s)
    except Exception as e:  # the run failed: recorded for the gates, the battery goes on
        return failure(e), time.perf_counter() - t0
    return dict(OK), time.perf_counter() - t0


# ---- the torchrun job: the worker's side ---------------------------------------------------------


def note(staging: Path, name: str, record: Record) -> None:
    (staging / NOTES).mkdir(exist_ok=True)
    atomic_write_json(staging / NOTES / name, record)


def proc_worker(
    cells: list[tuple[str, list[RunSpec]]], staging: Path, timeout_s: float, grad_sync: str
) -> None:
    """A torchrun worker: every cell's proc runs in turn. Rank 0 notes the cell it starts; a rank
    that fails notes its cell, rank and error for the stage, then raises."""
    rank = int(os.environ["RANK"])
    owners = [cell for cell, specs in cells for _ in specs]
    current: list[str | None] = [None]

    def started(i: int) -> None:
        current[0] = owners[i]
        if rank == 0:
            note(staging, "current.json", {"cell": owners[i]})

    try:
        launch.run_proc_many([s for _, specs in cells for s in specs], timeout_s, grad_sync, started)
    except Exception as e:
        cell = owners[e.run] if isinstance(e, launch.RankFailed) and e.run is not None else current[0]
        note(
            staging,
            f"failed-rank{rank}.json",
            {"cell": cell, **failure(e), "rank": rank, "time": time.time()},
        )
        raise


# ---- the torchrun job: the stage's side ----------------------------------------------------------


@dataclasses.dataclass
class ProcJob:
    """The pilot's torchrun job, watched in a thread while the local runs train; restarted for the
    cells after one that killed it (`command(cells)` is the torchrun command for those cells)."""

    command: Callable[[list[str]], list[str]]
    staging: Path
    world: int
    timeout_s: float
    restarts: int = 0
    todo: list[str] = dataclasses.field(default_factory=list)
    tree: proctree.Tree | None = None
    watcher: threading.Thread | None = None
    result: tuple[int | None, str] = (None, "")  # (exit status, or None; why it failed)

    def start(self, cells: list[str]) -> None:
        if self.tree is not None:
            self.tree.close()  # the last job's heartbeat folder
        shutil.rmtree(self.staging / NOTES, ignore_errors=True)
        self.todo = list(cells)
        self.tree = proctree.Tree(self.command(cells), self.world, self.timeout_s)
        self.watcher = threading.Thread(target=self._watch, name="xtrain-pilot-proc", daemon=True)
        self.watcher.start()

    def _watch(self) -> None:
        assert self.tree is not None
        try:
            self.result = (self.tree.watch(), "")
        except proctree.TreeFailed as e:
            self.result = (None, one_line(e))

    def finish(self) -> dict[str, Record]:
        """Every cell's proc record, after as many restarts as crashed cells (at most one per cell)."""
        records: dict[str, Record] = {}
        while True:
            assert self.watcher is not None
            self.watcher.join()
            rc, why = self.result
            if rc == 0:
                return {**records, **{c: dict(OK) for c in self.todo}}
            cell, record = self.failed_cell(rc, why)
            i = self.todo.index(cell)
            records.update({c: dict(OK) for c in self.todo[:i]}, **{cell: record})
            discard(self.staging, cell, "proc")
            rest = self.todo[i + 1 :]
            print(f"[pilot] {cell} proc: FAILED ({record_text(record)})", flush=True)
            if not rest:
                return records
            self.restarts += 1
            print(f"[pilot] proc: torchrun again for {', '.join(rest)} (restart {self.restarts})", flush=True)
            self.start(rest)

    def failed_cell(self, rc: int | None, why: str) -> tuple[str, Record]:
        """The cell that killed the job and its record, from the ranks' notes (the earliest failure),
        else from the cell rank 0 had started and the launcher's words. Bad input if none had started."""
        notes = self.staging / NOTES
        failures = sorted((read_note(f) for f in notes.glob("failed-rank*.json")), key=lambda n: n["time"])
        started = read_note(notes / "current.json").get("cell") if (notes / "current.json").exists() else None
        said = why or f"torchrun exited {rc} and no rank noted why"
        for n in failures:
            if n.get("cell") in self.todo:
                return n["cell"], {"status": "failed", "rank": n["rank"], "error": n["error"]}
        if started not in self.todo:
            raise XtrainError(f"{self.staging}: the torchrun pilot job failed before its first run: {said}")
        m = re.match(r"rank (\d+)\b", why)
        return str(started), {"status": "failed", "rank": int(m.group(1)) if m else None, "error": said[:300]}

    def close(self) -> None:
        """No process of the tree is left, whatever way the stage leaves."""
        if self.tree is not None:
            self.tree.close()
        shutil.rmtree(self.staging / NOTES, ignore_errors=True)


def read_note(path: Path) -> Record:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            return data
    return {"time": float("inf")}


def record_text(record: Record) -> str:
    rank = f"rank {record['rank']}: " if record.get("rank") is not None else ""
    return f"{rank}{record['error']}"
