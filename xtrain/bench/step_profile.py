"""Where one train step's time goes: host time, GPU compute, collectives, and what overlaps what.

`profile_step(step, device)` runs a few steps under torch.profiler and returns per-step figures;
`breakdown(kernels, ...)` is the interval arithmetic behind them, kept free of the profiler so a
test can check it on hand-made timelines. Used by `pipeline.bench --profile` (one device) and
`pipeline.scaling --profile` (every launcher and world; rank 0's device is read).

The figures answer the scaling question "what costs the rest": with the GPU idle most of the step
the step is host-bound; with collectives running alone on the GPU (`comm_only_ms`) the all-reduce
is not overlapped with compute (a collective kernel also runs while it waits for a late peer, so a
rank slowed by its host shows up here too).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

Interval = tuple[float, float]  # (start, end) in microseconds
COMM_MARKERS = ("nccl", "allreduce", "all_reduce")


def is_collective(kernel_name: str) -> bool:
    name = kernel_name.lower()
    return any(m in name for m in COMM_MARKERS)


def union_us(intervals: Iterable[Interval]) -> float:
    """Length of the union of intervals: time during which at least one of them runs."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def breakdown(
    kernels: list[tuple[str, float, float]], wall_s: float, host_s: float, steps: int
) -> dict[str, Any]:
    """Per-step figures (ms) from kernel intervals `(name, start_us, end_us)` of one device.

    gpu_busy: any kernel running; compute: any non-collective kernel running; comm: any collective
    running; comm_only: a collective running and no compute (exposed communication); idle: wall time
    with no kernel at all (the GPU waits for the host).
    """
    every = [(s, e) for _, s, e in kernels]
    compute = [(s, e) for n, s, e in kernels if not is_collective(n)]
    comm = [(s, e) for n, s, e in kernels if is_collective(n)]
    busy_ms, compute_ms = union_us(every) / 1e3 / steps, union_us(compute) / 1e3 / steps
    wall_ms = 1e3 * wall_s / steps
    by_name: dict[str, float] = {}
    for n, s, e in kernels:
        by_name[n] = by_name.get(n, 0.0) + (e - s) / 1e3 / steps
    return {
        "steps": steps,
        "wall_ms": wall_ms,
        "host_cpu_ms": 1e3 * host_s / steps,
        "gpu_busy_ms": busy_ms,
        "gpu_busy_frac": busy_ms / wall_ms if wall_ms else 0.0,
        "gpu_idle_ms": max(0.0, wall_ms - busy_ms),
        "compute_ms": compute_ms,
        "comm_ms": union_us(comm) / 1e3 / steps,
        "comm_only_ms": busy_ms - compute_ms,
        "kernels_per_step": len(kernels) / steps,
        "top": [(n[:70], ms) for n, ms in sorted(by_name.items(), key=lambda kv: -kv[1])[:8]],
    }


def off_cpu_counters() -> tuple[int, int, float]:
    """(voluntary, involuntary context switches of this thread, host steal seconds): why a thread's
    CPU time falls short of the wall time. Voluntary: it blocked (a lock, the GIL, a sync);
    involuntary: it was preempted; steal: a virtual machine's vCPUs waited for the hypervisor."""
    import resource

    ru = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))
    steal = 0.0
    with contextlib.suppress(OSError, IndexError, ValueError), open("/proc/stat") as f:
        steal = int(f.readline().split()[8]) / os.sysconf("SC_CLK_TCK")  # all CPUs, in seconds
    return ru.ru_nvcsw, ru.ru_nivcsw, steal


def sync_device(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_step(step: Callable[[], Any], device: torch.device, steps: int = 5) -> dict[str, Any]:
    """Run `steps` steps, on CUDA under the profiler (GPU activity only: with every CPU op recorded
    too, an eager H200 step took 129 ms against 69 ms unprofiled; GPU only, 1.3x), and report on
    the steps as a whole. Kernels of `device` only (a thread
    launcher's process drives every GPU). host_cpu_ms is the calling thread's CPU time (forward,
    optimizer; autograd runs backward on its own device thread), process_cpu_ms every thread's
    (in a thread launcher: every rank's). Voluntary switches count the calling thread's waits:
    for the backward, and with ranks as threads of one interpreter, for the GIL."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    sync_device(device)
    with profile(activities=[ProfilerActivity.CUDA]) if cuda else contextlib.nullcontext() as prof:
        t0, c0, p0, off0 = time.perf_counter(), time.thread_time(), time.process_time(), off_cpu_counters()
        for _ in range(steps):
            step()
        sync_device(device)
        wall, host, process = time.perf_counter() - t0, time.thread_time() - c0, time.process_time() - p0
        off = [b - a for a, b in zip(off0, off_cpu_counters(), strict=True)]
    index = device.index if device.index is not None else 0
    kernels = [
        (e.name, e.time_range.start, e.time_range.end)
        for e in (prof.events() if cuda else [])
        # user annotations (DistributedDataParallel.forward) are ranges on the GPU track, not work
        if e.device_type == torch.autograd.DeviceType.CUDA
        and e.device_index == index
        and not getattr(e, "is_user_annotation", False)
    ]
    return {
        **breakdown(kernels, wall, host, steps),
        "process_cpu_ms": 1e3 * process / steps,
        "voluntary_switches": off[0] / steps,
        "involuntary_switches": off[1] / steps,
        "host_steal_cpus": off[2] / wall,  # mean number of the host's CPUs stolen during the steps
    }


def run_steps(step: Callable[[], Any], device: torch.device, steps: int = 5) -> None:
    """What the other ranks do while rank 0 profiles: the same steps (same collectives), unprofiled."""
    for _ in range(steps):
        step()
    sync_device(device)


def print_profiles(rows: list[tuple[str, dict[str, Any]]]) -> None:
    """One line per profiled step (label, profile_step's figures and the unprofiled `timed_step_ms`):
    ms per step, context switches per step (voluntary/involuntary), the host's stolen CPUs."""
    head = (
        f"{'step':<16} {'timed':>7} {'wall':>7} {'thread CPU':>10} {'proc CPU':>8} {'switches':>9} {'steal':>6} "
        f"{'GPU busy':>9} {'compute':>8} {'comm':>6} {'comm only':>10} {'GPU idle':>9}"
    )
    print(f"\nwhere one train step's time goes (ms per step; GPU figures for rank 0's device)\n{head}")
    for label, p in rows:
        switches = f"{p['voluntary_switches']:.0f}/{p['involuntary_switches']:.0f}"
        line = (
            f"{label:<16} {p['timed_step_ms']:>7.2f} {p['wall_ms']:>7.2f} {p['host_cpu_ms']:>10.2f} "
            f"{p['process_cpu_ms']:>8.2f} "
            f"{switches:>9} {p['host_steal_cpus']:>6.2f}"
        )
        if p["kernels_per_step"]:  # no GPU kernels on a CPU run: host figures only
            line += (
                f" {p['gpu_busy_ms']:>9.2f} {p['compute_ms']:>8.2f} {p['comm_ms']:>6.2f} "
                f"{p['comm_only_ms']:>10.2f} {p['gpu_idle_ms']:>8.2f} ({100 * (1 - p['gpu_busy_frac']):.0f}%)"
            )
        print(line)
