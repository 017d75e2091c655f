"""CUDA paths (skipped without a GPU): NCCL through both launchers, bf16 autocast, deterministic reruns.

World = the GPUs present, capped at 2, so a one-GPU runner still drives the NCCL code paths
(torch.cuda.nccl for threads, a NCCL process group for torchrun) at world 1; NCCL_DEBUG=INFO output
proves NCCL ran. Cross-rank agreement needs a second rank: those tests need 2 GPUs. The runs are
shared with tests/gpu/test_ddp_gate_cuda.py (tests/cuda_runs.py).
"""

from __future__ import annotations

import math

import pytest
import torch

from contracts.numbers import max_rel
from proc_runs import ProcRuns

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="cross-rank needs 2 CUDA devices")


def world() -> int:
    return min(2, torch.cuda.device_count())


def uses_nccl(output: str) -> bool:
    return "NCCL INFO" in output


@needs_cuda
def test_single_device_cuda_run_is_deterministic(cuda_runs) -> None:
    first, again = cuda_runs.single(), cuda_runs.single(again=True)
    assert first["env"]["device_type"] == "cuda" and first["precision"] == "bf16"
    assert again["train_loss"] == first["train_loss"]
    assert again["param_digest"] == first["param_digest"]


@needs_cuda
@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_launcher_on_cuda_uses_nccl_and_matches(launcher: str, cuda_runs) -> None:
    run = cuda_runs.launched(launcher, world())
    assert uses_nccl(run.output), f"{launcher}: no NCCL activity in the output"
    assert run.metrics["world"] == world() and run.metrics["device"] == "cuda"
    assert max_rel(run.metrics["train_loss"], cuda_runs.single()["train_loss"]) < 1e-3


@needs_two_gpus
@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_cross_rank_on_two_gpus(launcher: str, cuda_runs) -> None:
    """World 2, so there is another rank to differ from (at world 1 cross_rank cannot fail)."""
    cr = cuda_runs.launched(launcher, 2).metrics["cross_rank"]
    assert [r["rank"] for r in cr["per_rank"]] == [0, 1]
    assert cr["max_abs_diff"] < 1e-6
    sums = [r["param_sum"] for r in cr["per_rank"]]
    assert all(math.isfinite(x) for x in sums) and abs(sums[0] - sums[1]) <= 1e-6 * max(1.0, abs(sums[0]))


def test_nccl_check_fails_on_a_gloo_run(proc_runs: ProcRuns) -> None:
    """Negative control (runs on CPU): a gloo run at world 2, NCCL_DEBUG=INFO, shows no NCCL activity
    (the run test_launchers.py reads: tests/proc_runs.py)."""
    run = proc_runs.get(2)
    assert not uses_nccl(run.output)
    assert run.metrics["world"] == 2
