"""Time to the first verdict from an existing repository (issue #54 item 4): docs/byo-trainer.md's three
commands, run verbatim in a fresh git repository holding examples/plain-loop/train.py and its data
(tests/existing_repo.py), each timed; a table, never an assertion.

    python3 tests/init_existing_cost.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import existing_repo


def once(root: Path) -> list[float]:
    folder = root / "mine"
    existing_repo.make_repo(folder, existing_repo.TRAINER.read_text())
    env = {
        **os.environ,
        "PYTHONPATH": str(existing_repo.REPO),
        "DVC_NO_ANALYTICS": "1",
        "OMP_NUM_THREADS": "1",
    }
    took = []
    for command in existing_repo.commands():
        t0 = time.perf_counter()
        proc = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True)
        took.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            sys.exit(f"{command}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    runs = []
    for _ in range(a.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(once(Path(tmp)))
    commands = existing_repo.commands()
    width = max(len(c) for c in commands)
    print(f"{'command':<{width}}  " + "  ".join(f"run {i + 1:>2}" for i in range(a.repeats)) + "  median")
    for i, command in enumerate(commands):
        row = [r[i] for r in runs]
        print(
            f"{command:<{width}}  "
            + "  ".join(f"{t:5.1f} s" for t in row)
            + f"  {statistics.median(row):5.1f} s"
        )
    totals = [sum(r) for r in runs]
    print(
        f"{'total (to the first verdict)':<{width}}  "
        + "  ".join(f"{t:5.1f} s" for t in totals)
        + f"  {statistics.median(totals):5.1f} s"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
