"""Scaling benchmark: global tokens/s per launcher and world size, at a fixed per-rank batch.

    python -m xtrain.scaling_bench [--out bench]      # worlds and launchers from params.yaml `scaling:`

Each (launcher, world) runs in a fresh process (thread: `python -m xtrain.scaling_bench rank thread`;
proc: a real torchrun), trains the params' model for warm-up + windows x window_steps steps
through the shared train step, and reports the median tokens/s of the windows with their spread
((max - min) / median). Worlds above the devices present (GPUs on cuda, cores on cpu) are
dropped and recorded as such. Writes bench/scaling.json and bench/scaling.png.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

FORMAT = "xtrain-scaling/1"


def rank_body(
    spec: Any, comm: Any, per_rank_batch: int, warmup: int, window: int, windows: int
) -> list[float]:
    """Timed training on one rank: the harness's train step on the real data, no eval or checkpoints."""
    import dataclasses

    import torch

    from xtrain.bench import harness_step, time_windows
    from xtrain.data import TokenData
    from xtrain.model import build_model
    from xtrain.optim import build_optimizer
    from xtrain.train import flat_grads

    t = dataclasses.replace(spec.run.train, global_batch=per_rank_batch * comm.world, grad_accum=1)
    model = build_model(spec.run.model, spec.run.seed, comm.device).train()
    data = TokenData.load(spec.tokens_path, comm.device)
    module = comm.wrap(model)
    if t.compile:
        module = torch.compile(module, mode=t.compile_mode)
    opt = build_optimizer(model, t)
    step = harness_step(model, opt, data, t, module, comm, flat_grads(model, comm))
    timing = time_windows(step, t.global_batch * t.seq_len, warmup, window, windows, comm.device)
    return timing.windows


def measure_one(launcher: str, world: int, args: argparse.Namespace) -> list[float]:
    """Run one (launcher, world) in a fresh process; returns rank 0's window rates."""
    from xtrain.launch import torchrun_cmd

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "windows.json"
        common = [
            "--params",
            args.params,
            *[a for o in args.overrides for a in ("--set", o)],
            "--tokens",
            args.tokens,
            "--tokenizer",
            args.tokenizer,
            "--result",
            str(out),
        ]
        if launcher == "thread":
            cmd = [
                sys.executable,
                "-m",
                "xtrain.scaling_bench",
                "rank",
                "thread",
                "--world",
                str(world),
                *common,
            ]
        else:
            cmd = torchrun_cmd(world, "xtrain.scaling_bench", "rank", "proc", *common)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"scaling {launcher} world {world} failed:\n{proc.stderr[-3000:]}")
        return json.loads(out.read_text())


def measure_rank(argv: list[str]) -> int:
    """Entry for one measured process (a thread launcher, or one torchrun worker)."""
    from contracts.fileio import atomic_write_json
    from xtrain.cli import add_params_args
    from xtrain.config import load_params
    from xtrain.launch import build_spec, run_proc_rank, run_threads

    ap = argparse.ArgumentParser(prog="python -m xtrain.scaling_bench rank")
    ap.add_argument("launcher", choices=["thread", "proc"])
    ap.add_argument("--world", type=int, default=1)
    add_params_args(ap)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--result", required=True)
    args = ap.parse_args(argv)
    params = load_params(args.params, args.overrides)
    sc = params["scaling"]
    spec = build_spec(params, args.launcher, None, args.tokens, args.tokenizer, False)

    def body(spec: Any, comm: Any) -> list[float]:
        return rank_body(
            spec, comm, sc["per_rank_batch"], sc["warmup_steps"], sc["window_steps"], sc["windows"]
        )

    if args.launcher == "thread":
        windows = run_threads(spec, args.world, params["launchers"]["timeout_s"], target=body)[0]
        atomic_write_json(args.result, windows)
    else:
        windows = run_proc_rank(
            spec, params["launchers"]["timeout_s"], params["launchers"]["grad_sync"], target=body
        )
        if int(os.environ["RANK"]) == 0:
            atomic_write_json(args.result, windows)
    return 0


def devices_available(device: str) -> int:
    import torch

    if device == "cuda":
        return torch.cuda.device_count()
    return os.cpu_count() or 1


def summarise(rates: dict[str, dict[int, list[float]]]) -> dict[str, dict[str, Any]]:
    from xtrain.bench import summarise as timing_of

    out: dict[str, dict[str, Any]] = {}
    for launcher, by_world in rates.items():
        timings = {w: timing_of(windows) for w, windows in sorted(by_world.items())}
        base = timings[min(timings)].tokens_per_s if timings else None
        out[launcher] = {}
        for w, timing in timings.items():
            speedup = timing.tokens_per_s / base if base else 1.0
            out[launcher][str(w)] = {
                "tokens_per_s": timing.tokens_per_s,
                "speedup": speedup,
                "efficiency": speedup / w,
                "spread": timing.spread,
                "windows": timing.windows,
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["rank"]:
        return measure_rank(argv[1:])
    from contracts import artifacts
    from xtrain.cli import add_params_args
    from xtrain.config import load_params

    ap = argparse.ArgumentParser(
        prog="python -m xtrain.scaling_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_params_args(ap)
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--tokenizer", default="data/tokenizer.json")
    ap.add_argument("--out", default="bench")
    args = ap.parse_args(argv)
    params = load_params(args.params, args.overrides)
    sc, t = params["scaling"], params["train"]
    present = devices_available(t["device"])
    worlds = [w for w in sc["worlds"] if w <= present]
    rates: dict[str, dict[int, list[float]]] = {}
    for launcher in sc["launchers"]:
        rates[launcher] = {}
        for w in worlds:
            rates[launcher][w] = measure_one(launcher, w, args)
            print(
                f"scaling: {launcher} world {w}: {statistics.median(rates[launcher][w]):,.0f} tokens/s",
                file=sys.stderr,
                flush=True,
            )
    import torch

    device = torch.cuda.get_device_name(0) if t["device"] == "cuda" else f"cpu ({os.cpu_count()} cores)"
    result = {
        "format": FORMAT,
        "profile": params["profile"],
        "device": device,
        "device_count": present,
        "model": {
            k: v
            for k, v in params["model"].items()
            if k in ("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim")
        },
        "per_rank_batch": sc["per_rank_batch"],
        "seq_len": t["seq_len"],
        "precision": t["precision"],
        "grad_sync": params["launchers"]["grad_sync"],
        "worlds_requested": sc["worlds"],
        "worlds": worlds,
        "results": summarise(rates),
    }
    out = Path(args.out)
    artifacts.write("scaling", out / "scaling.json", result)
    plot(result, out / "scaling.png")
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
