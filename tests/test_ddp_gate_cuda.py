"""The DDP-equivalence gate on CUDA (skipped without 2 GPUs): the negative controls of
tests/test_ddp_gate.py with NCCL, bf16 autocast and the cuda tier of params.yaml.

Correct DDP must pass at every world the host has (2, 4, 8), through both launchers; each real DDP
bug (summed gradients, a shared shard, an unsynchronised dropout seed) must fail it. The messages
are printed (`pytest -s`): they carry the measured step-0 and prefix differences that calibrate the
cuda tier (docs/ddp-gate.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import REPO, TinyData, tiny_cli, tiny_spec
from gates import ddp
from gates.__main__ import load_thresholds
from gates.outcome import Outcome
from xtrain import faults
from xtrain.launch import run_single, run_threads, torchrun_cmd

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0

pytestmark = [
    pytest.mark.ddp,
    pytest.mark.xdist_group("ddp"),
    pytest.mark.skipif(GPUS < 2, reason="needs 2 CUDA devices"),
]

CUDA = {"device": "cuda", "precision": "bf16", "fused_adamw": True, "steps": 12}
DROPOUT = {"dropout": 0.1, "attn_dropout": 0.1}
LOSS_MATCH = load_thresholds(REPO / "params.yaml")["loss_match"]
BUGS = [
    ("grad_sum@*:0", "first step"),
    ("same_shard@*:0", "samples"),
    ("dropout_unsync@1:0", "dropout masks"),
]


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def verdict(single: dict, run: dict, name: str) -> Outcome:
    outcome = ddp.equivalence(single, run, name, LOSS_MATCH)
    print(f"{name} world {run['world']}: {outcome.status}: {outcome.message}")
    return outcome


def failed_checks(outcome: Outcome) -> list[str]:
    assert outcome.status == "fail", outcome.message
    names = ("samples", "dropout masks", "first step", "prefix", "end")
    return [name for name in names if f"{name}: " in outcome.message]


def thread_run(data: TinyData, run_dir: Path, world: int) -> dict:
    run_threads(tiny_spec(data, launcher="thread", run_dir=run_dir, model=DROPOUT, train=CUDA), world, 120)
    return metrics(run_dir)


def torchrun(data: TinyData, run_dir: Path, world: int, fault: str | None = None) -> dict:
    sets = [*(f"model.{k}={v}" for k, v in DROPOUT.items()), "train.device=cuda", "train.precision=bf16"]
    sets.append("train.fused_adamw=true")
    cmd = torchrun_cmd(world, "xtrain.launch", "proc", *tiny_cli(data, run_dir, *sets))
    env = {k: v for k, v in os.environ.items() if k != "XTRAIN_FAULT"}
    if fault:
        env["XTRAIN_FAULT"] = fault
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return metrics(run_dir)


@pytest.fixture(scope="module")
def single(tiny_data: TinyData, tmp_path_factory) -> dict:
    run_dir = tmp_path_factory.mktemp("cuda-single")
    run_single(tiny_spec(tiny_data, run_dir=run_dir, model=DROPOUT, train=CUDA))
    return metrics(run_dir)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_correct_ddp_on_cuda_passes(tiny_data: TinyData, single: dict, tmp_path: Path, world: int) -> None:
    if world > GPUS:
        pytest.skip(f"needs {world} CUDA devices, {GPUS} present")
    assert verdict(single, thread_run(tiny_data, tmp_path / "thread", world), "thread").status == "pass"
    assert verdict(single, torchrun(tiny_data, tmp_path / "proc", world), "proc").status == "pass"


@pytest.mark.parametrize("fault,check", BUGS)
def test_ddp_bugs_on_cuda_fail_the_gate_thread(
    tiny_data: TinyData, single: dict, tmp_path: Path, monkeypatch, fault: str, check: str
) -> None:
    monkeypatch.setattr(faults, "_FAULT", faults.parse(fault))
    assert check in failed_checks(verdict(single, thread_run(tiny_data, tmp_path, 2), "thread"))


@pytest.mark.parametrize("fault,check", BUGS)
def test_ddp_bugs_on_cuda_fail_the_gate_torchrun(
    tiny_data: TinyData, single: dict, tmp_path: Path, fault: str, check: str
) -> None:
    assert check in failed_checks(verdict(single, torchrun(tiny_data, tmp_path, 2, fault), "proc"))
