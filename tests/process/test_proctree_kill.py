"""The proc launcher owns its process tree (xtrain/core/proctree.py), on real torchrun.

Whatever kills the launcher (its pid alone, SIGKILL or SIGTERM, or `dvc repro` above it), no agent
or worker outlives it by more than GRACE_S and the previous run is untouched, also afterwards; a
stopped rank is named within launchers.timeout_s plus a few seconds; a killed agent or worker is
named in one line. The bare launcher (torchrun under a plain subprocess.run, as before) is the
negative control: its tree outlives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, TinyData, code_first, tiny_cli
from proctree_cases import (
    GRACE_S,
    agent,
    kill_all,
    previous_run,
    snapshot,
    start_launcher,
    stop_group,
    training,
    tree,
    wait_for,
    worker,
)
from xtrain.core.launch_plan import torchrun_cmd
from xtrain.core.rundir import partial_dir

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

LONG = ("train.steps=100000", "train.ckpt_every=2", "train.log_every=1000")
START_S = 120  # torchrun's start on a loaded 2-core box


def _kill_and_time(pid: int, sig: int, marker: str, launcher: set[int] | None = None) -> tuple[float, float]:
    """Seconds from the signal to `pid` until every process of the tree but the launcher (default:
    `pid`; with the shell dvc runs it in) is gone, and until the launcher too."""
    launcher = {pid} if launcher is None else launcher
    t0 = time.monotonic()
    os.kill(pid, sig)
    assert wait_for(lambda: all(p.pid in launcher for p in tree(marker)), 30), [
        p.cmdline() for p in tree(marker)
    ]
    rest = time.monotonic() - t0
    assert wait_for(lambda: not tree(marker), 30)
    return rest, time.monotonic() - t0


def _launcher_pids(marker: str) -> set[int]:
    """The launcher under dvc: the process of the tree that is neither the agent nor a worker, and
    the `sh -c` dvc runs it in where that shell stays (dash does; bash execs the command)."""
    found = [
        p for p in tree(marker) if "RANK" not in p.environ() and "torch.distributed.run" not in p.cmdline()
    ]
    pythons = [p for p in found if "pipeline.train" in p.cmdline()]
    assert len(pythons) == 1, [p.cmdline() for p in found]
    return {p.pid for p in found}


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_launcher_pid_kills_its_tree(tiny_data: TinyData, tmp_path: Path, sig: int) -> None:
    run_dir = tmp_path / "run"
    before = previous_run(run_dir)
    launcher = start_launcher(tiny_data, run_dir, tmp_path / "err.txt", *LONG)
    marker = str(run_dir)
    try:
        assert wait_for(lambda: training(run_dir), START_S, 0.2), (tmp_path / "err.txt").read_text()[-2000:]
        rest, gone = _kill_and_time(launcher.pid, sig, marker)
        name = signal.Signals(sig).name
        print(
            f"{name} to the launcher: agent and workers gone after {rest:.2f} s, the launcher after {gone:.2f} s"
        )
        assert rest < GRACE_S
        assert launcher.wait(5) == (-sig if sig == signal.SIGKILL else 128 + sig)
        assert snapshot(run_dir) == before
        time.sleep(2)  # nothing is written after the launcher is gone
        assert snapshot(run_dir) == before
    finally:
        stop_group(launcher)
        kill_all(marker)
    if sig == signal.SIGTERM:
        err = (tmp_path / "err.txt").read_text()
        assert "error: launcher: SIGTERM: its torchrun agent and workers were killed" in err, err[-2000:]


def test_negative_control_a_bare_launcher_orphans_its_tree(tiny_data: TinyData, tmp_path: Path) -> None:
    """torchrun under a plain subprocess.run (the launcher before this change): SIGKILL to it leaves
    the agent and both workers running: what the test above would see without xtrain/core/proctree.py."""
    run_dir = tmp_path / "run"
    cmd = torchrun_cmd(2, "pipeline.train", "proc", *tiny_cli(tiny_data, run_dir, *LONG))
    bare = f"import subprocess, sys; sys.exit(subprocess.run({cmd!r}).returncode)"
    launcher = subprocess.Popen(
        [sys.executable, "-c", bare], cwd=REPO, stdout=subprocess.DEVNULL, start_new_session=True
    )
    marker = str(run_dir)
    try:
        assert wait_for(lambda: training(run_dir), START_S, 0.2)
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(5)
        time.sleep(GRACE_S)
        assert len(tree(marker)) == 3  # the agent and both workers outlived their launcher
    finally:
        stop_group(launcher)
        kill_all(marker)


def test_a_stopped_rank_is_named_within_the_timeout(tiny_data: TinyData, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    before = previous_run(run_dir)
    timeout_s = 10
    launcher = start_launcher(
        tiny_data, run_dir, tmp_path / "err.txt", *LONG, f"launchers.timeout_s={timeout_s}"
    )
    marker = str(run_dir)
    try:
        assert wait_for(lambda: training(run_dir), START_S, 0.2)
        rank1 = worker(marker, 1)
        assert rank1 is not None
        t0 = time.monotonic()
        rank1.suspend()  # SIGSTOP
        code = launcher.wait(timeout_s + 60)
        named = time.monotonic() - t0
        err = (tmp_path / "err.txt").read_text()
        print(f"SIGSTOP rank 1: named after {named:.1f} s (launchers.timeout_s={timeout_s})")
        assert code == 1
        assert f"error: rank 1 (pid {rank1.pid}) hung: no heartbeat for" in err, err[-2000:]
        assert "it is stopped (SIGSTOP?)" in err
        assert named < timeout_s + 8
        assert wait_for(lambda: not tree(marker), GRACE_S)
        assert snapshot(run_dir) == before
    finally:
        stop_group(launcher)
        kill_all(marker)


@pytest.mark.parametrize("target", ["agent", "worker"])
def test_a_killed_agent_or_worker_is_named(tiny_data: TinyData, tmp_path: Path, target: str) -> None:
    run_dir = tmp_path / "run"
    before = previous_run(run_dir)
    launcher = start_launcher(tiny_data, run_dir, tmp_path / "err.txt", *LONG)
    marker = str(run_dir)
    try:
        assert wait_for(lambda: training(run_dir), START_S, 0.2)
        victim = agent(marker) if target == "agent" else worker(marker, 1)
        assert victim is not None
        victim.kill()
        assert launcher.wait(30) == 1
        err = (tmp_path / "err.txt").read_text()
        last = [line for line in err.splitlines() if line.startswith("error: ")][-1]
        expected = (
            f"error: torchrun agent (pid {victim.pid}) was killed by SIGKILL"
            if target == "agent"
            else f"error: rank 1 (pid {victim.pid}) died without a word"
        )
        assert last.startswith(expected), err[-2000:]
        assert wait_for(lambda: not tree(marker), GRACE_S)
        assert snapshot(run_dir) == before
    finally:
        stop_group(launcher)
        kill_all(marker)


DVC_YAML = """stages:
  train:
    cmd: {cmd}
    outs:
      - run/metrics.json
