"""Training throughput: the harness's train step vs a plain PyTorch loop of the same model (xtrain/bench.py).

    python -m pipeline.bench                                 # params.yaml's model and the reference config
    python -m pipeline.bench --configs ref large --device cuda --compile none reduce-overhead --profile

Both loops run in the same process on the same data, with the same model, optimizer and
compile mode. Their timed windows are interleaved (A B A B ...) after both have warmed up, so
drift on a shared machine hits both alike; tokens/s is the median window, spread is
(max - min) / median. On CUDA, MFU = model FLOPs per token x tokens/s / 989 TFLOP/s (dense
bf16 peak of an H100/H200 SXM). `--profile` prints where one step's time goes: GPU busy time,
kernel count and the top kernels.
"""

from __future__ import annotations

import argparse
import sys

import torch

from contracts.errors import cli
from contracts.fileio import atomic_write_json
from pipeline import stage
from xtrain.bench import SHAPES, BenchOptions, device_label, print_table, run_bench
from xtrain.tokenizer import load_tokenizer

COMPILE_MODES = ["none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


def parser() -> argparse.ArgumentParser:
    ap = stage.parser(__doc__ or "")
    ap.prog, ap.formatter_class = "python -m pipeline.bench", argparse.RawDescriptionHelpFormatter
    ap.add_argument("--configs", nargs="+", default=["params", "ref"], choices=["params", *SHAPES])
    ap.add_argument("--device", default=None, help="default: train.device from params")
    ap.add_argument(
        "--batch",
        type=int,
        default=None,
        help="sequences per step (default: train.global_batch; 4 for ref/large on cpu)",
    )
    ap.add_argument("--seq", type=int, default=None)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default=None, help="default: bf16 on cuda")
    ap.add_argument("--compile", nargs="+", default=["none"], choices=COMPILE_MODES)
    ap.add_argument("--deterministic", action="store_true", help="time with deterministic algorithms on")
    ap.add_argument("--profile", action="store_true", help="profile one step per row (cuda)")
    ap.add_argument("--warmup", type=int, default=None, help="default: 5 on cuda, 2 on cpu")
    ap.add_argument(
        "--window", type=int, default=None, help="steps per timed window (default: 10 cuda, 3 cpu)"
    )
    ap.add_argument(
        "--windows", type=int, default=None, help="timed windows per loop (default: 5 cuda, 3 cpu)"
    )
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--tokenizer", default="data/tokenizer.json")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    return ap


def options(args: argparse.Namespace) -> BenchOptions:
    keys = ("device", "batch", "seq", "precision", "deterministic", "profile", "warmup", "window", "windows")
    return BenchOptions(
        configs=tuple(args.configs), compile=tuple(args.compile), **{k: getattr(args, k) for k in keys}
    )


@cli
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    params = stage.params_of(args)
    run = params.run_config(load_tokenizer(args.tokenizer).get_vocab_size())
    opts = options(args)
    rows = run_bench(run, args.tokens, opts)
    label = device_label(torch.device(opts.device or run.train.device))
    print_table(rows, label)
    if args.json:
        atomic_write_json(args.json, {"device": label, "torch": torch.__version__, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
