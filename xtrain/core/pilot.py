"""Running the pilot's cells (params/pilot_cells.py) through the launchers.

Every run is the real launcher code: `single` and `thread` in this process, `proc` in one torchrun
job that trains every cell in turn over one process group (launch.run_proc_many). A run trains
in its own folder runs/pilot/<cell>/<launcher>/ (metrics.json, loss.csv, ...); checkpoints are
dropped once the cell is done (the resume cell needs its own only between its two runs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from pathlib import Path

import torch

from params.config import Params
from params.pilot_cells import cell_params, pilot_section
from xtrain.core import launch
from xtrain.core.train import RunSpec


def cell_specs(
    params: Params, cell: str, launcher: str, out: Path, tokens: str, tokenizer: str
) -> list[RunSpec]:
    """The runs of one cell on one launcher, in order: one run; for `resume`, the run stopped at
    pilot.resume_at and its resume."""
    run_dir = str(out / cell / launcher)
    spec = launch.build_spec(cell_params(params, cell), launcher, run_dir, tokens, tokenizer, False)
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
