"""What recording costs nanoGPT per optimizer step, against a step of about 20 ms (target: <= 1 %).

    python3 bench_recording.py [--steps 200] [--repeats 5]   (from examples/nanogpt, the repository on PYTHONPATH)

nanoGPT's own step (model.py's GPT, AdamW, accumulation, clipping) on CPU, one torch thread, with the
showcase's recording lines around it: `rec.samples(ix)` before each micro-batch's forward, the loss
summed over micro-batches (`loss.detach() + ...`), `rec.step(loss, grad_norm, lr)` after the optimizer
step (`RunRecorder(..., model=model)`: the train mode is looked at in every call). The recording work
is timed alone, in thread CPU time (which other processes' load does not inflate), around exactly
those lines; the step in wall time and thread CPU time. Also: the loss's all-reduce under DDP (world
2, gloo, two processes: the one collective the recording lines add per step), `finish()` once, and
`import runrecord` in a fresh interpreter. Prints a Markdown table. No timed test holds these
figures: they vary with the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import GPT, GPTConfig  # noqa: E402  (the vendored nanoGPT model)

from runrecord import RunRecorder  # noqa: E402


def make(args: argparse.Namespace) -> tuple[GPT, torch.optim.Optimizer]:
    torch.manual_seed(1337)
    conf = GPTConfig(
        block_size=args.block,
        vocab_size=96,
        n_layer=args.layers,
        n_head=4,
        n_embd=args.embd,
        dropout=0.0,
        bias=False,
    )
    model = GPT(conf)
    return model, model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")


def one_run(args: argparse.Namespace, out: Path, watch: bool = True) -> dict[str, float]:
    """`args.steps` recorded optimizer steps: per step, the step's wall and CPU time and the recording's CPU time."""
    model, opt = make(args)
    config = {"seed": 1337, "model": {"n_embd": args.embd}, "train": {"steps": args.steps, "eval_every": 0}}
    watched = model if watch else None
    rec = RunRecorder(config, args.batch * args.accum * args.block, model=watched, run_dir=out)
    data = torch.randint(0, 96, (4096,))
    gen = torch.Generator().manual_seed(0)
    step_wall, step_cpu, rec_cpu = [], [], []
    for _ in range(args.steps):
        w0, c0, spent = time.perf_counter(), time.thread_time(), 0.0
        for micro in range(args.accum):
            ix = torch.randint(len(data) - args.block - 1, (args.batch,), generator=gen)
            x = torch.stack([data[i : i + args.block] for i in ix])
            y = torch.stack([data[i + 1 : i + 1 + args.block] for i in ix])
            r0 = time.thread_time()
            rec.samples(ix)  # runrecord
            spent += time.thread_time() - r0
            _, loss = model(x, y)
            loss = loss / args.accum
            r0 = time.thread_time()
            loss_sum = loss.detach() + (loss_sum if micro else 0.0)  # runrecord  # noqa: F821
            spent += time.thread_time() - r0
            loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        r0 = time.thread_time()
        rec.step(loss=loss_sum.item(), grad_norm=grad_norm, lr=1e-3)  # runrecord
        spent += time.thread_time() - r0
        step_wall.append(time.perf_counter() - w0)
        step_cpu.append(time.thread_time() - c0)
        rec_cpu.append(spent)
    f0 = time.perf_counter()
    rec.finish(model, out, checkpoint=True)
    finish = time.perf_counter() - f0
    drop = min(5, args.steps // 4)  # warm-up steps
    return {
        "step_wall_ms": 1e3 * statistics.median(step_wall[drop:]),
        "step_cpu_ms": 1e3 * statistics.median(step_cpu[drop:]),
        "rec_us": 1e6 * statistics.median(rec_cpu[drop:]),
        "finish_ms": 1e3 * finish,
    }


def isolated_us(args: argparse.Namespace, out: Path, n: int = 2000) -> float:
    """The same recording calls per step timed in a tight loop (warm caches: the lower bound)."""
    model, _ = make(args)
    config = {"seed": 1337, "model": {"n_embd": args.embd}, "train": {"steps": n, "eval_every": 0}}
    rec = RunRecorder(config, args.batch * args.accum * args.block, model=model, run_dir=out)
    ix, loss, norm = torch.randint(0, 4000, (args.batch,)), torch.tensor(4.0), torch.tensor(1.0)
    t0 = time.thread_time()
    for _ in range(n):
        for micro in range(args.accum):
            rec.samples(ix)
            loss_sum = loss + (loss_sum if micro else 0.0)  # noqa: F821
        rec.step(loss=loss_sum.item(), grad_norm=norm, lr=1e-3)
    return 1e6 * (time.thread_time() - t0) / n


def _all_reduce_worker(rank: int, store: str, n: int, result: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    t = torch.tensor([1.0])
    for _ in range(20):
        dist.all_reduce(t)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - t0)
    if rank == 0:
        Path(result).write_text(str(statistics.median(times)))
    dist.destroy_process_group()


def all_reduce_us(n: int = 500) -> float:
    """The loss's all-reduce per step under DDP: one float, world 2, gloo (median wall time)."""
    with tempfile.TemporaryDirectory() as tmp:
        store, result = os.path.join(tmp, "store"), os.path.join(tmp, "result")
        mp.spawn(_all_reduce_worker, args=(store, n, result), nprocs=2, join=True)
        return 1e6 * float(Path(result).read_text())


