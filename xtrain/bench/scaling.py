"""Scaling benchmark: global tokens/s per launcher and world size, at a fixed per-rank batch.

    python -m pipeline.scaling [--out bench]      # its command line; worlds and launchers from params.yaml `scaling:`

Every launcher at every world runs in its own fresh process (thread: `python -m pipeline.scaling rank
thread --worlds W`; proc: a real torchrun of W workers), all at once; each trains the params' model
through the shared train step, warms up, and then times windows of window_steps steps when the
stage's conductor says so, one measurement at a time, in turn (xtrain/bench/conductor.py), with
what else ran on the machine read around every window (xtrain/bench/contention.py). Reports the
median tokens/s of the faster half of the windows with their spread ((max - min) / median); the
record keeps every window and its readings for the gate. Worlds above the devices present (GPUs on
cuda, cores on cpu) are dropped and recorded as such. Writes bench/scaling.json and bench/scaling.png.
"""

from __future__ import annotations

import io
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import moved
from contracts.perf_record import PASSING, judge_measurements, judged_spread, others_share
from params.config import LaunchConfig, RunConfig, ScalingConfig
from xtrain.bench.conductor import Conductor, Start, Taken, say
from xtrain.bench.contention import Probe
from xtrain.bench.remeasure import Remeasure, remeasure

FORMAT = "xtrain-scaling/2"


def slowed(step: Callable[[], Any], device: Any, launcher: str) -> Callable[[], Any]:
    """The step, `factor` times as long where the failpoint XTRAIN_FAULT=slow_<launcher>[:factor] is armed
    (it sleeps factor - 1 times as long as it ran; 2 when no factor is given): the planted launcher
    slowdown the scaling gate must fail (pipeline/busy_scaling.py --fault)."""
    import time

    from xtrain.bench.step_profile import sync_device
    from xtrain.core import failpoints

    factor = failpoints.slow_factor(launcher)
    if factor == 1.0:
        return step

    def run() -> Any:
        t0 = time.perf_counter()
        out = step()
        sync_device(device)
        time.sleep((factor - 1) * (time.perf_counter() - t0))
        return out

    return run


def rank_body(spec: Any, comm: Any, sc: ScalingConfig, address: str) -> None:
    """Timed training on one rank: the harness's train step on the real data, no eval or checkpoints.
    After the warm-up the rank connects to the stage's conductor (xtrain/bench/conductor.py) and
    times a window of sc.window_steps steps each time it is told to (all ranks are told together),
    or profiles steps (rank 0 under torch.profiler: step_profile), until it is told to stop."""
    import dataclasses

    from xtrain.bench.conductor import commands, connect
    from xtrain.bench.step_profile import profile_step, run_steps
    from xtrain.bench.throughput import harness_step, time_window
    from xtrain.core.data import TokenData
    from xtrain.core.determinism import compile_module
    from xtrain.core.model import build_model
    from xtrain.core.optim import build_optimizer
    from xtrain.core.train import flat_grads

    t = dataclasses.replace(spec.run.train, global_batch=sc.per_rank_batch * comm.world, grad_accum=1)
    model = build_model(spec.run.model, spec.run.seed, comm.device).train()
    data = TokenData.load(spec.tokens_path, comm.device)
    module = comm.wrap(model)
    if t.compile:
        module = compile_module(module, t.compile_mode)
    opt = build_optimizer(model, t)
    step = slowed(
        harness_step(model, opt, data, t, module, comm, flat_grads(model, comm)), comm.device, spec.launcher
    )
    tokens = t.global_batch * t.seq_len
    for _ in range(sc.warmup_steps):
        step()
    channel = connect(address, spec.launcher, comm.world, comm.rank, os.getpid())
    try:
        for command in commands(channel):
            if command["do"] == "window":
                channel.send({"rate": time_window(step, sc.window_steps, tokens, comm.device)})
            elif comm.rank == 0:  # "profile"
                channel.send({"profile": profile_step(step, comm.device, int(command["steps"]))})
            else:
                run_steps(step, comm.device, int(command["steps"]))
                channel.send({"profile": None})
    finally:
        channel.close()


def measure_rank(
    spec: Any, launcher: str, world: int, launch: LaunchConfig, sc: ScalingConfig, address: str
) -> None:
    """One measured process: the thread launcher's `world` ranks as threads of this process, or this
    torchrun worker; each rank answers the conductor at `address` (rank_body)."""
    from xtrain.core.launch import run_proc_rank, run_threads

    def body(spec: Any, comm: Any) -> None:
        rank_body(spec, comm, sc, address)

    if launcher == "thread":
        run_threads(spec, world, launch.timeout_s, target=body)
    else:
        run_proc_rank(spec, launch.timeout_s, launch.grad_sync, target=body)


