"""The per-rank training loop, shared by every launcher (single is the same loop with world 1).

`train_rank(comm, model, data, spec)` runs on each rank. Only `comm` differs between launchers;
the step, the sharding, dropout, eval, checkpointing and the measured invariants are this code.
Rank 0 alone writes checkpoints and metrics, each atomically.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from contracts import artifacts
from contracts.errors import XtrainError
from contracts.fileio import atomic_write_text
from xtrain import faults, perf_hooks
from xtrain.checkpoint import param_digest, read_state, restore, save_checkpoint
from xtrain.checkpoint_dir import CheckpointDir
from xtrain.comm import Communicator, FlatGrads
from xtrain.config import RunConfig, TrainConfig
from xtrain.data import TokenData, eval_batches, step_batch
from xtrain.determinism import derive_seed
from xtrain.fingerprint import StepLedger
from xtrain.model import Transformer
from xtrain.optim import build_optimizer, lr_at, set_lr
from xtrain.peak_memory import peak_bytes, peak_record
from xtrain.progress import Progress

METRICS_FORMAT = "xtrain-metrics/1"


class NonFiniteLoss(XtrainError, RuntimeError):
    pass


class ResumeMismatch(XtrainError, RuntimeError):
    pass


@dataclass(frozen=True)
class RunSpec:
    """Everything a rank needs to run, identical on every rank."""

    run: RunConfig
    tokens_path: str
    launcher: str
    run_dir: str | None = None  # None: write nothing (tests, benchmarks)
    tokenizer_path: str | None = None
    resume: bool = False
    env: dict[str, Any] = field(default_factory=dict)
    determinism: dict[str, Any] = field(default_factory=dict)


@dataclass
class History:
    train_loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    evals: list[dict[str, float]] = field(default_factory=list)
    # Per step, summed over ranks: rows consumed, the sum of their sample hashes (xtrain.data) and
    # of the dropout mask seeds drawn (xtrain.model); the loss_match gate compares them exactly.
    sample_count: list[int] = field(default_factory=list)
    sample_hash: list[int] = field(default_factory=list)
    dropout_hash: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "train_loss": self.train_loss,
            "grad_norm": self.grad_norm,
            "lr": self.lr,
            "eval": self.evals,
            "samples": self.samples(),
        }

    def samples(self) -> dict[str, list[int]]:
        return {
            "count": self.sample_count,
            "hash_sum": self.sample_hash,
            "dropout_hash_sum": self.dropout_hash,
        }

    def add_samples(self, rows: list[tuple[int, ...]]) -> None:
        for count, hash_sum, dropout_hash in rows:
            self.sample_count.append(count)
            self.sample_hash.append(hash_sum)
            self.dropout_hash.append(dropout_hash)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> History:
        samples = d.get("samples", {})  # older checkpoints: none recorded
        return cls(
            list(d["train_loss"]),
            list(d["grad_norm"]),
            list(d["lr"]),
            list(d["eval"]),
            list(samples.get("count", [])),
            list(samples.get("hash_sum", [])),
            list(samples.get("dropout_hash_sum", [])),
        )


@dataclass
class RankResult:
    rank: int
    world: int
    history: History
    param_digest: str
    cross_rank_max_abs: list[float]  # per rank: max |p_rank - p_0| over all tensors
    param_sums: list[float]  # per rank: sum of all parameters (float64), a cheap fingerprint
    tokens_per_s: float
    steady_tokens_per_s: float
    train_time_s: float
    wall_s: float
    start_step: int
    windows: list[dict[str, Any]]  # raw timing: {first_step, steps, seconds} per logged window
    peak_memory: dict[str, Any]  # xtrain.peak_memory.peak_record


def flat_grads(model: nn.Module, comm: Communicator) -> FlatGrads | None:
    """One flat gradient buffer when this rank must all-reduce gradients itself (not DDP, world > 1)."""
    if comm.uses_ddp or comm.world == 1:
        return None
    return FlatGrads(list(model.parameters()))


def autocast(t: TrainConfig, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    if t.precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def check_train_mode(model: nn.Module) -> None:
    """The seed design's bug: after an eval, DDP training ran with dropout silently off."""
    if not all(m.training for m in model.modules()):
        raise RuntimeError("model is in eval mode at a training step: dropout would be silently off")


