"""xtrain/core/proctree.py on a small real process tree shaped like torchrun's (no torch: about a second each).

The "agent" is a Python process that starts one worker per rank in its own session, as torchrun
does, and stops the others with SIGTERM when one fails; each worker runs the real WorkerGuard.
Negative controls: the same tree under a plain subprocess.run outlives a killed launcher; a rank
that never reports success fails a run whose agent exits 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import REPO
from proctree_cases import GRACE_S, kill_all, tree, wait_for
from xtrain.core import proctree

AGENT = """
import os, subprocess, sys, time
marker, modes = sys.argv[1], sys.argv[2].split(",")
WORKER = '''
import os, signal, sys, time
if sys.argv[1] == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
from xtrain.core import proctree
proctree.set_parent_death_signal(signal.SIGKILL)  # as pipeline.train's workers (die_with_parent)
guard = proctree.guard_worker(int(os.environ["RANK"]))
mode = sys.argv[1]
if mode == "late":
    time.sleep(1)
if mode in ("ok", "late"):
    guard and guard.mark(0)
    sys.exit(0)
if mode == "quiet":
    sys.exit(0)
if mode == "fail":
    guard.exit(1, "error", "rank failed: boom")
while True:
    time.sleep(0.05)
'''
procs = [
    subprocess.Popen([sys.executable, "-c", WORKER, m, marker], env={**os.environ, "RANK": str(r)},
                     start_new_session=True)
    for r, m in enumerate(modes)
]
while True:
    codes = [p.poll() for p in procs]
    if any(c not in (None, 0) for c in codes):
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            p.wait()
        sys.exit(1)
    if all(c == 0 for c in codes):
        sys.exit(int(sys.argv[3]) if len(sys.argv) > 3 else 0)  # argv[3]: the agent fails after its ranks
    time.sleep(0.05)
"""


def agent_cmd(marker: str, *modes: str, agent_rc: int | None = None) -> list[str]:
    rc = [] if agent_rc is None else [str(agent_rc)]
    return [sys.executable, "-c", AGENT, marker, ",".join(modes), *rc]


@pytest.fixture()
def marker(tmp_path: Path):
    name = f"proctree-{uuid.uuid4().hex[:12]}-{tmp_path.name}"  # tmp_path.name repeats across xdist workers
    yield name
    kill_all(name)


@pytest.fixture(autouse=True)
def _repo_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


def test_every_rank_reporting_success_is_exit_0(marker: str) -> None:
    assert proctree.supervise(agent_cmd(marker, "ok", "ok"), 2, 10) == 0
    assert not tree(marker)


def test_negative_control_a_rank_that_never_reports_fails_the_run(marker: str) -> None:
    with pytest.raises(
        proctree.TreeFailed, match=r"torchrun exited 0 but ranks \[1\] never reported success"
    ):
        proctree.supervise(agent_cmd(marker, "ok", "quiet"), 2, 10)


def test_a_rank_that_fails_speaks_for_itself(marker: str, capfd: pytest.CaptureFixture) -> None:
    assert proctree.supervise(agent_cmd(marker, "fail", "hang"), 2, 10) == 1
    assert "error: rank failed: boom" in capfd.readouterr().err
    assert wait_for(lambda: not tree(marker), GRACE_S)


def test_an_agent_failing_after_every_rank_succeeded_is_named(marker: str) -> None:
    """Found by tests/process/test_proctree_property.py (SIGINT to torchrun's agent as its ranks finished: exit
    1 and no line): the ranks' success reports are not a failing rank that said why."""
    with pytest.raises(
        proctree.TreeFailed,
        match=r"torchrun agent \(pid \d+\) exited 1 after ranks \[0, 1\] reported success: it was signalled",
    ):
        proctree.supervise(agent_cmd(marker, "ok", "ok", agent_rc=1), 2, 10)
    assert wait_for(lambda: not tree(marker), GRACE_S)


