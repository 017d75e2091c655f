"""A crashed or hung rank ends the whole job quickly, non-zero, naming the rank; nothing is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import REPO, TinyData, tiny_cli
from xtrain.launch import torchrun_cmd

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

LIMIT_S = 60


def launch(
    launcher: str, data: TinyData, run_dir: Path, fault: str
) -> tuple[subprocess.CompletedProcess, float]:
    args = tiny_cli(data, run_dir, "launchers.timeout_s=5", "train.steps=40", "train.ckpt_every=2")
    if launcher == "thread":
        cmd = [sys.executable, "-m", "xtrain.launch", "thread", "--world", "2", *args]
    else:
        cmd = torchrun_cmd(2, "xtrain.launch", "proc", *args)
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


def assert_nothing_half_written(run_dir: Path) -> None:
    assert not (run_dir / "metrics.json").exists()
    assert not [p for p in run_dir.rglob("*") if p.name.startswith(".")], "temporary files left behind"
    latest = (run_dir / "checkpoints" / "latest").read_text().strip()
    assert sorted(f.name for f in (run_dir / "checkpoints" / latest).iterdir()) == [
        "model.safetensors",
        "optimizer.safetensors",
        "state.json",
        "tokenizer.json",
    ]


@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_a_rank_that_raises_fails_the_job(tiny_data: TinyData, tmp_path: Path, launcher: str) -> None:
    proc, seconds = launch(launcher, tiny_data, tmp_path, "raise@1:5")
    assert proc.returncode != 0
    assert seconds < LIMIT_S
    assert "rank 1 failed: InjectedFault: injected fault at step 5" in proc.stderr, proc.stderr[-2000:]
    assert not leftovers(str(tmp_path))
    assert_nothing_half_written(tmp_path)


@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_a_hung_rank_times_out_instead_of_hanging(tiny_data: TinyData, tmp_path: Path, launcher: str) -> None:
    proc, seconds = launch(launcher, tiny_data, tmp_path, "hang@1:5")
    assert proc.returncode != 0
    assert seconds < LIMIT_S, seconds
    if launcher == "thread":
        assert "rank 0 failed: CollectiveTimeout" in proc.stderr and "ranks [1] never arrived" in proc.stderr
    else:  # gloo's own timeout message, then our one line naming the rank that saw it
        assert "rank 0 failed:" in proc.stderr and "imed out" in proc.stderr, proc.stderr[-2000:]
    assert not leftovers(str(tmp_path))
    assert_nothing_half_written(tmp_path)
