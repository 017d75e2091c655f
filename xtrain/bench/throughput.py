"""Training throughput: the harness's train step vs a plain PyTorch loop of the same model.

run_bench(run, tokens_path, BenchOptions(...)) times them; the command line is pipeline/bench.py
(`python -m pipeline.bench [--configs params ref large] [--device cuda] [--compile ...] [--profile]`).

Both loops run in the same process on the same data, with the same model, optimizer and
compile mode. Their timed windows are interleaved (A B A B ...) after both have warmed up, so
drift on a shared machine hits both alike; tokens/s is the median window, spread is
(max - min) / median. On CUDA, MFU = model FLOPs per token x tokens/s / 989 TFLOP/s (dense
bf16 peak of an H100/H200 SXM). `--profile` prints where one step's time goes: GPU busy time,
kernel count and the top kernels.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from contracts.errors import moved
from contracts.perf_record import median_spread
from params.config import ModelConfig, RunConfig, TrainConfig
from xtrain.bench.step_profile import profile_step, sync_device
from xtrain.core import determinism
from xtrain.core.comm import Communicator, FlatGrads, SingleComm
from xtrain.core.data import TokenData, micro_batches
from xtrain.core.model import build_model, flops_per_token
from xtrain.core.optim import build_optimizer
from xtrain.core.train import train_step

PEAK_BF16_FLOPS = 989e12  # H100/H200 SXM dense bf16, the MFU denominator

# Named shapes: the reference config and the larger one. Vocab and batch come from the CLI.
SHAPES: dict[str, dict[str, int]] = {
    "ref": dict(dim=384, n_layers=12, n_heads=12, n_kv_heads=4, ffn_dim=1536, max_seq_len=256),
    "large": dict(dim=768, n_layers=18, n_heads=12, n_kv_heads=4, ffn_dim=3072, max_seq_len=256),
}


@dataclass(frozen=True)
class BenchOptions:
    """What to time (pipeline/bench.py's command line); None means the device's default."""

    configs: tuple[str, ...] = ("params", "ref")
    device: str | None = None  # default: train.device
    batch: int | None = None  # default: train.global_batch; 4 for ref/large on cpu
    seq: int | None = None  # default: train.seq_len for params, 256 for ref/large
    precision: str | None = None  # default: bf16 on cuda, fp32 on cpu
    compile: tuple[str, ...] = ("none",)
    deterministic: bool = False
    profile: bool = False
    warmup: int | None = None  # default: 5 on cuda, 2 on cpu
    window: int | None = None  # steps per timed window (default: 10 cuda, 3 cpu)
    windows: int | None = None  # timed windows per loop (default: 5 cuda, 3 cpu)

    def for_device(self, device: torch.device) -> BenchOptions:
        """Every device default filled in."""
        cuda = device.type == "cuda"
        return dataclasses.replace(
            self,
            precision=self.precision or ("bf16" if cuda else "fp32"),
            warmup=self.warmup if self.warmup is not None else (5 if cuda else 2),
            window=self.window if self.window is not None else (10 if cuda else 3),
            windows=self.windows if self.windows is not None else (5 if cuda else 3),
        )


@dataclass
class Timing:
    tokens_per_s: float
    spread: float
    windows: list[float]


def time_window(step: Callable[[], Any], steps: int, tokens_per_step: int, device: torch.device) -> float:
    sync_device(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync_device(device)
    return steps * tokens_per_step / (time.perf_counter() - t0)


def summarise(rates: list[float]) -> Timing:
    """Median tokens/s and spread, computed as the perf gates compute them (contracts/perf_record.py)."""
    return Timing(*median_spread(rates), rates)


def time_windows(
    step: Callable[[], Any],
    tokens_per_step: int,
    warmup: int,
    window: int,
    windows: int,
    device: torch.device,
) -> Timing:
    """Median tokens/s over `windows` windows of `window` steps, after `warmup` steps."""
    for _ in range(warmup):
        step()
    return summarise([time_window(step, window, tokens_per_step, device) for _ in range(windows)])


def time_interleaved(
    steps: dict[str, Callable[[], Any]],
    tokens_per_step: int,
    warmup: int,
    window: int,
    windows: int,
    device: torch.device,
) -> dict[str, Timing]:
    """Like time_windows for several loops at once, alternating their windows."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    rates: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(windows):
        for name, step in steps.items():
            rates[name].append(time_window(step, window, tokens_per_step, device))
    return {name: summarise(r) for name, r in rates.items()}


def harness_step(
    model, opt, tokens, t: TrainConfig, module, comm: Communicator, grads: FlatGrads | None = None
) -> Callable[[], Any]:
    """The harness: xtrain.core.train.train_step exactly as every launcher calls it, on this rank's shard
    (the parameter list taken once, as build_trainer does)."""
    state = {"step": 0}
    params = list(model.parameters())

    def step() -> Any:
        micro = micro_batches(
            tokens, 0, state["step"], t.global_batch, t.grad_accum, t.seq_len, comm.rank, comm.world
        )
        state["step"] += 1
        return train_step(module, model, opt, micro, comm, grads, t, [0] * t.grad_accum, None, params)

    return step


def plain_step(model, opt, tokens, t: TrainConfig, module, device: torch.device) -> Callable[[], Any]:
    """The loop a PyTorch user writes by hand: no harness, same model, optimizer, data and clip."""
    state = {"step": 0}
    amp = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if t.precision == "bf16"
        else contextlib.nullcontext()
    )

    def step() -> Any:
        x, y = micro_batches(tokens, 0, state["step"], t.global_batch, 1, t.seq_len, 0, 1)[0]
        state["step"] += 1
        with amp:
            logits = module(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip, foreach=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def bench_config(
    name: str,
    mcfg: ModelConfig,
    t: TrainConfig,
    tokens: TokenData,
    device: torch.device,
    opts: BenchOptions,
) -> list[dict[str, Any]]:
    fpt = flops_per_token(mcfg, t.seq_len)
    loops, models = {}, []
    for loop in ("xtrain", "plain"):
        model = build_model(mcfg, 0, device).train()
        opt = build_optimizer(model, t)
        module = determinism.compile_module(model, t.compile_mode) if t.compile else model
        loops[loop] = (
            harness_step(model, opt, tokens, t, module, SingleComm(device))
            if loop == "xtrain"
            else plain_step(model, opt, tokens, t, module, device)
        )
        models.append(model)
    timings = time_interleaved(
        loops, t.global_batch * t.seq_len, opts.warmup, opts.window, opts.windows, device
    )
    rows = []
    for loop, timing in timings.items():
        rows.append(
            {
                "config": name,
                "loop": loop,
                "params_M": sum(p.numel() for p in models[0].parameters()) / 1e6,
                "batch": t.global_batch,
                "seq": t.seq_len,
                "precision": t.precision,
                "compile": t.compile_mode if t.compile else "none",
                "deterministic": opts.deterministic,
                "tokens_per_s": timing.tokens_per_s,
                "spread": timing.spread,
                "windows": timing.windows,
                "tflops": fpt * timing.tokens_per_s / 1e12,
                "mfu": fpt * timing.tokens_per_s / PEAK_BF16_FLOPS if device.type == "cuda" else None,
            }
        )
    if opts.profile and device.type == "cuda":
        rows[0]["profile"] = profile_step(loops["xtrain"], device)
    del loops, models
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows


def print_table(rows: list[dict[str, Any]], device: str) -> None:
    print(f"\npipeline.bench on {device}: median tokens/s over interleaved windows (spread = range/median)")
    head = (
        f"{'config':<7} {'loop':<7} {'params':>7} {'batch':>5} {'seq':>4} {'prec':>5} {'compile':>15} "
        f"{'tokens/s':>11} {'spread':>7} {'TFLOP/s':>8} {'MFU':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "-"
        print(
            f"{r['config']:<7} {r['loop']:<7} {r['params_M']:>6.1f}M {r['batch']:>5} {r['seq']:>4} "
            f"{r['precision']:>5} {r['compile']:>15} {r['tokens_per_s']:>11,.0f} {100 * r['spread']:>6.1f}% "
            f"{r['tflops']:>8.2f} {mfu:>6}"
        )
    for r in rows:
        p = r.get("profile")
        if p:
            print(
                f"\nprofile {r['config']} {r['compile']}: step {p['wall_ms']:.2f} ms wall, GPU busy "
                f"{p['gpu_busy_ms']:.2f} ms ({100 * p['gpu_busy_frac']:.0f}%), {p['kernels_per_step']:.0f} kernels/step"
            )
            for n, ms in p["top"]:
                print(f"  {ms:7.3f} ms  {n}")


def model_config(name: str, base: ModelConfig, seq: int) -> ModelConfig:
    """A named shape (or the params model's) with the tokenizer's vocabulary, long enough for `seq`."""
    shape = {k: getattr(base, k) for k in SHAPES["ref"]} if name == "params" else SHAPES[name]
    return ModelConfig(vocab_size=base.vocab_size, **{**shape, "max_seq_len": max(shape["max_seq_len"], seq)})


def train_config(
    t0: TrainConfig, device: torch.device, opts: BenchOptions, seq: int, batch: int, mode: str
) -> TrainConfig:
    """params' train settings with the benchmark's device, precision, shape and compile mode."""
    return dataclasses.replace(
        t0,
        device=device.type,
        precision=opts.precision,
        seq_len=seq,
        grad_accum=1,
        global_batch=batch,
        compile=mode != "none",
        compile_mode="default" if mode == "none" else mode,
        fused_adamw=device.type == "cuda",
    )


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({torch.get_num_threads()} threads)"


def run_bench(run: RunConfig, tokens_path: str, opts: BenchOptions) -> list[dict[str, Any]]:
    """One row per (config, compile mode, loop): the harness and the plain loop, interleaved."""
    t0 = run.train
    device = torch.device(opts.device or t0.device)
    opts = opts.for_device(device)
    cuda = device.type == "cuda"
    determinism.set_cpu_threads(t0.cpu_threads)
    determinism.configure(opts.deterministic, device.type)
    tokens = TokenData.load(tokens_path, device)
    rows: list[dict[str, Any]] = []
    for name in opts.configs:
        seq = opts.seq or (t0.seq_len if name == "params" else 256)
        # The 30M-160M shapes take seconds per step on a CPU: a small batch keeps the default run short.
        batch = opts.batch or (t0.global_batch if cuda or name == "params" else 4)
        mcfg = model_config(name, run.model, seq)
        for mode in opts.compile:
            t = train_config(t0, device, opts, seq, batch, mode)
            rows += bench_config(name, mcfg, t, tokens, device, opts)
            print(
                f"bench: {name} compile={mode}: "
                + ", ".join(f"{r['loop']} {r['tokens_per_s']:,.0f} tok/s" for r in rows[-2:]),
                file=sys.stderr,
                flush=True,
            )
    return rows


if __name__ == "__main__":  # the command line is pipeline/bench.py
    moved(__spec__.name, "pipeline/bench.py")
