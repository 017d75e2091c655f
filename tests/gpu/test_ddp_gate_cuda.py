"""The DDP-equivalence gate on CUDA (skipped without 2 GPUs): the negative controls of
tests/process/test_ddp_gate.py with NCCL, bf16 autocast and the cuda tier of params.yaml.

Correct DDP must pass at every world the host has (2, 4, 8), through both launchers; each real DDP
bug (summed gradients, a shared shard, an unsynchronised dropout seed) must fail it through the
thread launcher, and the gradient bug, the one that lives in the communicator, through torchrun too
(sampler and dropout seeds are launcher-independent code; the CPU suite runs all three through
torchrun, and each torchrun start costs the nightly ~15 s). The messages are printed (`pytest -s`): they carry the measured step-0 and prefix
differences that calibrate the cuda tier (docs/ddp-gate.md). Runs are shared with
tests/gpu/test_cuda.py (tests/cuda_runs.py).
"""

from __future__ import annotations

import pytest
import torch

from bug_layer import xtrain_bugs as bugs
from conftest import PARAMS
from gates.judges import ddp
from gates.judges.outcome import Outcome
from params.config import load_thresholds

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0

pytestmark = [
    pytest.mark.ddp,
    pytest.mark.xdist_group("ddp"),
    pytest.mark.skipif(GPUS < 2, reason="needs 2 CUDA devices"),
]

LOSS_MATCH = load_thresholds(PARAMS)["loss_match"]
BUGS = [
    ("grad_sum@*:0", "first step"),
    ("same_shard@*:0", "samples"),
    ("dropout_unsync@1:0", "dropout masks"),
]


def verdict(single: dict, run: dict, name: str) -> Outcome:
    outcome = ddp.equivalence(single, run, name, LOSS_MATCH)
    print(f"{name} world {run['world']}: {outcome.status}: {outcome.message}")
    return outcome


def failed_checks(outcome: Outcome) -> list[str]:
    assert outcome.status == "fail", outcome.message
    names = ("samples", "dropout masks", "first step", "prefix", "end")
    return [name for name in names if f"{name}: " in outcome.message]


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_correct_ddp_on_cuda_passes(cuda_runs, launcher: str, world: int) -> None:
    if world > GPUS:
        pytest.skip(f"needs {world} CUDA devices, {GPUS} present")
    run = cuda_runs.launched(launcher, world).metrics
    assert verdict(cuda_runs.single(), run, launcher).status == "pass"


@pytest.mark.parametrize("fault,check", BUGS)
def test_ddp_bugs_on_cuda_fail_the_gate_thread(cuda_runs, monkeypatch, fault: str, check: str) -> None:
    bugs.inject(monkeypatch, fault)
    assert check in failed_checks(verdict(cuda_runs.single(), cuda_runs.threads(2), "thread"))


@pytest.mark.parametrize("fault,check", BUGS[:1])
def test_ddp_bugs_on_cuda_fail_the_gate_torchrun(cuda_runs, fault: str, check: str) -> None:
    run = cuda_runs.launched("proc", 2, fault=fault).metrics
    assert check in failed_checks(verdict(cuda_runs.single(), run, "proc"))
