"""RunRecorder: per-step facts of any loop in, one schema-valid metrics.json out."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from safetensors.torch import save
from torch import nn

from contracts.fileio import atomic_write_bytes, atomic_write_text
from params.cadence import eval_due
from params.identity import config_identity
from xtrain.core.checkpoint import model_tensors, param_digest
from xtrain.core.env import fingerprint
from xtrain.core.fingerprint import MAX_TERMS, hash32
from xtrain.core.peak_memory import peak_bytes, peak_record
from xtrain.core.train import write_metrics

# 1.1: finish(checkpoint=True). 1.2: config.train.steps and config.train.eval_every required (the gates
# take a run's shape from its own config), eval_due(); config_hash leaves train's bookkeeping keys out
# (params/identity.py, one identity with our trainer's)
API_VERSION = "1.2"
METRICS_FORMAT = "xtrain-metrics/1"
WINDOW_STEPS = 5  # timing windows of this many steps; the first is warm-up


def _world_rank() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


class RunRecorder:
    """One per rank. Collects per step what the gates need; finish() reduces over ranks and writes."""

    def __init__(
        self,
        config: dict[str, Any],
        tokens_per_step: int,
        launcher: str | None = None,
        precision: str = "fp32",
        determinism: dict[str, Any] | None = None,
    ) -> None:
        missing = [k for k in ("seed", "model", "train") if k not in config]
        if missing:
            raise ValueError(f"RunRecorder config: missing {', '.join(missing)} (seed, model, train)")
        for key, least in (("steps", 1), ("eval_every", 0)):
            value = config["train"].get(key) if isinstance(config["train"], dict) else None
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(
                    f"RunRecorder config: train.{key}: {value!r} is not an integer >= {least} (the gates "
                    "take the run's length and eval steps from train.steps and train.eval_every)"
                )
        self.world, self.rank = _world_rank()
        self.config = json.loads(json.dumps(config))  # a plain JSON copy: what the record will hold
        self.launcher = launcher or ("single" if self.world == 1 else "proc")
        self.precision, self.tokens_per_step = precision, tokens_per_step
        self.determinism = determinism or {}
        self.train_loss: list[float] = []
        self.grad_norm: list[float] = []
        self.lr: list[float] = []
        self.evals: list[dict[str, Any]] = []
        self._rows: list[tuple[int, int, int]] = []  # per step: count, hash sum, dropout hash sum (this rank)
        self._pending = [0, 0, 0]
        self._t0 = time.perf_counter()
        self._step_end: list[float] = []

    def eval_due(self, done: int) -> bool:
        """Whether to evaluate after `done` optimizer steps: at 0, every train.eval_every steps and after
        the last one (params/cadence.py, the rule the gates check a record's evals against)."""
        t = self.config["train"]
        return eval_due(t["eval_every"], t["steps"], done)

    def samples(self, indices: list[int] | torch.Tensor, dropout_seeds: list[int] | None = None) -> None:
        """Dataset indices this rank consumed in the current step (call once per micro-batch)."""
        ids = [int(i) for i in (indices.tolist() if isinstance(indices, torch.Tensor) else indices)]
        self._pending[0] += len(ids)
        self._pending[1] += sum(hash32(i) for i in ids)
        self._pending[2] += sum(hash32(s) for s in dropout_seeds or [])
        if self._pending[0] > MAX_TERMS:
            raise ValueError(f"RunRecorder: more than {MAX_TERMS} samples in one step")

    def step(self, loss: float, grad_norm: float, lr: float) -> None:
        """Close the step: the loss (mean over ranks when `reduce_loss`), grad norm before clipping, lr."""
        self.train_loss.append(float(loss))
        self.grad_norm.append(float(grad_norm))
        self.lr.append(float(lr))
        self._rows.append(tuple(self._pending))  # type: ignore[arg-type]
        self._pending = [0, 0, 0]
        self._step_end.append(time.perf_counter())

    def eval(self, step: int, loss: float) -> None:
        """A validation loss after `step` optimizer steps (0: before training), the same on every rank."""
        self.evals.append({"step": int(step), "loss": float(loss)})

    def finish(
        self, model: nn.Module, run_dir: str | Path, checkpoint: bool = False
    ) -> dict[str, Any] | None:
        """Every rank calls it. Reduces fingerprints and parameter agreement; rank 0 writes the record,
        and with `checkpoint` the final weights the consistency gate recomputes param_digest from."""
        if not self.train_loss:
            raise ValueError("RunRecorder.finish: no step was recorded")
        device = next(model.parameters()).device
        samples = self._reduced_samples(device)
        per_rank_max, sums = _cross_rank(model)
        peaks = _gather_floats(float(peak_bytes(device)[0]), device)
        if self.rank != 0:
            return None
        record = self._record(model, device, samples, per_rank_max, sums, peaks)
        write_run(Path(run_dir), record)
        if checkpoint:
            write_final_checkpoint(Path(run_dir), model, len(self.train_loss))
        return record

    def _reduced_samples(self, device: torch.device) -> dict[str, list[int]]:
        rows = torch.tensor(self._rows, dtype=torch.float64, device=device)  # exact below 2^53
        if self.world > 1:
            dist.all_reduce(rows)
        cols = [[int(v) for v in col] for col in rows.t().tolist()]
        return {"count": cols[0], "hash_sum": cols[1], "dropout_hash_sum": cols[2]}

    def _windows(self) -> list[dict[str, Any]]:
        ends = [self._t0, *self._step_end]
        out = []
        for first in range(0, len(self._step_end) - WINDOW_STEPS + 1, WINDOW_STEPS):
            seconds = ends[first + WINDOW_STEPS] - ends[first]
            out.append({"first_step": first, "steps": WINDOW_STEPS, "seconds": seconds})
        return out or [{"first_step": 0, "steps": len(self._step_end), "seconds": ends[-1] - ends[0]}]

    def _record(self, model, device, samples, per_rank_max, sums, peaks) -> dict[str, Any]:
        windows, steps = self._windows(), len(self.train_loss)
        elapsed = self._step_end[-1] - self._t0
        steady = windows[1:] or windows
        steady_rate = (
            sum(w["steps"] for w in steady) * self.tokens_per_step / sum(w["seconds"] for w in steady)
        )
        evals = sorted(self.evals, key=lambda e: e["step"])
        return {
            "format": METRICS_FORMAT,
            "launcher": self.launcher,
            "world": self.world,
            "device": device.type,
            "precision": self.precision,
            "config_hash": config_identity(self.config),  # the one identity (params/identity.py)
            "config": self.config,
            "env": fingerprint(device, torch.get_num_threads(), self.precision),
            "determinism": {**self.determinism, "recorder": f"runrecord {API_VERSION}"},
            "steps": steps,
            "tokens_per_step": self.tokens_per_step,
            "n_params": sum(p.numel() for p in model.parameters()),
            "train_loss": self.train_loss,
            "grad_norm": self.grad_norm,
            "lr": self.lr,
            "eval": evals,
            "samples": samples,
            "initial_val_loss": evals[0]["loss"] if evals and evals[0]["step"] == 0 else None,
            "final_val_loss": evals[-1]["loss"] if evals else None,
            "tokens_per_s": steps * self.tokens_per_step / elapsed,
            "steady_tokens_per_s": steady_rate,
            "train_time_s": elapsed,
            "wall_s": time.perf_counter() - self._t0,
            "resumed_from_step": None,
            "perf": {
                "windows": windows,
                "warmup_windows": 1 if len(windows) > 1 else 0,
                "peak_memory": peak_record(device, peaks, shared_process=False),
            },
            "param_digest": param_digest(model),
            "cross_rank": {
                "max_abs_diff": max(per_rank_max),
                "per_rank": [
                    {"rank": r, "max_abs_diff": d, "param_sum": s}
                    for r, (d, s) in enumerate(zip(per_rank_max, sums, strict=True))
                ],
            },
        }


def _gather_floats(value: float, device: torch.device) -> list[float]:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    out = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(dist.get_world_size())]
    dist.all_gather(out, torch.tensor([value], dtype=torch.float64, device=device))
    return [float(t) for t in out]


