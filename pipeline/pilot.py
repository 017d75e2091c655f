"""Stage `pilot`: short runs of every feature cell through single device, thread and torchrun.

python -m pipeline.pilot [--set k=v] [--cells C ...] [--launchers L ...] [--out runs/pilot]

The cells of the active profile are params.yaml pilot.cells.<profile> (params/pilot_cells.py says
what each turns on); each cell's reference cell runs too. single and thread train in this process;
proc is one torchrun job (launchers.proc.world workers) that trains every cell in turn. A run that
fails is recorded, never raised (xtrain/core/pilot.py): the other cells still train, and a cell that kills
the torchrun job costs one restart for the cells after it. Everything is written to
runs/.pilot.partial, which replaces runs/pilot when every run has been tried:
runs/pilot/<cell>/<launcher>/metrics.json per run that finished, runs/pilot/pilot.json the index
(cells, launchers, each run's outcome, seconds; contracts/schemas/pilot.schema.json). gates/judges/pilot.py
judges them. Exit 0 once every run is recorded, failed runs included; non-zero only for bad input
(params, tokens, tokenizer, worlds) or a torchrun job that fails before its first run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from contracts import artifact_table, outputs
from contracts.errors import report
from contracts.fileio import replace_directory
from params.config import Params
from params.pilot_cells import CELLS, cell_sets, cells_for, pilot_section
from pipeline import stage
from xtrain.core import launch, launch_plan, proctree
from xtrain.core.pilot import (
    ProcJob,
    Record,
    cell_specs,
    discard,
    drop_checkpoints,
    preflight,
    proc_worker,
    record_text,
    run_recorded,
)

FORMAT = "xtrain-pilot/2"
# runs/pilot: replaced as a whole, only over an earlier pilot (its pilot.json), an empty folder or nothing
PILOT = outputs.Kind(
    "pilot runs", folder=True, recognise=lambda p: outputs.json_format(FORMAT)(p / "pilot.json")
)


def parser() -> argparse.ArgumentParser:
    ap = stage.parser(__doc__ or "")
    ap.prog = "python -m pipeline.pilot"
    ap.add_argument("--cells", nargs="+", choices=sorted(CELLS), help="default: pilot.cells.<profile>")
    ap.add_argument("--launchers", nargs="+", choices=launch_plan.LAUNCHERS, help="default: pilot.launchers")
    outputs.output_flag(ap.add_argument("--out", default="runs/pilot"), PILOT)
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--tokenizer", default="data/tokenizer.json")
    ap.add_argument("--staging", default=None, help=argparse.SUPPRESS)  # the torchrun workers' folder
    ap.add_argument("--proc-cells", nargs="+", default=None, help=argparse.SUPPRESS)  # a restarted job's
    return ap


def chosen(params: Params, args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(cells with their reference cells, launchers)."""
    cells = cells_for(params)
    if args.cells:
        want = {c for n in args.cells for c in (n, CELLS[n].reference, "base")}
        cells = [c for c in CELLS if c in want]
    return cells, list(args.launchers or pilot_section(params)["launchers"])


def worker(args: argparse.Namespace) -> int:
    """A torchrun worker: every cell's proc runs in turn (a restarted job: --proc-cells only)."""
    launch.die_with_parent()
    guard = proctree.guard_worker(int(os.environ["RANK"]))
    try:
        params = stage.params_of(args)
        cells = args.proc_cells or chosen(params, args)[0]
        files = (args.tokens, args.tokenizer)
        specs = [(c, cell_specs(params, c, "proc", Path(args.staging), *files)) for c in cells]
        cfg = params.launch_config()
        proc_worker(specs, Path(args.staging), cfg.timeout_s, cfg.grad_sync)
    except Exception as e:  # noted for the stage by proc_worker; one line here
        report(e)
        sys.stdout.flush()
        if guard is not None:
            guard.exit(1, "error")
        os._exit(1)  # interpreter shutdown would wait on the broken process group's threads
    if guard is not None:
        guard.mark(0)
    return 0


def proc_job(argv: list[str], params: Params, staging: Path) -> ProcJob:
    """The torchrun job, started first: its start-up (three interpreters importing torch) overlaps
    the in-process runs."""
    cfg = params.launch_config()

    def command(cells: list[str]) -> list[str]:
        extra = ["--staging", str(staging), "--proc-cells", *cells]
        return launch_plan.torchrun_cmd(cfg.proc_world, "pipeline.pilot", *argv, *extra)

    print(f"[pilot] proc: torchrun with {cfg.proc_world} workers", flush=True)
    return ProcJob(command, staging, cfg.proc_world, cfg.timeout_s)


def local_runs(
    params: Params, specs: dict, cells: list[str], launchers: list[str], staging: Path, seconds: dict
) -> dict[str, dict[str, Record]]:
    """Every cell's single and thread runs, in this process: each one's record."""
    cfg = params.launch_config()
    runs: dict[str, dict[str, Record]] = {c: {} for c in cells}
    for cell in cells:
        for launcher in (x for x in launchers if x != "proc"):
            record, seconds[cell][launcher] = run_recorded(
                specs[cell, launcher], launcher, cfg.thread_world, cfg.timeout_s
            )
            runs[cell][launcher] = record
            took = f"{seconds[cell][launcher]:.1f}s"
            if record["status"] != "ok":
                discard(staging, cell, launcher)
                took += f", FAILED ({record_text(record)})"
            print(f"[pilot] {cell} {launcher}: {took}", flush=True)
    return runs


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
    out = outputs.check(args.out, PILOT)  # before any cell trains
    staging = out.parent / f".{out.name}.partial"
    specs = preflight(params, cells, launchers, staging, (args.tokens, args.tokenizer))  # touches nothing
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    seconds: dict[str, dict[str, float]] = {c: {} for c in cells}
    job = proc_job(argv, params, staging) if "proc" in launchers else None
    try:
        if job is not None:
            job.start(cells)
        runs = local_runs(params, specs, cells, launchers, staging, seconds)
        if job is not None:
            for cell, record in job.finish().items():  # one job, every cell (restarted past a crash)
                runs[cell]["proc"] = record
        proc_s = time.perf_counter() - t0 if job is not None else None
    finally:
        if job is not None:
            job.close()
    drop_checkpoints(staging)
    record = index(params, cells, launchers, seconds, time.perf_counter() - t0)
    record.update(runs=runs, proc_job_s=proc_s, proc_restarts=job.restarts if job is not None else 0)
    artifact_table.write("pilot", staging / "pilot.json", record)
    outputs.check(out, PILOT)  # again: the folder may have changed while the cells trained
    replace_directory(staging, out)
    failed = [f"{c} {x}" for c in cells for x, r in runs[c].items() if r["status"] != "ok"]
    tail = f"; {len(failed)} failed (recorded for the gates): {', '.join(failed)}" if failed else ""
    print(
        f"[pilot] {len(cells)} cells x {len(launchers)} launchers in {record['wall_s']:.1f}s{tail}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    if "RANK" in os.environ and args.staging:
        return worker(args)
    proctree.die_with_caller()  # under dvc repro: dvc gone, nobody records the result
    return stage.run(lambda: train_all(argv, args), (KeyError,))


if __name__ == "__main__":
    sys.exit(main())
