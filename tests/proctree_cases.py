"""Helpers for the process-tree tests: start the real proc launcher, find its tree, snapshot a run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from conftest import REPO, TinyData, tiny_cli
from xtrain.core.rundir import partial_dir

GRACE_S = 5.0  # how long a process of the tree may outlive the launcher


def wait_for(predicate: Callable[[], object], seconds: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def tree(marker: str) -> list[psutil.Process]:
    """Every live process whose command line holds `marker` (the run directory: unique per test)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or []):
                found.append(p)
    return found


def agent(marker: str) -> psutil.Process | None:
    return next((p for p in tree(marker) if "torch.distributed.run" in " ".join(p.cmdline())), None)


def worker(marker: str, rank: int) -> psutil.Process | None:
    for p in tree(marker):
        with contextlib.suppress(psutil.Error):
            if p.environ().get("RANK") == str(rank) and "torch.distributed.run" not in " ".join(p.cmdline()):
                return p
    return None


def kill_all(marker: str) -> None:
    for p in tree(marker):
        with contextlib.suppress(psutil.Error):
            p.kill()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes (and the empty folders): equal = byte-identical trees."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(root.rglob("*"))
    }


def previous_run(run_dir: Path) -> dict[str, bytes]:
    """A run directory holding a previous run's artifacts (and a tracked .gitignore)."""
    (run_dir / "checkpoints" / "step_000002").mkdir(parents=True)
    (run_dir / "checkpoints" / "step_000002" / "state.json").write_text('{"step": 2}')
    (run_dir / "checkpoints" / "latest").write_text("step_000002\n")
    (run_dir / "metrics.json").write_text('{"previous": true}')
    (run_dir / ".gitignore").write_text("/checkpoints\n/metrics.json\n")
    return snapshot(run_dir)


def start_launcher(data: TinyData, run_dir: Path, log: Path, *extra: str) -> subprocess.Popen:
    """`python -m pipeline.train proc` on the tiny config (stderr to `log`), in its own session so
    a test can clean up; the tests signal its pid alone."""
    cmd = [sys.executable, "-m", "pipeline.train", "proc", *tiny_cli(data, run_dir, *extra)]
    with open(log, "w") as err:
        return subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env=os.environ.copy(),
        )


def training(run_dir: Path) -> bool:
    """Both workers are past their first checkpoint in the staging directory."""
    return (partial_dir(run_dir) / "checkpoints" / "latest").exists()


def stop_group(p: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
