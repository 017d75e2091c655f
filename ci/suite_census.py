"""Where the test suite's time goes: `ci/test.sh` with a CPU census of every test and every process.

    ci/in-env.sh python3 ci/suite_census.py [--out DIR] [--top N] [PYTEST_ARGS...]   # the suite, then the tables
    ci/in-env.sh python3 ci/suite_census.py --tables DIR          # the tables of an earlier census folder

The suite runs as `.ci/run` runs it (ci/test.sh), with ci/census/ first on PYTHONPATH: its
sitecustomize logs each Python process's own CPU at exit (and whether it imported torch, dynamo,
transformers), its pytest plugin each test's CPU and wall. The tables: the totals, the processes
by kind, the tests by file, and the xdist groups (a group runs on one worker, in series). Figures
and what they showed: docs/performance.md. Exit: the suite's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
CENSUS = REPO / "ci" / "census"
sys.path.insert(0, str(REPO))  # this checkout's code, whichever checkout the environment installed
from contracts.fileio import atomic_write_json  # noqa: E402


def run_suite(out: Path, pytest_args: list[str]) -> dict[str, Any]:
    """ci/test.sh with the census loggers; its wall time, its CPU (every descendant waited for) and exit."""
    out.mkdir(parents=True, exist_ok=True)
    procs, tests = out / "procs.jsonl", out / "tests.jsonl"
    for log in (procs, tests):
        log.unlink(missing_ok=True)
    path = os.pathsep.join(p for p in (str(CENSUS), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "XTRAIN_CENSUS_PROCS": str(procs),
        "XTRAIN_CENSUS_TESTS": str(tests),
    }
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    code = subprocess.run(["ci/test.sh", "-p", "census_plugin", *pytest_args], cwd=REPO, env=env).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run = {"wall_s": round(time.monotonic() - started, 1), "cpu_s": round(cpu, 1), "exit": code}
    atomic_write_json(out / "run.json", run)
    return run


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise SystemExit(
            f"error: {path}: missing: not a census folder (run ci/suite_census.py --out DIR first)"
        )
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def process_kind(p: dict[str, Any]) -> str:
    """`pipeline/train proc`, `dvc repro`, `torchrun agent`, `python -c`: what a process was."""
    argv = p["argv"] or ["-c"]
    if argv[0] in ("-c", "-"):  # python -c CODE, python - (a script on stdin)
        return "pytest-xdist worker" if p.get("xdist_worker") and not p["test"] else f"python {argv[0]}"
    first = Path(argv[0])
    if first.name == "run.py" and first.parent.name == "distributed":
        return "torchrun agent"
    if first.name == "__main__.py":
        name = first.parent.name  # python -m dvc, gates, registry, pytest
    elif first.parent.name == "bin":
        name = first.name  # a console script: dvc, pytest
    else:
        name = "/".join(filter(None, (first.parent.name, first.stem)))  # pipeline/train, a script
    word = argv[1] if len(argv) > 1 and argv[1].isidentifier() else ""
    return f"{name} {word}".strip()


def by_kind(procs: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "cpu_s": 0.0, "torch": 0})
    for p in procs:
        row = rows[process_kind(p)]
        row["count"] += 1
        row["cpu_s"] += p["user"] + p["sys"]
        row["torch"] += bool(p["torch"])
    return dict(rows)


def by_file(tests: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "cpu_s": 0.0, "wall_s": 0.0})
    for t in tests:
        row = rows[t["id"].split("::")[0]]
        row["count"] += 1
        row["cpu_s"] += t["own"] + t["children"]
        row["wall_s"] += t["wall"]
    return dict(rows)


def xdist_group(nodeid: str) -> str:
    """`--dist loadgroup` suffixes a node id with `@group`, after any parameters (which may hold an @)."""
    tail = nodeid.rsplit("]", 1)[1] if "]" in nodeid else nodeid.rsplit("::", 1)[-1]
    return tail.partition("@")[2] or "(no group)"


def by_group(tests: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Wall seconds per xdist group: a group runs in series on one worker."""
    walls: dict[str, float] = defaultdict(float)
    for t in tests:
        walls[xdist_group(t["id"])] += t["wall"]
    return dict(walls)


def summarise(procs: list[dict[str, Any]], tests: list[dict[str, Any]]) -> dict[str, Any]:
    torch = [p for p in procs if p["torch"]]
    return {
        "processes": len(procs),
        "process_cpu_s": sum(p["user"] + p["sys"] for p in procs),
        "torch_processes": len(torch),
        "torch_process_cpu_s": sum(p["user"] + p["sys"] for p in torch),
        "dynamo_processes": sum(bool(p["dynamo"]) for p in procs),
        "tests": len(tests),
        "test_cpu_s": sum(t["own"] + t["children"] for t in tests),
        "kinds": by_kind(procs),
        "files": by_file(tests),
        "groups": by_group(tests),
    }


def table(title: str, columns: list[str], rows: Iterable[Iterable[Any]]) -> Table:
    t = Table(title=title, title_justify="left")
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i == 0 else "right")
    for row in rows:
        t.add_row(*(f"{v:,.1f}" if isinstance(v, float) else str(v) for v in row))
    return t


def print_tables(s: dict[str, Any], run: dict[str, Any] | None, top: int) -> None:
    console = Console(width=120)
    totals = [(k, v) for k, v in s.items() if not isinstance(v, dict)] + list((run or {}).items())
    console.print(table("census", ["figure", "value"], totals))
    kinds = sorted(s["kinds"].items(), key=lambda kv: -kv[1]["cpu_s"])[:top]
    console.print(table(f"processes by kind (top {top})", ["kind", "count", "CPU s", "torch"],
                        ((k, int(r["count"]), r["cpu_s"], int(r["torch"])) for k, r in kinds)))  # fmt: skip
    files = sorted(s["files"].items(), key=lambda kv: -kv[1]["cpu_s"])[:top]
    console.print(table(f"tests by file (top {top})", ["file", "tests", "CPU s", "wall s"],
                        ((f, int(r["count"]), r["cpu_s"], r["wall_s"]) for f, r in files)))  # fmt: skip
    groups = sorted(s["groups"].items(), key=lambda kv: -kv[1])
    console.print(table("xdist groups (each in series on one worker)", ["group", "wall s"], groups))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/xtrain-census"), help="census folder")
    parser.add_argument(
        "--tables", type=Path, help="print the tables of an earlier census folder; run nothing"
    )
    parser.add_argument("--top", type=int, default=20)
    args, pytest_args = parser.parse_known_args(argv)
    folder = args.tables or args.out
    run = None if args.tables else run_suite(folder, pytest_args)
    if run is None and (folder / "run.json").is_file():
        run = json.loads((folder / "run.json").read_text())
    s = summarise(read_lines(folder / "procs.jsonl"), read_lines(folder / "tests.jsonl"))
    atomic_write_json(folder / "summary.json", s)
    print_tables(s, run, args.top)
    return int(run["exit"]) if run else 0


if __name__ == "__main__":
    sys.exit(main())
