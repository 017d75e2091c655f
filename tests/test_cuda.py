"""CUDA paths (skipped without a GPU): NCCL through both launchers, bf16 autocast, deterministic reruns.

World = the GPUs present, capped at 2, so a one-GPU runner still drives the NCCL code paths
(torch.cuda.nccl for threads, DDP over a process group for torchrun) at world 1.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import REPO, TinyData, tiny_cli, tiny_spec
from contracts.numbers import max_rel
from xtrain.launch import run_single, run_threads, torchrun_cmd

pytestmark = [
    pytest.mark.ddp,
    pytest.mark.xdist_group("ddp"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

CUDA = {"device": "cuda", "precision": "bf16", "fused_adamw": True, "steps": 12}


def world() -> int:
    return min(2, torch.cuda.device_count())


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.fixture(scope="module")
def single(tiny_data: TinyData, tmp_path_factory) -> dict:
    run_dir = tmp_path_factory.mktemp("cuda-single")
    run_single(tiny_spec(tiny_data, run_dir=run_dir, train=CUDA))
    return metrics(run_dir)


def test_single_device_cuda_run_is_deterministic(tiny_data: TinyData, single: dict, tmp_path: Path) -> None:
    run_single(tiny_spec(tiny_data, run_dir=tmp_path, train=CUDA))
    again = metrics(tmp_path)
    assert single["env"]["device_type"] == "cuda" and single["precision"] == "bf16"
    assert again["train_loss"] == single["train_loss"]
    assert again["param_digest"] == single["param_digest"]


def test_thread_launcher_on_cuda_uses_nccl_and_matches(
    tiny_data: TinyData, single: dict, tmp_path: Path
) -> None:
    run_threads(tiny_spec(tiny_data, launcher="thread", run_dir=tmp_path, train=CUDA), world(), 60)
    m = metrics(tmp_path)
    assert m["world"] == world() and m["device"] == "cuda"
    assert max_rel(m["train_loss"], single["train_loss"]) < 1e-3
    assert m["cross_rank"]["max_abs_diff"] < 1e-6


def test_torchrun_launcher_on_cuda_uses_nccl_and_matches(
    tiny_data: TinyData, single: dict, tmp_path: Path
) -> None:
    sets = ["train.device=cuda", "train.precision=bf16", "train.fused_adamw=true"]
    cmd = torchrun_cmd(world(), "xtrain.launch", "proc", *tiny_cli(tiny_data, tmp_path, *sets))
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env={**os.environ}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = metrics(tmp_path)
    assert m["world"] == world() and m["device"] == "cuda"
    assert max_rel(m["train_loss"], single["train_loss"]) < 1e-3
    assert m["cross_rank"]["max_abs_diff"] < 1e-6