def devices_available(device: str) -> int:
    if device == "cuda":
        import torch  # only here: a CPU measurement's parent process never loads torch (its ranks do)

        return torch.cuda.device_count()
    return os.cpu_count() or 1


def cuda_name() -> str:
    import torch  # see devices_available

    return torch.cuda.get_device_name(0)


def summarise(taken: Taken, rounds: int) -> dict[str, dict[str, Any]]:
    """Per launcher and world: every window in the order taken with its contention readings, and the
    figures of the faster half of the windows (contracts.perf_record.judged_spread), which the
    scaling gate recomputes (its verdicts use only the quiet windows: docs/scaling.md)."""
    out: dict[str, dict[str, Any]] = {}
    for launcher in sorted({la for la, _ in taken.windows}):
        worlds = sorted(w for la, w in taken.windows if la == launcher)
        judged = {w: judged_spread(taken.windows[(launcher, w)]) for w in worlds}
        base = judged[min(judged)][0] if judged else None
        out[launcher] = {}
        for w, (rate, spread) in judged.items():
            speedup = rate / base if base else 1.0
            out[launcher][str(w)] = {
                "tokens_per_s": rate,
                "speedup": speedup,
                "efficiency": speedup / w,
                "spread": spread,
                "rounds": rounds,
                "windows": taken.windows[(launcher, w)],
                "readings": taken.readings[(launcher, w)],
            }
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    worlds = result["worlds"]
    for launcher, by_world in sorted(result["results"].items()):
        ws = sorted(int(w) for w in by_world)
        ax1.plot(ws, [by_world[str(w)]["tokens_per_s"] for w in ws], "o-", label=launcher)
        ax2.plot(ws, [by_world[str(w)]["speedup"] for w in ws], "o-", label=launcher)
    ax2.plot(worlds, worlds, "k--", label="ideal")
    ax1.set(xlabel="world size", ylabel="global tokens/s", title="throughput", xticks=worlds)
    ax2.set(xlabel="world size", ylabel="speedup vs world 1", title="scaling", xticks=worlds)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(
        f"{result['profile']} on {result['device']}: per-rank batch {result['per_rank_batch']}, "
        f"seq {result['seq_len']}, {result['precision']}"
    )
    fig.tight_layout()
    from contracts.fileio import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def print_table(result: dict[str, Any]) -> None:
    print(
        f"\nscaling on {result['device']} ({result['profile']} profile, per-rank batch {result['per_rank_batch']}, "
        f"seq {result['seq_len']}, {result['precision']})"
    )
    print(f"{'launcher':<8} {'world':>5} {'tokens/s':>12} {'speedup':>8} {'efficiency':>10} {'spread':>7}")
    for launcher, by_world in sorted(result["results"].items()):
        for w, r in sorted(by_world.items(), key=lambda kv: int(kv[0])):
            print(
                f"{launcher:<8} {w:>5} {r['tokens_per_s']:>12,.0f} {r['speedup']:>7.2f}x {100 * r['efficiency']:>9.0f}% "
                f"{100 * r['spread']:>6.1f}%"
            )
    dropped = sorted(set(result["worlds_requested"]) - set(result["worlds"]))
    if dropped:
        print(f"(worlds {dropped} not run: only {result['device_count']} devices present)")


@dataclass(frozen=True)
class Measured:
    """What measure_worlds found: devices present, the worlds run, the CPUs the measurements could
    use, and what the conductor took (windows, readings, rounds, rank 0's step profiles)."""

    present: int
    worlds: list[int]
    cpus: int
    taken: Taken


def measured_env(device: str) -> dict[str, str]:
    """The environment of a measured process. On the CPU its OpenMP threads sleep at barriers
    instead of spinning: beside one busy core a spinning two-thread team waits for its descheduled
    partner, and proc world 1 fell from 12k to 0.2k tok/s (7.3k passive, quiet-box speed unchanged;
    docs/scaling.md). A user's own OMP_WAIT_POLICY wins."""
    env = dict(os.environ)
    if device == "cpu":
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def doubts(taken: Taken, cpus: int, bounds: dict[str, Any], need: int) -> list[str]:
    """What the gate would not pass yet, judged as it judges (contracts.perf_record.judge_measurements):
    a comparison with too few quiet pairs, an interval that straddles or crosses its bound (a
    slowdown is measured again before it is believed), a measurement whose quiet windows spread
    more than max_spread. Nothing without the gate's bounds ({}: no re-measuring)."""
    if not bounds:
        return []
    judged, spreads = judge_measurements(taken.windows, taken.readings, cpus, bounds, need)
    out = [f"{j.comparison.kind} {j.comparison.a} vs {j.comparison.b}: {j.verdict}" for j in judged
           if j.verdict not in PASSING]  # fmt: skip
    limit = float(bounds.get("max_spread", math.inf))
    return out + [f"{la} world {w}: spread {s:.0%}" for (la, w), s in sorted(spreads.items()) if s > limit]


