"""The busy-machine experiment (issue 23): the scaling stage and its gate, N times, beside busy cores.

python -m pipeline.busy_scaling [--runs 10] [--busy 1] [--fault slow_proc] [--tree DIR] [--out DIR]

A scratch clone of this checkout's HEAD (or --tree, reused) gets data/ copied in; then per run: start
--busy `python3 -c "while True: pass"` processes, note the load averages, run the stage as the main
command does (`dvc repro -s -f scaling`), judge it (`python3 -m gates check --only scaling`), stop
the busy processes. Prints one row per run (load before, stage seconds, verdict, rounds per
measurement, judged tokens/s) and writes OUT (reports/busy_scaling.json). With --fault slow_thread|slow_proc
that launcher's timed steps take twice as long (XTRAIN_FAULT): every run must then fail.
Not a test: it takes minutes and its figures depend on the machine (docs/scaling.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from contracts import outputs
from contracts.errors import report
from gates.campaigns.mutate import tree_env

REPO = Path(__file__).resolve().parent.parent


CLONE_MARK = ".busy-scaling-clone"  # what marks --tree as this tool's own clone (reused, data copied in)
REPORT = outputs.json_kind("busy-scaling record", "xtrain-busy-scaling/1")


def check_tree(tree: Path) -> None:
    """--tree: absent, empty, or this tool's earlier clone; never a folder it did not make."""
    if tree.is_symlink() or (tree.exists() and not tree.is_dir()):
        raise outputs.OutputRefused(tree, "scratch clone", "it is not a folder")
    if escape := outputs.leaves_repository(tree):
        raise outputs.OutputRefused(tree, "scratch clone", escape)
    if tree.is_dir() and any(tree.iterdir()) and not (tree / CLONE_MARK).is_file():
        raise outputs.OutputRefused(
            tree, "scratch clone", f"a folder this tool did not clone (no {CLONE_MARK})"
        )


def scratch_tree(tree: Path) -> Path:
    """A clone of HEAD with this checkout's data/ (tokens, tokenizer): the stage's inputs."""
    if not (tree / CLONE_MARK).exists():
        subprocess.run(["git", "clone", "-q", str(REPO), str(tree)], check=True)
        (tree / CLONE_MARK).write_text("made by python -m pipeline.busy_scaling\n")
    for f in (REPO / "data").iterdir():
        if f.is_file() and f.name != ".gitignore":
            shutil.copyfile(f, tree / "data" / f.name)
    return tree


def one_run(tree: Path, busy: int, fault: str | None) -> dict[str, Any]:
    """One stage run and its gate, with `busy` spinning processes beside it."""
    env = tree_env(tree)
    env.pop("XTRAIN_FAULT", None)
    if fault:
        env["XTRAIN_FAULT"] = f"{fault}@*:0"
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        load = os.getloadavg()
        t0 = time.monotonic()
        stage = subprocess.run(
            ["dvc", "repro", "-s", "-f", "scaling"], cwd=tree, env=env, capture_output=True, text=True
        )
        wall = time.monotonic() - t0
        load_after = os.getloadavg()
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    if stage.returncode != 0:
        return {"load": load, "load_after": load_after, "wall_s": wall, "status": "stage failed",
                "message": stage.stderr[-500:], "rounds": {}, "rates": {}}  # fmt: skip
    report = tree / "reports" / "busy-gates.json"
    gate = subprocess.run(
        [sys.executable, "-m", "gates", "check", "--only", "scaling", "--report", str(report)],
        cwd=tree, env=env, capture_output=True, text=True,
    )  # fmt: skip
    verdict = next(g for g in json.loads(report.read_text())["gates"] if g["id"] == "scaling")
    s = json.loads((tree / "bench" / "scaling.json").read_text())
    per = {
        f"{la} {w}": r for la, by_world in sorted(s["results"].items()) for w, r in sorted(by_world.items())
    }
    return {
        "load": load, "load_after": load_after, "wall_s": wall, "exit": gate.returncode,
        "status": verdict["status"], "message": verdict["message"],
        "rounds": {k: r["rounds"] for k, r in per.items()}, "rates": {k: r["tokens_per_s"] for k, r in per.items()},
        "progress": [line for line in stage.stderr.splitlines() if line.startswith("scaling: ")],
    }  # fmt: skip


def row(i: int, r: dict[str, Any]) -> str:
    load = "/".join(f"{x:.1f}" for x in r["load"])
    rounds = " ".join(f"{v}" for v in r["rounds"].values())
    rates = " ".join(f"{v / 1e3:.1f}k" for v in r["rates"].values())
    return f"{i:>3} {load:>15} {r['wall_s']:>7.0f} {r['status']:>12} {rounds:>9} {rates:>27}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.busy_scaling", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--busy", type=int, default=1, help="spinning processes beside the stage")
    ap.add_argument("--fault", choices=["slow_thread", "slow_proc"], default=None)
    clone = outputs.Kind("scratch clone", folder=True)  # checked by check_tree (a git clone's root)
    outputs.output_flag(
        ap.add_argument("--tree", default="/tmp/xtrain-busy-scaling", help="scratch clone (made once)"), clone
    )
    outputs.output_flag(
        ap.add_argument("--out", default="reports/busy_scaling.json", help="the record"), REPORT
    )
    args = ap.parse_args(argv)
    try:  # before minutes of runs: neither output over something this tool did not make
        outputs.check(args.out, REPORT)
        check_tree(Path(args.tree))
    except outputs.OutputRefused as e:
        return report(e)
    tree = scratch_tree(Path(args.tree))
    print(f"busy_scaling: {args.runs} runs, {args.busy} busy processes, fault {args.fault}, tree {tree}")
    print(
        f"{'run':>3} {'load 1/5/15 m':>15} {'stage s':>7} {'verdict':>12} {'rounds':>9} {'tok/s (judged)':>27}"
    )
    print(f"{'':>3} {'':>15} {'':>7} {'':>12} {'p1 p2 t1 t2':>9} {'proc 1, 2; thread 1, 2':>27}")
    results = []
    for i in range(1, args.runs + 1):
        results.append(one_run(tree, args.busy, args.fault))
        print(row(i, results[-1]), flush=True)
    bad = [r for r in results if r["status"] != ("fail" if args.fault else "pass")]
    print(f"{len(bad)} of {len(results)} runs not {'fail' if args.fault else 'pass'}: "
          + "; ".join(f"{r['status']}: {r['message'][:160]}" for r in bad))  # fmt: skip
    record = {"format": "xtrain-busy-scaling/1", "busy": args.busy, "fault": args.fault, "runs": results}
    outputs.write_file(args.out, json.dumps(record, indent=1), REPORT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