def _cross_rank(model: nn.Module) -> tuple[list[float], list[float]]:
    """Per rank: max |p_rank - p_0| (rank 0's tensors broadcast one at a time) and the float64 sum."""
    device = next(model.parameters()).device
    distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    local_max, total = 0.0, 0.0
    for _, p in sorted(model.named_parameters()):
        ref = p.detach().clone()
        if distributed:
            dist.broadcast(ref, src=0)
        local_max = max(local_max, float((p.detach() - ref).abs().max()))
        total += float(p.detach().double().sum())
    return _gather_floats(local_max, device), _gather_floats(total, device)


def write_run(run_dir: Path, record: dict[str, Any]) -> None:
    """metrics.json (schema-validated, atomic), summary.json, loss.csv and eval.csv, as xtrain writes them."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_metrics(run_dir, record)


def write_final_checkpoint(run_dir: Path, model: nn.Module, steps: int) -> None:
    """checkpoints/step_<steps>/model.safetensors (the tensors param_digest hashes, tied ones copied
    apart: safetensors refuses shared storage) and checkpoints/latest, each written atomically."""
    folder = run_dir / "checkpoints" / f"step_{steps:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.clone() for k, v in model_tensors(model).items()}
    atomic_write_bytes(folder / "model.safetensors", save(tensors))
    atomic_write_text(run_dir / "checkpoints" / "latest", folder.name + "\n")
