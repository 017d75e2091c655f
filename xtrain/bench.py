"""Training throughput: the harness's train step vs a plain PyTorch loop of the same model.

    python -m xtrain.bench                         # params.yaml's model and the reference config
    python -m xtrain.bench --configs ref large --device cuda --compile

Both loops run in the same process on the same data; tokens/s is the median over timed windows
after warm-up (spread = (max - min) / median). On CUDA, MFU = model FLOPs per token x tokens/s
over the dense bf16 peak (989 TFLOP/s for an H100/H200 SXM).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from xtrain import determinism
from xtrain.comm import FlatGrads, SingleComm
from xtrain.config import ModelConfig, TrainConfig, load_params
from xtrain.data import TokenData, micro_batches
from xtrain.model import build_model, flops_per_token
from xtrain.optim import build_optimizer
from xtrain.train import train_step

PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12}

# Named shapes (the reference and larger config); vocab and batch come from the command line.
SHAPES: dict[str, dict[str, int]] = {
    "ref": dict(dim=384, n_layers=12, n_heads=12, n_kv_heads=4, ffn_dim=1536, max_seq_len=256),
    "large": dict(dim=768, n_layers=18, n_heads=12, n_kv_heads=4, ffn_dim=3072, max_seq_len=256),
}


@dataclasses.dataclass
class Timing:
    tokens_per_s: float
    spread: float
    windows: list[float]


def time_windows(
    step: Callable[[], Any],
    tokens_per_step: int,
    warmup: int,
    window: int,
    windows: int,
    device: torch.device,
) -> Timing:
    """Median tokens/s over `windows` windows of `window` steps, after `warmup` steps."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        step()
    sync()
    rates = []
    for _ in range(windows):
        t0 = time.perf_counter()
        for _ in range(window):
            step()
        sync()
        rates.append(window * tokens_per_step / (time.perf_counter() - t0))
    med = statistics.median(rates)
    return Timing(med, (max(rates) - min(rates)) / med, rates)


def peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)


def harness_step(model, opt, tokens, t: TrainConfig, device: torch.device, module) -> Callable[[], Any]:
    comm = SingleComm(device)
    grads = FlatGrads(list(model.parameters()))
    state = {"step": 0}

    def step() -> Any:
        micro = micro_batches(tokens, 0, state["step"], t.global_batch, t.grad_accum, t.seq_len, 0, 1)
        state["step"] += 1
        return train_step(module, model, opt, micro, comm, grads, t, [0] * t.grad_accum)

    return step


def plain_step(model, opt, tokens, t: TrainConfig, device: torch.device, module) -> Callable[[], Any]:
    """The loop a PyTorch user writes by hand: no harness, same model, optimizer and data."""
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


def bench_one(
    name: str,
    mcfg: ModelConfig,
    t: TrainConfig,
    tokens: TokenData,
    device: torch.device,
    warmup: int,
    window: int,
    windows: int,
) -> list[dict[str, Any]]:
    rows = []
    fpt = flops_per_token(mcfg, t.seq_len)
    peak = peak_flops(device)
    for loop, make in (("xtrain", harness_step), ("plain", plain_step)):
        model = build_model(mcfg, 0, device).train()
        opt = build_optimizer(model, t)
        module = torch.compile(model) if t.compile else model
        timing = time_windows(
            make(model, opt, tokens, t, device, module),
            t.global_batch * t.seq_len,
            warmup,
            window,
            windows,
            device,
        )
        rows.append(
            {
                "config": name,
                "loop": loop,
                "params_M": sum(p.numel() for p in model.parameters()) / 1e6,
                "batch": t.global_batch,
                "seq": t.seq_len,
                "precision": t.precision,
                "compile": t.compile,
                "tokens_per_s": timing.tokens_per_s,
                "spread": timing.spread,
                "tflops": fpt * timing.tokens_per_s / 1e12,
                "mfu": fpt * timing.tokens_per_s / peak if peak else None,
            }
        )
        del model, opt, module
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def print_table(rows: list[dict[str, Any]], device: str) -> None:
    print(f"\nxtrain.bench on {device}: median tokens/s over timed windows (spread = range/median)")
    head = (
        f"{'config':<8} {'loop':<7} {'params':>8} {'batch':>5} {'seq':>4} {'prec':>5} {'compile':>7} "
        f"{'tokens/s':>12} {'spread':>7} {'TFLOP/s':>8} {'MFU':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "-"
        print(
            f"{r['config']:<8} {r['loop']:<7} {r['params_M']:>7.1f}M {r['batch']:>5} {r['seq']:>4} "
            f"{r['precision']:>5} {r['compile']!s:>7} {r['tokens_per_s']:>12,.0f} {100 * r['spread']:>6.1f}% "
            f"{r['tflops']:>8.3f} {mfu:>6}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m xtrain.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--configs", nargs="+", default=["params", "ref"], choices=["params", *SHAPES])
    ap.add_argument("--device", default=None, help="default: train.device from params")
    ap.add_argument(
        "--batch", type=int, default=None, help="sequences per step (default: train.global_batch)"
    )
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=None, help="default: the trained tokenizer's vocabulary")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default=None)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)

    params = load_params(args.params, args.overrides)
    t0 = params["train"]
    device = torch.device(args.device or t0["device"])
    precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    determinism.set_cpu_threads(t0["cpu_threads"])
    determinism.configure(False, device.type)  # throughput: allow the fastest kernels
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    tokens = TokenData.load(args.tokens, device)
    vocab = args.vocab or int(tokens.train.max()) + 1
    if args.vocab is None:
        from tokenizers import Tokenizer

        with contextlib.suppress(Exception):
            vocab = Tokenizer.from_file("data/tokenizer.json").get_vocab_size()
    rows = []
    for name in args.configs:
        shape = {
            k: v
            for k, v in params["model"].items()
            if k in ("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "max_seq_len")
        }
        shape = shape if name == "params" else SHAPES[name]
        seq = args.seq or (t0["seq_len"] if name == "params" else 256)
        mcfg = ModelConfig(vocab_size=vocab, **{**shape, "max_seq_len": max(shape["max_seq_len"], seq)})
        batch = args.batch or t0["global_batch"]
        t = TrainConfig(
            **{
                **t0,
                "device": device.type,
                "precision": precision,
                "global_batch": batch,
                "seq_len": seq,
                "grad_accum": 1,
                "compile": args.compile,
                "fused_adamw": device.type == "cuda",
            }
        )
        rows += bench_one(name, mcfg, t, tokens, device, args.warmup, args.window, args.windows)
    label = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"cpu ({torch.get_num_threads()} threads)"
    )
    print_table(rows, label)
    if args.json:
        from xtrain.fileio import atomic_write_json

        atomic_write_json(args.json, {"device": label, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
