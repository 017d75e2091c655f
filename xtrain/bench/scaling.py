"""Scaling benchmark: global tokens/s per launcher and world size, at a fixed per-rank batch.

    python -m pipeline.scaling [--out bench]      # its command line; worlds and launchers from params.yaml `scaling:`

Each launcher runs in fresh processes (thread: one `python -m pipeline.scaling rank thread` for
all worlds in turn; proc: a real torchrun per world), trains the params' model for warm-up + windows x window_steps steps
through the shared train step, and reports the median tokens/s of the windows with their spread
((max - min) / median). Worlds above the devices present (GPUs on cuda, cores on cpu) are
dropped and recorded as such. Writes bench/scaling.json and bench/scaling.png.
"""

from __future__ import annotations

import collections
import functools
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import moved
from contracts.perf_record import judged_spread
from params.config import LaunchConfig, RunConfig, ScalingConfig
from xtrain.bench.remeasure import Remeasure

FORMAT = "xtrain-scaling/1"


def rank0_decides(comm: Any) -> Callable[[bool], bool]:
    """Every rank takes rank 0's decision, so all run the same steps: a one-element sum in which only
    rank 0's vote counts (the all-reduce every step already makes, on every launcher and device)."""
    import torch

    def agree(go: bool) -> bool:
        flag = torch.tensor([1.0 if go and comm.rank == 0 else 0.0], device=comm.device)
        comm.all_reduce_sum_([flag])
        return bool(flag.item() > 0.5)

    return agree


def slowed(step: Callable[[], Any], device: Any, launcher: str) -> Callable[[], Any]:
    """The step, twice as long where the failpoint XTRAIN_FAULT=slow_<launcher> is armed (it sleeps as
    long as it ran): the injected launcher slowdown the scaling gate must fail (pipeline/busy_scaling.py)."""
    import time

    from xtrain.bench.step_profile import sync_device
    from xtrain.core import failpoints

    if not failpoints.slows(launcher):
        return step

    def run() -> Any:
        t0 = time.perf_counter()
        out = step()
        sync_device(device)
        time.sleep(time.perf_counter() - t0)
        return out

    return run


def rank_body(
    spec: Any, comm: Any, sc: ScalingConfig, policy: Remeasure, profile_steps: int = 0
) -> dict[str, Any]:
    """Timed training on one rank: the harness's train step on the real data, no eval or checkpoints.
    After the warm-up, rounds of sc.windows windows until the measurement settles (xtrain.bench.remeasure).
    With profile_steps, that many more steps follow the windows; rank 0 profiles them (step_profile)."""
    import dataclasses

    from xtrain.bench.remeasure import remeasure
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

    taken: list[float] = []

    def one_round() -> list[float]:
        windows = [time_window(step, sc.window_steps, tokens, comm.device) for _ in range(sc.windows)]
        taken.extend(windows)
        if comm.rank == 0:  # a re-measuring stage says so while it runs
            rate, spread = judged_spread(taken)
            print(
                f"scaling: {spec.launcher} world {comm.world} round {len(taken) // sc.windows}: "
                f"{rate:,.0f} tokens/s, faster half spread {100 * spread:.0f}%",
                file=sys.stderr,
                flush=True,
            )
        return windows

    rounds = remeasure(one_round, policy, agree=rank0_decides(comm))
    profile = None
    if profile_steps and comm.rank == 0:
        profile = profile_step(step, comm.device, profile_steps)
    elif profile_steps:
        run_steps(step, comm.device, profile_steps)
    return {"rounds": rounds, "profile": profile}