def import_s() -> float:
    cmd = [
        sys.executable,
        "-c",
        "import time; t = time.perf_counter(); import runrecord; print(time.perf_counter() - t)",
    ]
    return float(subprocess.run(cmd, capture_output=True, text=True, check=True, env=os.environ).stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=96)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--accum", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    table(args, *measure(args))
    return 0


def measure(args: argparse.Namespace) -> tuple[list[dict[str, float]], list[float], float, float, float]:
    runs, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            runs.append(one_run(args, Path(tmp) / f"run{i}"))
            bare.append(one_run(args, Path(tmp) / f"bare{i}", watch=False)["rec_us"])
        tight = isolated_us(args, Path(tmp) / "isolated")
    reduce_us, imp = all_reduce_us(), statistics.median(import_s() for _ in range(3))
    return runs, bare, tight, reduce_us, imp


def table(
    args: argparse.Namespace,
    runs: list[dict[str, float]],
    bare: list[float],
    tight: float,
    reduce_us: float,
    imp: float,
) -> None:
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    lo = {k: min(r[k] for r in runs) for k in runs[0]}
    hi = {k: max(r[k] for r in runs) for k in runs[0]}
    load = os.getloadavg()[0]
    print(
        f"nanoGPT {args.layers} layers x {args.embd}, block {args.block}, batch {args.batch} x {args.accum} "
        f"micro-batches, CPU, 1 thread; {args.repeats} runs of {args.steps} steps (medians per run; "
        f"median and range over runs); load average {load:.1f}\n"
    )
    print("| quantity | median | range | share of the step (CPU time) |")
    print("|---|---|---|---|")

    def share(us: float) -> str:
        return f"{100 * us / (1e3 * med['step_cpu_ms']):.3f} %"

    print(
        f"| step, wall | {med['step_wall_ms']:.2f} ms | {lo['step_wall_ms']:.2f}-{hi['step_wall_ms']:.2f} ms | |"
    )
    print(
        f"| step, thread CPU time | {med['step_cpu_ms']:.2f} ms | {lo['step_cpu_ms']:.2f}-{hi['step_cpu_ms']:.2f} ms | 100 % |"
    )
    print(
        f"| recording lines per step (samples x {args.accum}, loss sum, step), thread CPU time | "
        f"{med['rec_us']:.1f} µs | {lo['rec_us']:.1f}-{hi['rec_us']:.1f} µs | {share(med['rec_us'])} |"
    )
    no_model = statistics.median(bare)
    print(
        f"| the same lines without model= (no train-mode look), thread CPU time | {no_model:.1f} µs | "
        f"{min(bare):.1f}-{max(bare):.1f} µs | {share(no_model)} |"
    )
    print(
        f"| the same calls in a tight loop (warm caches), thread CPU time | {tight:.1f} µs | | {share(tight)} |"
    )
    print(
        f"| the loss's all-reduce per step, world 2 gloo (DDP only), wall | {reduce_us:.1f} µs | | {share(reduce_us)} |"
    )
    total = med["rec_us"] + reduce_us
    print(f"| **recording per step under DDP** | **{total:.1f} µs** | | **{share(total)}** (target <= 1 %) |")
    print(f"| same, against a 20 ms step | | | {100 * total / 20e3:.3f} % |")
    print(
        f"| finish(), once per run (with the checkpoint) | {med['finish_ms']:.1f} ms | {lo['finish_ms']:.1f}-{hi['finish_ms']:.1f} ms | |"
    )
    print(f"| import runrecord, once per process | {imp:.2f} s | | |")


if __name__ == "__main__":
    sys.exit(main())