"""


@pytest.mark.parametrize("shell", ["/bin/sh", "/bin/bash"])
def test_sigterm_to_dvc_repro_kills_the_launchers_tree(
    tiny_data: TinyData, tmp_path: Path, shell: str
) -> None:
    """SIGTERM to the `dvc repro` pid alone: dvc dies at once; the launcher (DVC_STAGE set) dies with
    it and takes its tree along; nothing is written to the run or dvc.lock afterwards. dvc runs the
    stage in $SHELL -c: Debian's dash stays between dvc and the launcher, bash does not."""
    import shlex

    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "pipeline.train", "proc", *tiny_cli(tiny_data, run_dir, *LONG)]
    (tmp_path / "dvc.yaml").write_text(DVC_YAML.format(cmd=shlex.join(cmd)))
    env = {**code_first(REPO), "DVC_NO_ANALYTICS": "1", "SHELL": shell}
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True, env=env)
    dvc = subprocess.Popen(
        ["dvc", "repro"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    marker = str(run_dir)
    try:
        assert wait_for(lambda: training(run_dir), START_S, 0.2)
        rest, gone = _kill_and_time(dvc.pid, signal.SIGTERM, marker, _launcher_pids(marker))
        print(
            f"SIGTERM to dvc repro: agent and workers gone after {rest:.2f} s, the launcher after {gone:.2f} s"
        )
        assert rest < GRACE_S
        after = snapshot(run_dir)
        time.sleep(2)
        assert snapshot(run_dir) == after and "metrics.json" not in after
        assert not (tmp_path / "dvc.lock").exists()
    finally:
        stop_group(dvc)
        kill_all(marker)


def test_after_sigint_to_dvc_repro_the_launcher_says_what_is_on_disk(
    tiny_data: TinyData, tmp_path: Path
) -> None:
    """Ctrl-C (SIGINT to the foreground group) of `dvc repro -s -f train`: DVC had removed the run
    folder before it started the stage, and main's launcher said "run is unchanged". Its last word
    is what is on disk now: no run, already absent when it started, and how to get DVC's back."""
    import shlex

    run_dir = tmp_path / "run"
    previous_run(run_dir)
    cmd = [sys.executable, "-m", "pipeline.train", "proc", *tiny_cli(tiny_data, run_dir, *LONG)]
    (tmp_path / "dvc.yaml").write_text(
        f"stages:\n  train:\n    cmd: {shlex.join(cmd)}\n    outs:\n      - run\n"
    )
    env = {**code_first(REPO), "DVC_NO_ANALYTICS": "1"}
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path, check=True, env=env)
    with open(tmp_path / "err.txt", "w") as err:
        dvc = subprocess.Popen(
            [sys.executable, "-m", "dvc", "repro", "-s", "-f", "train"], cwd=tmp_path, env=env,
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
        )  # fmt: skip
    marker = str(run_dir)
    try:
        assert wait_for(lambda: training(run_dir), START_S, 0.2), (tmp_path / "err.txt").read_text()[-2000:]
        assert not run_dir.exists()  # DVC removed the stage's output before it ran the stage
        os.killpg(dvc.pid, signal.SIGINT)
        dvc.wait(60)
        assert wait_for(lambda: not tree(marker), GRACE_S)
        said = [x for x in (tmp_path / "err.txt").read_text().splitlines() if x.startswith("error: launcher")]
        assert said == [
            f"error: launcher: SIGINT: its torchrun agent and workers were killed; {run_dir} holds no run: it "
            "was already absent when this launcher started (DVC removes a stage's outputs before it runs it; "
            "`dvc checkout train` restores them); the interrupted run's checkpoints are in "
            f"{partial_dir(run_dir)} (--resume continues from them)"
        ], (tmp_path / "err.txt").read_text()[-3000:]
        assert not run_dir.exists()
    finally:
        stop_group(dvc)
        kill_all(marker)
