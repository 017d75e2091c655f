"""CUDA paths (skipped without a GPU): NCCL through both launchers, bf16 autocast, deterministic reruns.

World = the GPUs present, capped at 2, so a one-GPU runner still drives the NCCL code paths
(torch.cuda.nccl for threads, a NCCL process group for torchrun) at world 1; NCCL_DEBUG=INFO output
proves NCCL ran. Cross-rank agreement needs a second rank: those tests need 2 GPUs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO, TinyData, tiny_cli, tiny_spec
from contracts.numbers import max_rel
from xtrain.launch import run_single, torchrun_cmd

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="cross-rank needs 2 CUDA devices")

CUDA = {"device": "cuda", "precision": "bf16", "fused_adamw": True, "steps": 12}
CUDA_SETS = ("train.device=cuda", "train.precision=bf16", "train.fused_adamw=true")


def world() -> int:
    return min(2, torch.cuda.device_count())


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.fixture(scope="module")
def single(tiny_data: TinyData, tmp_path_factory) -> dict:
    run_dir = tmp_path_factory.mktemp("cuda-single")
    run_single(tiny_spec(tiny_data, run_dir=run_dir, train=CUDA))
    return metrics(run_dir)


@needs_cuda
def test_single_device_cuda_run_is_deterministic(tiny_data: TinyData, single: dict, tmp_path: Path) -> None:
    run_single(tiny_spec(tiny_data, run_dir=tmp_path, train=CUDA))
    again = metrics(tmp_path)
    assert single["env"]["device_type"] == "cuda" and single["precision"] == "bf16"
    assert again["train_loss"] == single["train_loss"]
    assert again["param_digest"] == single["param_digest"]


def launch(launcher: str, run_dir: Path, tiny_data: TinyData, world: int, device: str = "cuda") -> str:
    """The real launcher command with NCCL_DEBUG=INFO: its output shows whether NCCL ran."""
    sets = CUDA_SETS if device == "cuda" else ()
    args = tiny_cli(tiny_data, run_dir, *sets)
    if launcher == "thread":
        cmd = [sys.executable, "-m", "xtrain.launch", "thread", "--world", str(world), *args]
    else:
        cmd = torchrun_cmd(world, "xtrain.launch", "proc", *args)
    env = {**os.environ, "NCCL_DEBUG": "INFO"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def uses_nccl(output: str) -> bool:
    return "NCCL INFO" in output


@needs_cuda
@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_launcher_on_cuda_uses_nccl_and_matches(
    launcher: str, tiny_data: TinyData, single: dict, tmp_path: Path
) -> None:
    output = launch(launcher, tmp_path, tiny_data, world())
    assert uses_nccl(output), f"{launcher}: no NCCL activity in the output"
    m = metrics(tmp_path)
    assert m["world"] == world() and m["device"] == "cuda"
    assert max_rel(m["train_loss"], single["train_loss"]) < 1e-3


@needs_two_gpus
@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_cross_rank_on_two_gpus(launcher: str, tiny_data: TinyData, tmp_path: Path) -> None:
    """World 2, so there is another rank to differ from (at world 1 cross_rank cannot fail)."""
    launch(launcher, tmp_path, tiny_data, 2)
    cr = metrics(tmp_path)["cross_rank"]
    assert [r["rank"] for r in cr["per_rank"]] == [0, 1]
    assert cr["max_abs_diff"] < 1e-6
    sums = [r["param_sum"] for r in cr["per_rank"]]
    assert all(math.isfinite(x) for x in sums) and abs(sums[0] - sums[1]) <= 1e-6 * max(1.0, abs(sums[0]))


def test_nccl_check_fails_on_a_gloo_run(tiny_data: TinyData, tmp_path: Path) -> None:
    """Negative control (runs on CPU): a gloo run at world 2 shows no NCCL activity."""
    assert not uses_nccl(launch("proc", tmp_path, tiny_data, 2, device="cpu"))
    assert metrics(tmp_path)["world"] == 2