def measure_worlds(
    sc: ScalingConfig,
    device: str,
    command: Start,
    policy: Remeasure,
    bounds: dict[str, Any] | None = None,
    profile_steps: int = 0,
    probe: Any = None,
    clock: Callable[[], float] = time.monotonic,
) -> Measured:
    """Every launcher at every world present, each measured by its own fresh process (`command(key,
    address)`), all at once, their windows taken in turn (xtrain/bench/conductor.py). Rounds of
    sc.windows windows each follow while the gate would not pass them (doubts; policy caps)."""
    present = devices_available(device)
    worlds = [w for w in sc.worlds if w <= present]
    probe = probe or Probe()
    keys = [(la, w) for w in worlds for la in sc.launchers]
    conductor = Conductor(keys, command, measured_env(device), probe, clock)
    with conductor.running():
        taken = conductor.taken

        def take_round() -> None:
            conductor.round(sc.windows)
            report_round(taken, len(probe.cpus), bounds or {})

        def doubtful() -> bool:
            return bool(doubts(taken, len(probe.cpus), bounds or {}, sc.windows))

        remeasure(take_round, doubtful, policy, clock)
        if profile_steps:
            conductor.profile(profile_steps)
    return Measured(present, worlds, len(probe.cpus), taken)


def report_round(taken: Taken, cpus: int, bounds: dict[str, Any]) -> None:
    """One line per measurement after each round: its figures and what else held the CPUs."""
    limit = float(bounds.get("max_contention", math.inf))
    for (la, w), rates in sorted(taken.windows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rate, spread = judged_spread(rates)
        shares = [others_share(r, cpus) for r in taken.readings[(la, w)]]
        quiet = sum(s <= limit for s in shares)
        say(
            f"scaling: round {taken.rounds}: {la} world {w} {rate:,.0f} tokens/s, faster half spread "
            f"{100 * spread:.0f}%; others held {100 * statistics.median(shares):.0f}% of {cpus} CPUs "
            f"(median), {quiet} of {len(shares)} windows quiet"
        )


def scaling_record(
    profile: str,
    run: RunConfig,
    launch: LaunchConfig,
    sc: ScalingConfig,
    measured: Measured,
) -> dict[str, Any]:
    """bench/scaling.json (contracts/schemas/scaling.schema.json) from measure_worlds' result."""
    present, worlds = measured.present, measured.worlds
    t = run.train
    device = cuda_name() if t.device == "cuda" else f"cpu ({os.cpu_count()} cores)"
    return {
        "format": FORMAT,
        "profile": profile,
        "device": device,
        "device_count": present,
        "model": {k: getattr(run.model, k) for k in ("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim")},
        "per_rank_batch": sc.per_rank_batch,
        "seq_len": t.seq_len,
        "precision": t.precision,
        "grad_sync": launch.grad_sync,
        "worlds_requested": sc.worlds,
        "worlds": worlds,
        "cpus": measured.cpus,
        "results": summarise(measured.taken, measured.taken.rounds),
    }


def write_results(result: dict[str, Any], out: Path) -> None:
    """bench/scaling.json (validated on write), bench/scaling.png and the table."""
    from contracts import artifact_table

    artifact_table.write("scaling", out / "scaling.json", result)
    plot(result, out / "scaling.png")
    print_table(result)


def write_profiles(record: dict[str, Any], measured: Measured, path: Path) -> None:
    """OUT/profile.json: rank 0's step profile per launcher and world, beside the rates, and the table."""
    from contracts.fileio import atomic_write_json
    from xtrain.bench.step_profile import print_profiles

    keys = ("device", "profile", "per_rank_batch", "seq_len", "precision", "grad_sync")

    def timed_step_ms(launcher: str, w: int) -> float:  # the unprofiled step, from the windows' median
        tokens = record["per_rank_batch"] * w * record["seq_len"]
        return 1e3 * tokens / record["results"][launcher][str(w)]["tokens_per_s"]

    rows = [
        (f"{launcher} world {w}", {"timed_step_ms": timed_step_ms(launcher, w), **p})
        for (launcher, w), p in sorted(measured.taken.profiles.items())
        if p is not None
    ]
    atomic_write_json(
        path, {**{k: record[k] for k in keys}, "steps": [{"step": label, **p} for label, p in rows]}
    )
    print_profiles(rows)


if __name__ == "__main__":  # the command line is pipeline/scaling.py
    moved(__spec__.name, "pipeline/scaling.py")