def measure_one(
    command: Callable[[Path], list[str]], what: str, env: dict[str, str] | None = None
) -> dict[int, dict[str, Any]]:
    """Run one measured process (`command(result)`) fresh; returns rank 0's rank_body result per world."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "windows.json"
        proc = subprocess.Popen(
            command(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
        )
        tail: collections.deque[str] = collections.deque(maxlen=100)
        for line in proc.stderr or ():
            tail.append(line)
            if line.startswith("scaling: "):  # the rounds, as they are taken
                print(line, end="", file=sys.stderr, flush=True)
        if proc.wait() != 0:
            raise RuntimeError(f"scaling {what} failed:\n{''.join(tail)[-3000:]}")
        return {int(w): measured for w, measured in json.loads(out.read_text()).items()}


def measure_rank(
    spec: Any,
    launcher: str,
    worlds: list[int],
    launch: LaunchConfig,
    sc: ScalingConfig,
    policy: Remeasure,
    result: str | Path,
    profile_steps: int = 0,
) -> None:
    """One measured process; rank 0 writes {world: rank_body's result (windows, profile or None)}. The thread launcher measures every
    world in turn in this one process (a process start and CUDA/NCCL set-up cost ~15 s on an H200
    runner, more than a measurement); a torchrun worker measures its own world."""
    from contracts.fileio import atomic_write_json
    from xtrain.core.launch import run_proc_rank, run_threads

    def body(spec: Any, comm: Any) -> dict[str, Any]:
        return rank_body(spec, comm, sc, policy, profile_steps)

    if launcher == "thread":
        atomic_write_json(
            result, {str(w): run_threads(spec, w, launch.timeout_s, target=body)[0] for w in worlds}
        )
        return
    (world,) = worlds
    measured = run_proc_rank(spec, launch.timeout_s, launch.grad_sync, target=body)
    if int(os.environ["RANK"]) == 0:
        atomic_write_json(result, {str(world): measured})


def devices_available(device: str) -> int:
    if device == "cuda":
        import torch  # only here: a CPU measurement's parent process never loads torch (its ranks do)

        return torch.cuda.device_count()
    return os.cpu_count() or 1


def cuda_name() -> str:
    import torch  # see devices_available

    return torch.cuda.get_device_name(0)


def summarise(rounds: dict[str, dict[int, list[list[float]]]]) -> dict[str, dict[str, Any]]:
    """Per launcher and world: every window of every round, and the figures of their faster half
    (contracts.perf_record.judged_spread), which is what the scaling gate recomputes."""
    out: dict[str, dict[str, Any]] = {}
    for launcher, by_world in rounds.items():
        windows = {w: [r for one in by_world[w] for r in one] for w in sorted(by_world)}
        judged = {w: judged_spread(rates) for w, rates in windows.items()}
        base = judged[min(judged)][0] if judged else None
        out[launcher] = {}
        for w, (rate, spread) in judged.items():
            speedup = rate / base if base else 1.0
            out[launcher][str(w)] = {
                "tokens_per_s": rate,
                "speedup": speedup,
                "efficiency": speedup / w,
                "spread": spread,
                "rounds": len(by_world[w]),
                "windows": windows[w],
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
    """What measure_worlds found: devices present, the worlds run, each launcher's rounds of window
    rates per world, and (with --profile) rank 0's step profile per launcher and world."""

    present: int
    worlds: list[int]
    rounds: dict[str, dict[int, list[list[float]]]]
    profiles: dict[str, dict[int, Any]]
    env: dict[str, str] | None = None  # of every measured process (measured_env)


def measured_env(device: str) -> dict[str, str]:
    """The environment of a measured process. On the CPU its OpenMP threads sleep at barriers
    instead of spinning: beside one busy core a spinning two-thread team waits for its descheduled
    partner, and proc world 1 fell from 12k to 0.2k tok/s (7.3k passive, quiet-box speed unchanged;
    docs/scaling.md). A user's own OMP_WAIT_POLICY wins."""
    env = dict(os.environ)
    if device == "cpu":
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


Command = Callable[[str, list[int], int, Path], list[str]]  # launcher, worlds, max rounds, result


def measure_group(
    command: Command, launcher: str, group: list[int], max_rounds: int, measured: Measured
) -> None:
    """One fresh measured process for `launcher` at the worlds in `group`, taking at most
    `max_rounds` rounds per world; its rounds are appended to those of earlier processes."""
    what = f"{launcher} world {','.join(map(str, group))}"
    for w, got in measure_one(
        functools.partial(command, launcher, group, max_rounds), what, measured.env
    ).items():
        measured.rounds[launcher].setdefault(w, []).extend(got["rounds"])
        measured.profiles[launcher][w] = got["profile"]


def measure_worlds(
    sc: ScalingConfig,
    device: str,
    command: Command,
    policy: Remeasure,
    bounds: dict[str, Any] | None = None,
) -> Measured:
    """Every launcher at every world present, measured by fresh processes `command(launcher, worlds,
    max_rounds, result)`: one per launcher for threads, one per world for torchrun. Each process
    re-measures its own noisy windows (policy); then what the gate would not pass (bounds: its
    `band` and `floors`) is measured again by fresh processes (repeat_doubtful)."""
    present = devices_available(device)
    worlds = [w for w in sc.worlds if w <= present]
    measured = Measured(
        present,
        worlds,
        {la: {} for la in sc.launchers},
        {la: {} for la in sc.launchers},
        measured_env(device),
    )
    for launcher in sc.launchers:
        for group in [worlds] if launcher == "thread" else [[w] for w in worlds]:
            measure_group(command, launcher, group, policy.max_rounds, measured)
    repeat_doubtful(command, measured, policy, bounds or {})
    for launcher, by_world in measured.rounds.items():
        for w, rounds in sorted(by_world.items()):
            rate = judged_spread(flat(rounds))[0]
            print(
                f"scaling: {launcher} world {w}: {rate:,.0f} tokens/s ({len(rounds)} rounds)",
                file=sys.stderr,
                flush=True,
            )
    return measured


def flat(rounds: list[list[float]]) -> list[float]:
    return [r for one in rounds for r in one]


def doubtful(measured: Measured, bounds: dict[str, Any]) -> set[tuple[str, int]]:
    """The (launcher, world) measurements behind a verdict other than pass: a thread/proc interval
    not within the band, a speedup below its floor (both of its worlds), a faster half too spread."""
    from contracts.perf_record import band_check

    rounds, out = measured.rounds, set()
    judged = {la: {w: judged_spread(flat(r)) for w, r in by_w.items()} for la, by_w in rounds.items()}
    for la, by_world in judged.items():
        out |= {
            (la, w) for w, (_, spread) in by_world.items() if not spread <= bounds.get("max_spread", math.inf)
        }
        base = by_world[1][0] if 1 in by_world else math.nan
        for w, (rate, _) in by_world.items() if 1 in by_world else ():
            if not rate / base >= float(bounds.get("floors", {}).get(str(w), 0.0)):
                out |= {(la, 1), (la, w)}
    if "band" in bounds and {"thread", "proc"} <= set(rounds):
        for w in set(rounds["thread"]) & set(rounds["proc"]):
            if band_check(flat(rounds["thread"][w]), flat(rounds["proc"][w]), bounds["band"])[0] != "within":
                out |= {("thread", w), ("proc", w)}
    return out


def repeat_doubtful(command: Command, measured: Measured, policy: Remeasure, bounds: dict[str, Any]) -> None:
    """Measure again, in fresh processes, what would not pass yet: a slow or noisy process (another
    job on the machine) is repeated rather than judged, while a real slowdown stays slow in every
    repeat and still fails. Stops when all pass, when a doubtful measurement has max_rounds, or when
    another pass of repeats (as long as the last) would end past policy.time_cap_s."""
    start, last = time.monotonic(), 0.0
    while todo := sorted(doubtful(measured, bounds)):
        left = {(la, w): policy.max_rounds - len(measured.rounds[la][w]) for la, w in todo}
        if min(left.values()) < 1 or time.monotonic() - start + last > policy.time_cap_s:
            return
        t0 = time.monotonic()
        for la, w in todo:
            measure_group(command, la, [w], left[(la, w)], measured)
        last = time.monotonic() - t0


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
        "results": summarise(measured.rounds),
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
        for launcher, by_world in sorted(measured.profiles.items())
        for w, p in sorted(by_world.items())
        if p is not None
    ]
    atomic_write_json(
        path, {**{k: record[k] for k in keys}, "steps": [{"step": label, **p} for label, p in rows]}
    )
    print_profiles(rows)


if __name__ == "__main__":  # the command line is pipeline/scaling.py
    moved(__spec__.name, "pipeline/scaling.py")
