"""Per-step cost of recording: the same transformers.Trainer with and without runrecord (CPU).

    python examples/hf-trainer/bench_overhead.py [--pairs 10] [--steps 40] [--dims 32 128]

Both arms run the identical Trainer (same TrainingArguments, logging every step, same data and
seed); the recording arm adds IndexedCollator + RecordingCallback + RunRecorder, the plain arm
uses default_data_collator and no callback. Arms alternate (plain, recorded, plain, ...) in one
process so machine load hits both alike. A step's time is the gap between consecutive
`on_step_end`s (a timer callback present in both arms); the first `--warmup` steps are dropped.
Per run: the median step time; per pair: recorded / plain - 1. Printed: the median and the
spread (min, max) of the paired overheads, and `finish()` (once per run, not per step) apart.
A benchmark, not a test: on a shared machine read the spread before the median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import (
    PrinterCallback,
    Qwen3Config,
    Qwen3ForCausalLM,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    default_data_collator,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import Chunks

from runrecord import RunRecorder
from runrecord.hf import IndexedCollator, RecordingCallback


class StepTimer(TrainerCallback):
    """Wall and CPU (this process) time at every step end: on a loaded machine the wall clock also
    counts waiting for a core, the CPU clock only the work this process did."""

    def __init__(self) -> None:
        self.ends: list[float] = []
        self.cpu: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())
        self.cpu.append(time.process_time())
        return control


def model_config(dim: int, vocab: int, seq: int) -> dict:
    return {
        "hidden_size": dim,
        "num_hidden_layers": 2 if dim <= 32 else 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 2 * dim if dim <= 32 else 3 * dim,
        "head_dim": dim // 4,
        "vocab_size": vocab,
        "max_position_embeddings": seq,
        "tie_word_embeddings": True,
    }


def one_run(a: argparse.Namespace, dim: int, tokens: torch.Tensor, record: bool, out: Path) -> tuple:
    """(median wall seconds per steady step, finish() seconds or 0, median CPU seconds per step)."""
    cfg = model_config(dim, a.vocab, a.seq_len)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**cfg))
    args = TrainingArguments(
        output_dir=str(out / "trainer"),
        max_steps=a.steps,
        per_device_train_batch_size=a.batch,
        learning_rate=1e-3,
        seed=0,
        logging_strategy="steps",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        dataloader_num_workers=0,
        disable_tqdm=True,
        remove_unused_columns=False,
        train_sampling_strategy="sequential",
        use_cpu=True,
    )
    timer = StepTimer()
    data = Chunks(tokens, a.seq_len, indexed=record, seed=0)
    callbacks: list[TrainerCallback] = [timer]
    collator = default_data_collator
    recorder = None
    if record:
        recorder = RunRecorder(
            {"seed": 0, "model": cfg, "train": {"steps": a.steps, "eval_every": 0}},
            tokens_per_step=a.batch * a.seq_len,
        )
        collator = IndexedCollator(default_data_collator)
        callbacks.append(RecordingCallback(recorder, collator))
    trainer = Trainer(model=model, args=args, data_collator=collator, train_dataset=data, callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)  # no log lines on stdout in either arm
    trainer.train()
    gaps = [b - x for x, b in zip(timer.ends, timer.ends[1:], strict=False)][a.warmup :]
    cpu = [b - x for x, b in zip(timer.cpu, timer.cpu[1:], strict=False)][a.warmup :]
    finish = 0.0
    if recorder is not None:
        t0 = time.perf_counter()
        recorder.finish(trainer.model, out / "run")
        finish = time.perf_counter() - t0
    return statistics.median(gaps), finish, statistics.median(cpu)


def bench(a: argparse.Namespace, dim: int, tokens: torch.Tensor) -> dict:
    plain, rec, over, fin, cpu_over = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.pairs):
            first_recorded = i % 2 == 1  # alternate which arm goes first within a pair
            arms = [True, False] if first_recorded else [False, True]
            got = {r: one_run(a, dim, tokens, r, Path(tmp) / f"{i}-{int(r)}") for r in arms}
            plain.append(got[False][0])
            rec.append(got[True][0])
            fin.append(got[True][1])
            over.append(got[True][0] / got[False][0] - 1)
            cpu_over.append(got[True][2] / got[False][2] - 1)
    return {"plain": plain, "rec": rec, "over": over, "finish": fin, "cpu_over": cpu_over}


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 100:+.2f} ({min(xs) * 100:+.1f} to {max(xs) * 100:+.1f})"


def table(dim: int, r: dict, steps: int, warmup: int) -> str:
    ms = 1e3
    p, q = r["plain"], r["rec"]
    return (
        f"| {dim} | {len(r['over'])} | {steps - warmup - 1} | {statistics.median(p) * ms:.2f} "
        f"({min(p) * ms:.2f}-{max(p) * ms:.2f}) | {statistics.median(q) * ms:.2f} "
        f"({min(q) * ms:.2f}-{max(q) * ms:.2f}) | {spread(r['over'])} | {spread(r['cpu_over'])} "
        f"| {statistics.median(r['finish']) * ms:.0f} |"
    )


def adapter_work(a: argparse.Namespace, tokens: torch.Tensor, repeats: int = 2000) -> tuple[float, float]:
    """The adapter's own work per optimizer step, timed alone in CPU time of this thread (immune to
    other processes' load): IndexedCollator vs the plain collator on one batch, plus the callback's
    step bookkeeping (a queued batch taken, Trainer's log turned into recorder.step). (median, max) s."""
    data = Chunks(tokens, a.seq_len, indexed=True, seed=0)
    feats = [data[i] for i in range(a.batch)]
    plain_feats = [{k: v for k, v in f.items() if k != "sample_index"} for f in feats]
    recorder = RunRecorder(
        {"seed": 0, "model": {}, "train": {"steps": 1, "eval_every": 0}}, tokens_per_step=1
    )
    collator = IndexedCollator(default_data_collator)
    callback = RecordingCallback(recorder, collator)
    logs = {"loss": 1.0, "grad_norm": 1.0, "learning_rate": 1e-3}
    costs = []
    for _ in range(repeats):
        t0 = time.thread_time()
        default_data_collator(plain_feats)
        t1 = time.thread_time()
        collator(feats)
        callback.on_step_end(None, None, None)
        callback.on_log(None, None, None, logs=logs)
        t2 = time.thread_time()
        costs.append((t2 - t1) - (t1 - t0))
    return statistics.median(costs), max(costs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10, help="interleaved (plain, recorded) pairs per size")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5, help="step gaps dropped at the start of each run")
    ap.add_argument("--dims", type=int, nargs="*", default=[32, 128], help="hidden sizes (32: the example)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, a.vocab, (a.seq_len * a.batch * (a.steps + 2),), generator=gen)
    print(f"torch {torch.__version__}, {a.threads} thread(s), batch {a.batch} x {a.seq_len}, {a.steps} steps")
    print(
        "| dim | pairs | steps timed | plain ms/step median (min-max) | recorded ms/step median (min-max) "
        "| wall overhead % median (min to max, paired) | CPU-time overhead % median (min to max) | finish() ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    plain = {}
    for dim in a.dims:
        r = bench(a, dim, tokens)
        plain[dim] = min(r["plain"])  # the least loaded plain step: the largest share the work can be
        print(table(dim, r, a.steps, a.warmup), flush=True)
    work, worst = adapter_work(a, tokens)
    shares = ", ".join(f"{work / s * 100:.3f} % of dim {d}'s fastest plain step" for d, s in plain.items())
    print(
        f"\nadapter's own work per step, timed alone (thread CPU time, 2000 repeats): median "
        f"{work * 1e6:.0f} us (max {worst * 1e6:.0f} us){': ' + shares if shares else ''}",
        flush=True,
    )


if __name__ == "__main__":
    main()
