"""Training throughput: the harness's train step vs a plain PyTorch loop of the same model.

    python -m pipeline.bench                                 # params.yaml's model and the reference config
    python -m pipeline.bench --configs ref large --device cuda --compile none reduce-overhead --profile

Timed windows of both loops interleaved, median tokens/s and spread; MFU on CUDA; `--profile` shows
where one step's time goes. How it measures: xtrain/bench/throughput.py.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from contracts import outputs
from contracts.errors import cli
from contracts.fileio import canonical_json
from contracts.validate import ValidationError
from params.config import Params
from pipeline import stage
from xtrain.bench.throughput import SHAPES, BenchOptions, device_label, print_table, run_bench
from xtrain.core.tokenizer import load_tokenizer

COMPILE_MODES = ["none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
# Integer options and their least value; absent means the device's default (BenchOptions.for_device).
INT_OPTIONS = {
    "batch": ("sequences per step (default: train.global_batch; 4 for ref/large on cpu)", 1),
    "seq": (
        "sequence length, at most the config's max_seq_len (default: train.seq_len for params, 256 for ref/large)",
        1,
    ),
    "warmup": ("untimed steps per loop (default: 5 on cuda, 2 on cpu)", 0),
    "window": ("steps per timed window (default: 10 cuda, 3 cpu)", 1),
    "windows": ("timed windows per loop (default: 5 cuda, 3 cpu)", 1),
}
FORMAT = "xtrain-bench/1"
ROWS = outputs.json_kind("bench rows", FORMAT)


def at_least(low: int) -> Any:
    """An argparse type: an integer >= `low` (`--window 0` timed nothing and printed 0 tok/s, exit 0)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is not >= {low}")
        return value

    return parse


def check_seq(args: argparse.Namespace, params: Params) -> None:
    """--seq within every timed config's positions (`--seq 100000` grew the model's RoPE table instead)."""
    for config in args.configs if args.seq is not None else ():
        limit = params["model"]["max_seq_len"] if config == "params" else SHAPES[config]["max_seq_len"]
        if args.seq > limit:
            raise ValidationError(
                "--seq", str(args.seq), f"longer than {config}'s max_seq_len {limit}", f"<= {limit}"
            )


def parser() -> argparse.ArgumentParser:
    ap = stage.parser(__doc__ or "")
    ap.prog, ap.formatter_class = "python -m pipeline.bench", argparse.RawDescriptionHelpFormatter
    ap.add_argument("--configs", nargs="+", default=["params", "ref"], choices=["params", *SHAPES])
    ap.add_argument("--device", default=None, help="default: train.device from params")
    for name, (text, low) in INT_OPTIONS.items():
        ap.add_argument(f"--{name}", type=at_least(low), default=None, help=text)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default=None, help="default: bf16 on cuda")
    ap.add_argument("--compile", nargs="+", default=["none"], choices=COMPILE_MODES)
    ap.add_argument("--deterministic", action="store_true", help="time with deterministic algorithms on")
    ap.add_argument("--profile", action="store_true", help="profile one step per row (cuda)")
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--tokenizer", default="data/tokenizer.json")
    outputs.output_flag(
        ap.add_argument("--json", default=None, help="also write the rows to this JSON file"), ROWS
    )
    return ap


def options(args: argparse.Namespace) -> BenchOptions:
    keys = ("device", "precision", "deterministic", "profile", *INT_OPTIONS)
    return BenchOptions(
        configs=tuple(args.configs), compile=tuple(args.compile), **{k: getattr(args, k) for k in keys}
    )


@cli
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.json:
        outputs.check(args.json, ROWS)  # before minutes of timing: never over a file it did not write
    params = stage.params_of(args)
    check_seq(args, params)
    run = params.run_config(load_tokenizer(args.tokenizer).get_vocab_size())
    opts = options(args)
    rows = run_bench(run, args.tokens, opts)
    label = device_label(torch.device(opts.device or run.train.device))
    print_table(rows, label)
    if args.json:
        record = {"format": FORMAT, "device": label, "torch": torch.__version__, "rows": rows}
        outputs.write_file(args.json, canonical_json(record), ROWS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