def train_step(
    module: nn.Module,
    model: Transformer,
    opt: torch.optim.Optimizer,
    micro: list[tuple[torch.Tensor, torch.Tensor]],
    comm: Communicator,
    grads: FlatGrads | None,
    t: TrainConfig,
    dropout_seeds: list[int],
    dropout_rows: list[list[int]] | None = None,
    grad_scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step over this rank's micro-batches. Returns (local mean loss, grad norm) on device.

    `dropout_rows`: the global batch index of each micro-batch's rows (per-sample dropout masks).
    `grad_scale` multiplies the synchronised gradients: 1, except to inject the grad_sum fault.
    """
    k = len(micro)
    loss_sum = torch.zeros((), device=comm.device)
    for m, (x, y) in enumerate(micro):
        model.set_dropout_seed(dropout_seeds[m], dropout_rows[m] if dropout_rows else None)
        sync_ctx = comm.no_sync(module) if m < k - 1 else contextlib.nullcontext()
        with sync_ctx:
            with autocast(t, comm.device):
                logits = module(x)
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
            (loss / k).backward()
        loss_sum += loss.detach()
    comm.sync_grads(grads)
    params = [p for p in model.parameters()]
    if grad_scale != 1.0:
        torch._foreach_mul_([p.grad for p in params], grad_scale)
    if t.grad_clip > 0:
        gnorm = torch.nn.utils.clip_grad_norm_(params, t.grad_clip, foreach=True)
    else:
        gnorm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
    opt.step()
    if grads is not None:
        grads.zero_()
    else:
        opt.zero_grad(set_to_none=True)
    return loss_sum / k, gnorm.detach()


@torch.no_grad()
def evaluate(model: Transformer, data: TokenData, spec: RunSpec, comm: Communicator) -> float:
    """Mean validation loss over fixed batches (sharded, averaged over ranks); restores train mode."""
    t = spec.run.train
    was_training = model.training
    model.eval()
    try:
        total = torch.zeros((), device=comm.device)
        batches = eval_batches(
            data, spec.run.seed, t.eval_batches, t.global_batch, t.seq_len, comm.rank, comm.world
        )
        for x, y in batches:
            with autocast(t, comm.device):
                logits = model(x)
            total += F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
        total /= len(batches)
        comm.all_reduce_mean_([total])
        return float(total)
    finally:
        model.train(was_training)


def cross_rank_agreement(model: nn.Module, comm: Communicator) -> tuple[list[float], list[float]]:
    """Per rank: max |p_rank - p_0| over all tensors, and the float64 parameter sum.

    Rank 0's tensors are broadcast one at a time, so no rank ever holds a second full model.
    """
    local_max = 0.0
    total = 0.0
    for _, p in sorted(model.named_parameters()):
        ref = p.detach().clone()
        comm.broadcast_([ref], src=0)
        local_max = max(local_max, float((p.detach() - ref).abs().max()))
        total += float(p.detach().double().sum())
    return comm.gather_floats(local_max), comm.gather_floats(total)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_rank(comm: Communicator, model: Transformer, data: TokenData, spec: RunSpec) -> RankResult:
    t = spec.run.train
    wall0 = time.perf_counter()
    if t.global_batch % (t.grad_accum * comm.world):
        raise ValueError(
            f"train.global_batch={t.global_batch} is not divisible by grad_accum*world="
            f"{t.grad_accum * comm.world}"
        )
    model.train()
    module = comm.wrap(model)
    if t.compile:
        module = torch.compile(module, mode=t.compile_mode)
    grads = flat_grads(model, comm)
    opt = build_optimizer(model, t)
    ckpts = CheckpointDir(Path(spec.run_dir) / "checkpoints", t.keep_checkpoints) if spec.run_dir else None
    is_writer = comm.rank == 0 and spec.run_dir is not None

    history, start = History(), 0
    if spec.resume and ckpts is not None and (latest := ckpts.latest()) is not None:
        state = read_state(latest)
        if state["config_hash"] != spec.run.config_hash():
            raise ResumeMismatch(
                f"{latest}/state.json: config_hash {state['config_hash']} differs from this "
                f"run's {spec.run.config_hash()}: refusing to resume a different configuration"
            )
        restore(latest, state, model, opt)  # verifies md5s and the parameter digest first
        history, start = History.from_dict(state["history"]), int(state["step"])

    tokens_per_step = t.global_batch * t.seq_len
    progress = Progress(t.steps, start, f"{spec.launcher} w{comm.world}", enabled=comm.rank == 0)
    if start == 0 and t.eval_every:
        history.evals.append({"step": 0, "loss": evaluate(model, data, spec, comm)})

    pending: list[tuple[int, torch.Tensor, torch.Tensor, float]] = []
    windows: list[dict[str, Any]] = []  # the first one (compile, allocator warm-up) is not steady
    injected = perf_hooks.hold(comm.device)  # test hook: held until the peak is read
    train_time, window_time, steady_time, steady_tokens = 0.0, 0.0, 0.0, 0
    first_window = True
    _sync(comm.device)
    tick = time.perf_counter()

    def flush() -> None:
        nonlocal window_time, first_window, steady_time, steady_tokens, train_time, tick
        if not pending:
            return
        losses = torch.stack([p[1] for p in pending]).float()
        comm.all_reduce_mean_([losses])  # the trajectory is the mean over ranks, like single-device
        norms = torch.stack([p[2] for p in pending]).float().tolist()
        _sync(comm.device)
        now = time.perf_counter()
        window_time, tick = now - tick, now
        train_time += window_time
        windows.append({"first_step": pending[0][0], "steps": len(pending), "seconds": window_time})
        if not first_window:
            steady_time += window_time
            steady_tokens += len(pending) * tokens_per_step
        first_window = False
        for (step, _, _, lr), loss, gnorm in zip(pending, losses.tolist(), norms, strict=True):
            if not math.isfinite(loss):
                raise NonFiniteLoss(
                    f"loss is {loss} at step {step} (lr {lr:.3e}, grad norm {gnorm}): "
                    "stopping; check the learning rate, precision and data"
                )
            history.train_loss.append(loss)
            history.grad_norm.append(gnorm)
            history.lr.append(lr)
        progress.update(
            pending[-1][0] + 1,
            len(pending),
            history.train_loss[-1],
            pending[-1][3],
            len(pending) * tokens_per_step / max(window_time, 1e-9),
        )
        pending.clear()

    def pause_clock() -> float:
        flush()
        return time.perf_counter()

    ledger = StepLedger()  # samples and dropout masks per step, summed over ranks at checkpoints
    for step in range(start, t.steps):
        check_train_mode(model)
        poison = faults.at_step(comm.rank, step)
        lr = lr_at(step, t)
        set_lr(opt, lr)
        batch = step_batch(
            data, spec.run.seed, step, t.global_batch, t.grad_accum, t.seq_len, comm.rank, comm.world
        )
        # One dropout seed per step for every rank: masks are per global sample (xtrain/model.py).
        dropout_seed = faults.dropout_seed(
            spec.run.seed, comm.rank, step, derive_seed(spec.run.seed, "dropout", step)
        )
        grad_scale = faults.grad_scale(comm.rank, step, comm.world)
        comm.progress(step)
        loss, gnorm = train_step(
            module,
            model,
            opt,
            batch.micro,
            comm,
            grads,
            t,
            [dropout_seed] * t.grad_accum,
            batch.rows,
            grad_scale,
        )
        ledger.add(batch.count, batch.hash_sum, model.dropout.take_drawn())
        perf_hooks.step_delay()
        if poison:
            loss = loss * float("nan")
        pending.append((step, loss, gnorm, lr))
        done = step + 1
        if done % t.log_every == 0 or done == t.steps:
            flush()
        if t.eval_every and (done % t.eval_every == 0 or done == t.steps):
            paused = pause_clock()
            history.evals.append({"step": done, "loss": evaluate(model, data, spec, comm)})
            progress.note(f"step {done}: val loss {history.evals[-1]['loss']:.4f}")
            tick += time.perf_counter() - paused
        if ckpts is not None and ((t.ckpt_every and done % t.ckpt_every == 0) or done == t.steps):
            paused = pause_clock()
            history.add_samples(ledger.reduce(comm))
            if is_writer:
                state = _checkpoint_state(spec, done, history, model)
                save_checkpoint(ckpts.path(done), model, opt, state, _tok(spec))
                ckpts.commit(done)
            tick += time.perf_counter() - paused
    flush()
    history.add_samples(ledger.reduce(comm))
    progress.close()

    per_rank_max, param_sums = cross_rank_agreement(model, comm)
    digest = param_digest(model)
    peaks = comm.gather_floats(float(peak_bytes(comm.device)[0]))
    del injected
    tokens = (t.steps - start) * tokens_per_step
    return RankResult(
        rank=comm.rank,
        world=comm.world,
        history=history,
        param_digest=digest,
        cross_rank_max_abs=per_rank_max,
        param_sums=param_sums,
        tokens_per_s=tokens / max(train_time, 1e-9),
        steady_tokens_per_s=steady_tokens / steady_time
        if steady_time > 0
        else tokens / max(train_time, 1e-9),
        train_time_s=train_time,
        wall_s=time.perf_counter() - wall0,
        start_step=start,
        windows=windows,
        peak_memory=peak_record(comm.device, peaks, shared_process=spec.launcher == "thread"),
    )


def _tok(spec: RunSpec) -> Path | None:
    return Path(spec.tokenizer_path) if spec.tokenizer_path else None


def _checkpoint_state(spec: RunSpec, step: int, history: History, model: nn.Module) -> dict[str, Any]:
    return {
        "step": step,
        "seed": spec.run.seed,
        "config": spec.run.to_dict(),
        "config_hash": spec.run.config_hash(),
        # Randomness is counter-based (xtrain.determinism.derive_seed): the RNG state is (seed, step).
        "rng": {"scheme": "derive_seed(seed, purpose, step, ...)", "seed": spec.run.seed, "next_step": step},
        "param_digest": param_digest(model),
        "launcher": spec.launcher,
        "history": history.to_dict(),
    }


def metrics_dict(spec: RunSpec, result: RankResult, model: nn.Module) -> dict[str, Any]:
    t = spec.run.train
    h = result.history
    return {
        "format": METRICS_FORMAT,
        "launcher": spec.launcher,
        "world": result.world,
        "device": spec.env.get("device_type", "cpu"),
        "precision": t.precision,
        "config_hash": spec.run.config_hash(),
        "config": spec.run.to_dict(),
        "env": spec.env,
        "determinism": spec.determinism,
        "steps": t.steps,
        "tokens_per_step": t.global_batch * t.seq_len,
        "n_params": sum(p.numel() for p in model.parameters()),
        "train_loss": h.train_loss,
        "grad_norm": h.grad_norm,
        "lr": h.lr,
        "eval": h.evals,
        "samples": h.samples(),
        "initial_val_loss": h.evals[0]["loss"] if h.evals and h.evals[0]["step"] == 0 else None,
        "final_val_loss": h.evals[-1]["loss"] if h.evals else None,
        "tokens_per_s": result.tokens_per_s,
        "steady_tokens_per_s": result.steady_tokens_per_s,
        "train_time_s": result.train_time_s,
        "wall_s": result.wall_s,
        "resumed_from_step": result.start_step or None,
        "perf": {"windows": result.windows, "warmup_windows": 1, "peak_memory": result.peak_memory},
        "param_digest": result.param_digest,
        "cross_rank": {
            "max_abs_diff": max(result.cross_rank_max_abs),
            "per_rank": [
                {"rank": r, "max_abs_diff": d, "param_sum": s}
                for r, (d, s) in enumerate(zip(result.cross_rank_max_abs, result.param_sums, strict=True))
            ],
        },
    }


def summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """The key figures, for `dvc metrics show` (metrics.json holds everything)."""
    return {
        "world": metrics["world"],
        "final_train_loss": metrics["train_loss"][-1],
        "initial_val_loss": metrics["initial_val_loss"],
        "final_val_loss": metrics["final_val_loss"],
        "tokens_per_s": round(metrics["tokens_per_s"], 1),
        "cross_rank_max_abs_diff": metrics["cross_rank"]["max_abs_diff"],
        "train_time_s": round(metrics["train_time_s"], 2),
    }


def write_metrics(run_dir: Path, metrics: dict[str, Any]) -> None:
    run_dir = Path(run_dir)
    artifacts.write("metrics", run_dir / "metrics.json", metrics)
    artifacts.write("summary", run_dir / "summary.json", summary(metrics))
    rows = ["step,loss"] + [f"{i},{v!r}" for i, v in enumerate(metrics["train_loss"])]
    atomic_write_text(run_dir / "loss.csv", "\n".join(rows) + "\n")
    rows = ["step,val_loss"] + [f"{e['step']},{e['loss']!r}" for e in metrics["eval"]]
    atomic_write_text(run_dir / "eval.csv", "\n".join(rows) + "\n")
