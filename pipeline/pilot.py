"""Stage `pilot`: short runs of every feature cell through single device, thread and torchrun.

python -m pipeline.pilot [--set k=v] [--cells C ...] [--launchers L ...] [--out runs/pilot]

The cells of the active profile are params.yaml pilot.cells.<profile> (params/pilot_cells.py says
what each turns on); each cell's reference cell runs too. single and thread train in this process;
proc is one torchrun job (launchers.proc.world workers) that trains every cell in turn. Everything
is written to runs/.pilot.partial and replaces runs/pilot only when every run succeeded:
runs/pilot/<cell>/<launcher>/metrics.json per run, runs/pilot/pilot.json the index (cells,
launchers, seconds; contracts/schemas/pilot.schema.json). gates/pilot.py judges them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from contracts.errors import XtrainError, report
from contracts.fileio import atomic_write_json, replace_directory
from contracts.validate import load_schema, validate
from params.config import Params
from params.pilot_cells import CELLS, cell_sets, cells_for, pilot_section
from pipeline import stage
from xtrain.core import launch
from xtrain.core.pilot import cell_specs, drop_checkpoints, run_here

FORMAT = "xtrain-pilot/1"


def parser() -> argparse.ArgumentParser:
    ap = stage.parser(__doc__ or "")
    ap.prog = "python -m pipeline.pilot"
    ap.add_argument("--cells", nargs="+", choices=sorted(CELLS), help="default: pilot.cells.<profile>")
    ap.add_argument("--launchers", nargs="+", choices=launch.LAUNCHERS, help="default: pilot.launchers")
    ap.add_argument("--out", default="runs/pilot")
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--tokenizer", default="data/tokenizer.json")
    ap.add_argument("--staging", default=None, help=argparse.SUPPRESS)  # the torchrun workers' folder
    return ap


def chosen(params: Params, args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(cells with their reference cells, launchers)."""
    cells = cells_for(params)
    if args.cells:
        want = {c for n in args.cells for c in (n, CELLS[n].reference, "base")}
        cells = [c for c in CELLS if c in want]
    return cells, list(args.launchers or pilot_section(params)["launchers"])


def worker(args: argparse.Namespace) -> int:
    """A torchrun worker: every cell's proc runs in turn."""
    launch.die_with_parent()
    params = stage.params_of(args)
    cells, _ = chosen(params, args)
    specs = [
        s
        for c in cells
        for s in cell_specs(params, c, "proc", Path(args.staging), args.tokens, args.tokenizer)
    ]
    try:
        launch.run_proc_many(specs, params.launch_config().timeout_s, params.launch_config().grad_sync)
    except XtrainError as e:
        report(e)
        sys.stdout.flush()
        os._exit(1)
    return 0


def start_proc(argv: list[str], params: Params, staging: Path) -> subprocess.Popen:
    """The torchrun job, started first: its start-up (three interpreters importing torch) overlaps
    the in-process runs."""
    world = params.launch_config().proc_world
    cmd = launch.torchrun_cmd(world, "pipeline.pilot", *argv, "--staging", str(staging))
    print(f"[pilot] proc: torchrun with {world} workers", flush=True)
    return subprocess.Popen(cmd)


def wait_proc(job: subprocess.Popen, staging: Path, t0: float) -> float:
    if job.wait() != 0:
        raise XtrainError(f"{staging}: the torchrun pilot job failed (its workers' lines above)")
    return time.perf_counter() - t0


def local_runs(
    params: Params,
    args: argparse.Namespace,
    cells: list[str],
    launchers: list[str],
    staging: Path,
    seconds: dict,
) -> None:
    """Every cell's single and thread runs, in this process."""
    cfg = params.launch_config()
    for cell in cells:
        for launcher in (x for x in launchers if x != "proc"):
            specs = cell_specs(params, cell, launcher, staging, args.tokens, args.tokenizer)
            seconds[cell][launcher] = run_here(specs, launcher, cfg.thread_world, cfg.timeout_s)
            print(f"[pilot] {cell} {launcher}: {seconds[cell][launcher]:.1f}s", flush=True)


def index(params: Params, cells: list[str], launchers: list[str], seconds: dict, wall: float) -> dict:
    cfg = params.launch_config()
    p = pilot_section(params)
    return {
        "format": FORMAT,
        "profile": params["profile"],
        "device": params["train"]["device"],
        "steps": p["steps"],
        "resume_at": p["resume_at"],
        "worlds": {"single": 1, "thread": cfg.thread_world, "proc": cfg.proc_world},
        "launchers": launchers,
        "cells": [
            {
                "name": c,
                "reference": CELLS[c].reference,
                "judge": CELLS[c].judge,
                "sets": cell_sets(params, c),
            }
            for c in cells
        ],
        "seconds": seconds,
        "wall_s": wall,
    }


def train_all(argv: list[str], args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    params = stage.params_of(args)
    cells, launchers = chosen(params, args)
    out = Path(args.out)
    staging = out.parent / f".{out.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    seconds: dict[str, dict[str, float]] = {c: {} for c in cells}
    job = start_proc(argv, params, staging) if "proc" in launchers else None
    try:
        local_runs(params, args, cells, launchers, staging, seconds)
    except BaseException:
        if job is not None:
            job.kill()
            job.wait()
        raise
    proc_s = wait_proc(job, staging, t0) if job is not None else None  # one job, every cell
    drop_checkpoints(staging)
    record = index(params, cells, launchers, seconds, time.perf_counter() - t0)
    record["proc_job_s"] = proc_s
    validate(record, load_schema("pilot.schema.json"), str(out / "pilot.json"))
    atomic_write_json(staging / "pilot.json", record)
    replace_directory(staging, out)
    print(f"[pilot] {len(cells)} cells x {len(launchers)} launchers in {record['wall_s']:.1f}s", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    if "RANK" in os.environ and args.staging:
        return worker(args)
    return stage.run(lambda: train_all(argv, args), (KeyError,))


if __name__ == "__main__":
    sys.exit(main())
