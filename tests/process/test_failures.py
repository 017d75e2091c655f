"""A crashed or hung rank ends the whole job quickly, non-zero, naming the rank; nothing is lost or left behind.

A failed run leaves the previous run byte-identical; its checkpoints wait in the staging directory
for --resume; a SIGKILL of the launching process group leaves no torchrun worker running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import REPO, TinyData, tiny_cli
from xtrain.core.launch_plan import torchrun_cmd
from xtrain.core.rundir import partial_dir

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

LIMIT_S = 60


def command(launcher: str, data: TinyData, run_dir: Path, *extra: str) -> list[str]:
    args = tiny_cli(data, run_dir, "launchers.timeout_s=5", "train.steps=40", "train.ckpt_every=2", *extra)
    if launcher == "thread":
        return [sys.executable, "-m", "pipeline.train", "thread", "--world", "2", *args]
    return torchrun_cmd(2, "pipeline.train", "proc", *args)


def launch(
    launcher: str, data: TinyData, run_dir: Path, fault: str
) -> tuple[subprocess.CompletedProcess, float]:
    cmd = command(launcher, data, run_dir)
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=LIMIT_S + 30,
        env={**os.environ, "XTRAIN_FAULT": fault},
    )
    return proc, time.monotonic() - t0


def leftovers(marker: str) -> list[str]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd:
            found.append(cmd)
    return found


def our_traceback(stderr: str) -> bool:
    """A traceback through the project's code (torchrun's agent prints its own; that is not ours)."""
    return any(line.strip().startswith('File "') and "/xtrain/" in line for line in stderr.splitlines())


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes: equal snapshots = byte-identical trees."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def previous_run(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A run directory holding a previous run's artifacts (and a tracked .gitignore)."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints" / "step_000002").mkdir(parents=True)
    (run_dir / "checkpoints" / "step_000002" / "state.json").write_text('{"step": 2}')
    (run_dir / "checkpoints" / "latest").write_text("step_000002\n")
    (run_dir / "metrics.json").write_text('{"previous": true}')
    (run_dir / ".gitignore").write_text("/checkpoints\n/metrics.json\n")
    return run_dir, snapshot(run_dir)


def assert_nothing_lost_or_half_written(run_dir: Path, before: dict[str, bytes]) -> None:
    assert snapshot(run_dir) == before, "the failed run changed the previous run"
    staging = partial_dir(run_dir)
    assert not [p for p in staging.rglob("*") if p.name.startswith(".")], "temporary files left behind"
    assert not (staging / "metrics.json").exists()
    latest = (staging / "checkpoints" / "latest").read_text().strip()  # what --resume continues from
    assert sorted(f.name for f in (staging / "checkpoints" / latest).iterdir()) == [
        "model.safetensors",
        "optimizer.safetensors",
        "state.json",
        "tokenizer.json",
    ]


@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_a_rank_that_raises_fails_the_job(
    tiny_data: TinyData, previous_run: tuple[Path, dict], launcher: str
) -> None:
    run_dir, before = previous_run
    proc, seconds = launch(launcher, tiny_data, run_dir, "raise@1:5")
    assert proc.returncode != 0
    assert seconds < LIMIT_S
    assert "rank 1 failed: InjectedFault: injected fault at step 5" in proc.stderr, proc.stderr[-2000:]
    assert not our_traceback(proc.stderr), proc.stderr[-2000:]
    assert not leftovers(str(run_dir))
    assert_nothing_lost_or_half_written(run_dir, before)


@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_a_hung_rank_times_out_and_is_named(
    tiny_data: TinyData, previous_run: tuple[Path, dict], launcher: str
) -> None:
    run_dir, before = previous_run
    proc, seconds = launch(launcher, tiny_data, run_dir, "hang@1:5")
    assert proc.returncode != 0
    assert seconds < LIMIT_S, seconds
    assert "rank 0 failed:" in proc.stderr and "ranks [1] never arrived" in proc.stderr, proc.stderr[-2000:]
    assert not leftovers(str(run_dir))
    assert_nothing_lost_or_half_written(run_dir, before)


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def test_no_worker_outlives_a_sigkilled_process_group(tiny_data: TinyData, previous_run) -> None:
    """What `dvc repro` does to torchrun when the whole group is killed: workers (own sessions) die too."""
    run_dir, before = previous_run
    cmd = command("proc", tiny_data, run_dir, "train.steps=100000", "train.ckpt_every=0")
    group = subprocess.Popen(
        cmd, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        workers = lambda: [c for c in leftovers(str(run_dir)) if "torch.distributed.run" not in c]  # noqa: E731
        assert wait_for(lambda: len(workers()) == 2, 60), "the workers never started"
        assert wait_for(lambda: partial_dir(run_dir).exists(), 60)  # training has begun
        os.killpg(group.pid, signal.SIGKILL)
        group.wait(10)
        assert wait_for(lambda: not leftovers(str(run_dir)), 5), leftovers(str(run_dir))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group.pid, signal.SIGKILL)
    assert snapshot(run_dir) == before


ORPHAN = """
import os, subprocess, sys, time
child = '''
import sys, time
if sys.argv[1] == "watched":
    from xtrain.core.launch import die_with_parent
    die_with_parent()
open(sys.argv[3], "w").close()
time.sleep(120)
'''
# Like torchrun's agent: each worker in its own session, so a group kill does not reach it.
subprocess.Popen([sys.executable, "-c", child, *sys.argv[1:]], start_new_session=True)
time.sleep(120)
"""


@pytest.mark.parametrize(("mode", "survives"), [("watched", False), ("unwatched", True)])
def test_a_worker_dies_with_its_agent(tmp_path: Path, mode: str, survives: bool) -> None:
    """die_with_parent, on a real process tree; the unwatched child is the negative control."""
    marker = f"orphan-{mode}-{tmp_path.name}"
    ready = tmp_path / "armed"
    agent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, mode, marker, str(ready)], cwd=REPO, start_new_session=True
    )
    try:
        assert wait_for(ready.exists, 60), "the child never started"
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait(10)
        assert wait_for(lambda: not leftovers(marker), 5) is not survives
    finally:
        for p in psutil.process_iter(["cmdline"]):
            if marker in " ".join(p.info["cmdline"] or []):
                p.kill()
