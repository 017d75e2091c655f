"""Where a step's time goes (xtrain/bench/step_profile.py): the interval arithmetic on hand-made timelines,
a real profiled step on this CPU, and `pipeline.scaling --profile` through both real launchers
(the gate tree runs it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from xtrain.bench.step_profile import breakdown, is_collective, profile_step, union_us

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def test_union_counts_overlaps_once() -> None:
    assert union_us([]) == 0
    assert union_us([(0, 10), (5, 15), (20, 25)]) == 20
    assert union_us([(0, 10), (2, 3)]) == 10  # nested
    assert union_us([(5, 6), (0, 1)]) == 2  # unsorted


def test_collectives_are_named_by_their_kernels() -> None:
    assert is_collective(NCCL)
    assert not is_collective(GEMM)


def test_an_overlapped_all_reduce_is_not_exposed() -> None:
    # backward compute 0-10 ms, the all-reduce 2-8 ms inside it; 20 ms of wall time
    p = breakdown([(GEMM, 0, 10_000), (NCCL, 2_000, 8_000)], wall_s=0.020, host_s=0.019, steps=1)
    assert (p["gpu_busy_ms"], p["compute_ms"], p["comm_ms"], p["comm_only_ms"]) == (10, 10, 6, 0)
    assert p["gpu_idle_ms"] == pytest.approx(10)
    assert p["gpu_busy_frac"] == pytest.approx(0.5)


def test_an_all_reduce_after_backward_is_exposed() -> None:
    # the negative control of the overlap figure: the same all-reduce, after compute has ended
    p = breakdown([(GEMM, 0, 10_000), (NCCL, 12_000, 18_000)], wall_s=0.020, host_s=0.005, steps=1)
    assert p["comm_only_ms"] == pytest.approx(6)
    assert p["gpu_idle_ms"] == pytest.approx(4)


def test_figures_are_per_step() -> None:
    two = [(GEMM, 0, 4_000), (NCCL, 4_000, 5_000), (GEMM, 10_000, 14_000), (NCCL, 14_000, 15_000)]
    p = breakdown(two, wall_s=0.020, host_s=0.010, steps=2)
    assert (p["wall_ms"], p["host_cpu_ms"], p["compute_ms"], p["comm_only_ms"]) == (10, 5, 4, 1)
    assert p["kernels_per_step"] == 2
    assert p["top"][0] == (GEMM[:70], 4)


def test_a_real_step_on_this_cpu() -> None:
    x = torch.randn(256, 256)

    def step() -> None:
        for _ in range(20):
            x.matmul(x)

    p = profile_step(step, torch.device("cpu"), steps=3)
    assert p["steps"] == 3 and p["wall_ms"] > 0 and p["host_cpu_ms"] > 0
    assert p["kernels_per_step"] == 0 and p["gpu_busy_ms"] == 0  # no GPU: every GPU figure is zero
    assert p["voluntary_switches"] >= 0 and p["involuntary_switches"] >= 0 and p["host_steal_cpus"] >= 0
    assert p["process_cpu_ms"] >= p["host_cpu_ms"] * 0.9  # every thread, the calling one included


@pytest.mark.tree  # reads the gate tree's profile: starts no ranks
@pytest.mark.xdist_group("tree")
def test_scaling_profiles_every_launcher_and_world(gate_tree: Path) -> None:
    record = json.loads((gate_tree / "bench" / "profile.json").read_text())
    scaling = json.loads((gate_tree / "bench" / "scaling.json").read_text())
    expected = {f"{launcher} world {w}" for launcher in scaling["results"] for w in scaling["worlds"]}
    assert {s["step"] for s in record["steps"]} == expected
    for s in record["steps"]:
        assert s["steps"] == 2 and s["wall_ms"] > 0 and s["host_cpu_ms"] > 0, s["step"]