def _stop_rank_1_when_beating(marker: str, sig: int) -> None:
    def act() -> None:
        wait_for(lambda: len(tree(marker)) == 3, 30)  # the agent and two workers
        rank1 = next(p for p in tree(marker) if p.environ().get("RANK") == "1")
        wait_for(lambda: (Path(rank1.environ()[proctree.HEARTBEAT_ENV]) / "rank-1.beat").exists(), 30)
        rank1.send_signal(sig)

    threading.Thread(target=act, daemon=True).start()


def test_a_stopped_rank_is_named(marker: str) -> None:
    _stop_rank_1_when_beating(marker, signal.SIGSTOP)
    t0 = time.monotonic()
    with pytest.raises(proctree.TreeFailed, match=r"rank 1 \(pid \d+\) hung: .* it is stopped \(SIGSTOP\?\)"):
        proctree.supervise(agent_cmd(marker, "hang", "hang"), 2, 2)
    assert time.monotonic() - t0 < 2 + 15
    assert wait_for(lambda: not tree(marker), GRACE_S)


def test_a_rank_stopped_before_its_first_heartbeat_is_named(marker: str) -> None:
    """rank 1 is stopped at once (a worker stopped while importing torch): it never beats."""
    with pytest.raises(proctree.TreeFailed, match=r"rank 1 never started: no heartbeat"):
        proctree.supervise(agent_cmd(marker, "hang", "stop"), 2, 2)
    assert wait_for(lambda: not tree(marker), GRACE_S)


def test_a_silently_killed_rank_is_named(marker: str) -> None:
    _stop_rank_1_when_beating(marker, signal.SIGKILL)
    with pytest.raises(proctree.TreeFailed, match=r"rank 1 \(pid \d+\) died without a word"):
        proctree.supervise(agent_cmd(marker, "hang", "hang"), 2, 30)
    assert wait_for(lambda: not tree(marker), GRACE_S)


def test_a_terminated_rank_is_named_with_its_sender(marker: str) -> None:
    _stop_rank_1_when_beating(marker, signal.SIGTERM)
    with pytest.raises(
        proctree.TreeFailed, match=rf"rank 1 \(pid \d+\) was stopped by SIGTERM from pid {os.getpid()}"
    ):
        proctree.supervise(agent_cmd(marker, "hang", "hang"), 2, 30)


def test_a_stopped_agent_is_named(marker: str) -> None:
    """Both ranks finish, but the agent was stopped: the launcher does not wait forever."""

    def stop_agent() -> None:
        wait_for(lambda: len(tree(marker)) == 3, 30)  # the agent and its two workers
        next(p for p in tree(marker) if "late,late" in p.cmdline()).suspend()

    threading.Thread(target=stop_agent, daemon=True).start()
    with pytest.raises(
        proctree.TreeFailed, match=r"torchrun agent \(pid \d+\) hung: .* after its last rank exited"
    ):
        proctree.supervise(agent_cmd(marker, "late", "late"), 2, 2)
    assert wait_for(lambda: not tree(marker), GRACE_S)


LAUNCHER = """
import subprocess, sys
from xtrain.core import proctree
cmd = sys.argv[2:]
if sys.argv[1] == "owned":
    sys.exit(proctree.supervise(cmd, 2, 30))
sys.exit(subprocess.run(cmd).returncode)  # the bare launcher: the negative control
"""


@pytest.mark.parametrize(("mode", "survives"), [("owned", False), ("bare", True)])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_tree_dies_with_its_launcher(marker: str, mode: str, survives: bool, sig: int) -> None:
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, mode, *agent_cmd(marker, "hang", "hang")],
        cwd=REPO,
        start_new_session=True,
    )
    assert wait_for(lambda: len(tree(marker)) == 4, 30)  # the launcher, the agent and two workers
    time.sleep(0.5)  # the guards are armed
    os.kill(launcher.pid, sig)
    launcher.wait(10)
    assert wait_for(lambda: not tree(marker), GRACE_S) is not survives
