"""RunRecorder: per-step facts of any loop in, one schema-valid metrics.json out."""

from __future__ import annotations

import sys
import time
import weakref
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from contracts.errors import XtrainError
from contracts.lockfile import WriteLock
from params.cadence import eval_due
from params.identity import config_identity
from runrecord import arguments
from runrecord.arguments import RunRecordError
from runrecord.dropout import MODES, install, reseed_noise
from runrecord.one_line import one_line_errors
from runrecord.record_folder import check_run_dir, hold, write_record
from xtrain.core.checkpoint import param_digest, param_shapes_digest
from xtrain.core.env import fingerprint
from xtrain.core.fingerprint import MAX_TERMS, hash32
from xtrain.core.peak_memory import peak_bytes, peak_record

# 1.1: finish(checkpoint=True). 1.2: config.train.steps and config.train.eval_every required (the gates
# take a run's shape from its own config), eval_due(); config_hash leaves train's bookkeeping keys out
# (params/identity.py, one identity with our trainer's). 1.3: model= (train mode per step, dropout
# masks seeded per sample or switched off: metrics.json eval_mode_steps and dropout), run_dir= checked
# at construction, every value checked where it arrives, the run folder staged and guarded,
# finish(checkpoint=True) by default. 1.4: evals at any steps, on rank 0 alone if the loop evaluates
# there (the record lists the steps evaluated; config.train.eval_every optional); a refusal uncaught
# by the loop is one line on stderr, not a traceback.
API_VERSION = "1.4"
METRICS_FORMAT = "xtrain-metrics/1"
WINDOW_STEPS = 5  # timing windows of this many steps; the first is warm-up


def _world_rank() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def _unwrap(model: nn.Module) -> nn.Module:
    """The model itself under a DistributedDataParallel wrapper (its parameter names, its modules)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


class RunRecorder:
    """One per rank. Collects per step what the gates need; finish() reduces over ranks and writes."""

    def __init__(
        self,
        config: dict[str, Any],
        tokens_per_step: int,
        launcher: str | None = None,
        precision: str = "fp32",
        determinism: dict[str, Any] | None = None,
        *,
        model: nn.Module | None = None,
        dropout: str = "seed",
        frozen: tuple[str, ...] = (),
        run_dir: str | Path | None = None,
    ) -> None:
        call = "RunRecorder"
        one_line_errors()  # a refusal the loop does not catch: one line and exit 2, not a traceback
        self.config = arguments.run_config(config)  # a plain JSON copy: what the record will hold
        self.tokens_per_step = arguments.count(
            call, "tokens_per_step", tokens_per_step, 1, "the tokens one optimizer step trains, all ranks"
        )
        self.world, self.rank = _world_rank()
        default = "single" if self.world == 1 else "proc"
        self.launcher = arguments.choice(call, "launcher", launcher or default, arguments.LAUNCHERS)
        if (self.launcher == "single") != (self.world == 1):
            raise RunRecordError(
                call, "launcher", f"{self.launcher!r} at world {self.world}", "single: world 1"
            )
        self.precision = arguments.choice(call, "precision", precision, arguments.PRECISIONS)
        self.determinism = arguments.plain_json(call, "determinism", determinism or {})
        if not isinstance(self.determinism, dict):
            raise RunRecordError(call, "determinism", "not a dict")
        self.dropout_mode = arguments.choice(call, "dropout", dropout, MODES)
        if not isinstance(frozen, (tuple, list)) or not all(isinstance(f, str) and f for f in frozen):
            raise RunRecordError(call, "frozen", f"{frozen!r} is not a tuple of module names")
        self.frozen = tuple(frozen)
        self.run_dir = None if run_dir is None else check_run_dir(run_dir)
        self._lock: WriteLock | None = None  # rank 0's lock on its run folder, construction to finish()
        if self.run_dir is not None and self.rank == 0:
            self._hold(self.run_dir)
        self.train_loss: list[float] = []
        self.grad_norm: list[float] = []
        self.lr: list[float] = []
        self.evals: list[dict[str, Any]] = []
        # per step, this rank: samples, their hash sum, mask hash sum, 1 if a module was not training
        self._rows: list[tuple[int, int, int, int]] = []
        self._pending = [0, 0, 0, 0]
        self._model: nn.Module | None = None
        self._modes: list[tuple[str, nn.Module]] = []  # the watched modules not frozen
        self._init_digest: str | None = None  # the watched model's weights before the first step
        self._masks, self._dropout, self._given_seeds, self._warned = None, None, False, False
        self._t0 = time.perf_counter()
        self._step_end: list[float] = []
        self._replica: dict[str, Any] | None = None  # dropout="replicas": set by reseed()
        if model is not None:
            self.watch(model)

    def _hold(self, run_dir: Path) -> None:
        """Lock `run_dir` (runrecord/record_folder.py hold); dropped when the recorder is, or the process ends."""
        self._lock = hold(run_dir)
        weakref.finalize(self, self._lock.release)

    @property
    def steps(self) -> int:
        return int(self.config["train"]["steps"])

    @property
    def watched(self) -> nn.Module | None:
        """The model whose train mode and dropout are recorded (None: not recorded)."""
        return self._model

    @property
    def seeds_masks(self) -> bool:
        """runrecord seeds the watched model's dropout masks (it needs the rows before each forward)."""
        return self._masks is not None

    def watch(self, model: nn.Module) -> None:
        """The model being trained: its train mode is recorded at every samples() and step() call, and
        its dropout seeded per sample (dropout='seed') or switched off (dropout='off')."""
        if not isinstance(model, nn.Module):
            raise RunRecordError("RunRecorder", "model", f"a {type(model).__name__}, not a torch nn.Module")
        if self._model is not None:
            raise RunRecordError("RunRecorder.watch", "model", "a model is already watched")
        self._model = _unwrap(model)
        # listed once: walking named_modules() at every call was half of recording's per-step cost
        self._modes = [
            (n, m)
            for n, m in self._model.named_modules()
            if not any(n == f or n.startswith(f + ".") for f in self.frozen)
        ]
        if self.rank == 0 and not self.train_loss and not self._pending[0]:  # before any update
            self._init_digest = param_digest(self._model)
        self._dropout, self._masks = install(self._model, self.dropout_mode, self.config["seed"])

    def reseed(self, replica: int) -> int:
        """dropout="replicas": seed torch's global RNGs from (seed, replica, rank, world), after the model
        is initialised and the data order fixed, so only the unseedable noise (kernel dropout) differs
        between replicas; the record names the replica (docs/statistical-tier.md). Returns the seed."""
        if self.dropout_mode != "replicas":
            raise RunRecordError(
                "reseed", "", f"dropout={self.dropout_mode!r}", "RunRecorder(..., dropout='replicas')"
            )
        if self.train_loss or self._pending[0]:
            raise RunRecordError("reseed", "replica", "after training began", "reseed before step 0")
        replica = arguments.count("reseed", "replica", replica, 0, "the replica's index")
        seed = reseed_noise(self.config["seed"], replica, self.rank, self.world)
        self._replica = {"index": replica, "tier": "statistical", "noise_seed": seed}
        return seed

    def eval_due(self, done: int) -> bool:
        """Whether to evaluate after `done` optimizer steps: at 0, every train.eval_every steps and after
        the last one. A suggestion: rec.eval() accepts any step, and the gates compare the steps both
        runs evaluated at."""
        done = arguments.count("eval_due", "done", done, 0, "optimizer steps done")
        every = self.config["train"].get("eval_every")
        if every is None:
            raise RunRecordError(
                "eval_due",
                "",
                "config.train.eval_every is not set",
                "set it, or evaluate where your loop does",
            )
        return eval_due(every, self.steps, done)

    def samples(self, indices: list[int] | torch.Tensor, dropout_seeds: list[int] | None = None) -> None:
        """The dataset indices of this rank's next micro-batch, one per batch row, before its forward."""
        if len(self.train_loss) >= self.steps:
            raise RunRecordError("samples", "indices", f"after the last step (train.steps {self.steps})")
        ids = arguments.indices("samples", "indices", indices)
        if dropout_seeds is not None:
            if self._masks is not None:
                raise RunRecordError("samples", "dropout_seeds", "given while runrecord seeds the masks")
            seeds = arguments.indices("samples", "dropout_seeds", dropout_seeds)
            self._pending[2] += sum(hash32(s) for s in seeds)
            self._given_seeds = True
        self._pending[0] += len(ids)
        self._pending[1] += sum(hash32(i) for i in ids)
        if self._pending[0] > MAX_TERMS:
            raise RunRecordError("samples", "indices", f"more than {MAX_TERMS} samples in one step")
        if self._masks is not None:
            self._masks.next_rows(ids)
        self._observe_mode()

    def next_rows(self, indices: list[int] | torch.Tensor) -> None:
        """The dataset indices of the next training forward's rows, for an adapter that calls samples()
        only after the forward (runrecord.hf): the seeded dropout masks need them before it."""
        if self._masks is not None:
            self._masks.next_rows(arguments.indices("next_rows", "indices", indices))

    def step(self, loss: float, grad_norm: float, lr: float) -> None:
        """Close the step: the loss (mean over ranks), the grad norm before clipping, the lr."""
        done = len(self.train_loss)
        if done >= self.steps:
            raise RunRecordError("step", "", f"step {done + 1} of a run of train.steps {self.steps}")
        if self.dropout_mode == "replicas" and self._replica is None:
            raise RunRecordError(
                "step", "", "dropout='replicas' but no replica seeded", "rec.reseed(replica) before step 0"
            )
        if not self._pending[0]:
            raise RunRecordError(
                "step", "", f"step {done} has no samples", "call rec.samples(indices) for each micro-batch"
            )
        values = (
            arguments.real("step", "loss", loss),
            arguments.real("step", "grad_norm", grad_norm, least=0.0),
            arguments.real("step", "lr", lr, least=0.0, finite=True),
        )
        self._observe_mode()
        if self._masks is not None:
            self._pending[2] += self._masks.take()
            self._masks.step, self._masks.rows = done + 1, None
        for series, value in zip((self.train_loss, self.grad_norm, self.lr), values, strict=True):
            series.append(value)
        self._rows.append(tuple(self._pending))  # type: ignore[arg-type]
        self._pending = [0, 0, 0, 0]
        self._step_end.append(time.perf_counter())

    def eval(self, step: int, loss: float) -> None:
        """A validation loss after `step` optimizer steps (0: before training), at any step the loop
        evaluates. Rank 0's evals are the record's: a loop that evaluates on rank 0 alone calls it there
        only; other ranks may call it too (their values are not written)."""
        step = arguments.count("eval", "step", step, 0, "optimizer steps done before this evaluation")
        if step != len(self.train_loss):
            raise RunRecordError(
                "eval",
                "step",
                f"{step}, after {len(self.train_loss)} recorded steps",
                "the optimizer steps done so far: call rec.step() once per optimizer step, then rec.eval()",
            )
        if any(e["step"] == step for e in self.evals):
            raise RunRecordError("eval", "step", f"{step} is recorded already")
        self.evals.append({"step": step, "loss": arguments.real("eval", "loss", loss)})

    def _observe_mode(self) -> None:
        """Mark the open step if a module of the watched model is not in training mode."""
        if self._model is None:
            return
        name = next((n for n, m in self._modes if not m.training), None)
        if name is None:
            return
        self._pending[3] = 1
        if not self._warned:
            self._warned = True
            sys.stderr.write(
                f"runrecord: warning: rank {self.rank}: model in eval mode at training step "
                f"{len(self.train_loss)} (module {name or 'the model'!r} not training): dropout would be "
                "silently off; recorded in metrics.json eval_mode_steps, the gates fail the run\n"
            )

    def finish(
        self, model: nn.Module | None = None, run_dir: str | Path | None = None, checkpoint: bool = True
    ) -> dict[str, Any] | None:
        """Every rank calls it. Reduces fingerprints and parameter agreement; rank 0 writes the record
        and (`checkpoint`) the final weights the consistency gate recomputes param_digest from."""
        model = _unwrap(self._finish_model(model))
        target = self._finish_target(run_dir)
        self._refuse_incomplete()
        self._agree_on_target(target, model)  # rank 0's guard verdict, shared before any collective
        device = next(model.parameters()).device
        samples = self._reduced_samples(device)
        per_rank_max, sums = _cross_rank(model)
        peaks = _gather_floats(float(peak_bytes(device)[0]), device)
        if self.rank != 0:
            return None
        record = self._record(model, device, samples, per_rank_max, sums, peaks)
        if self._lock is None or self._lock.target != target:  # a folder first named here
            self._release()
            self._hold(target)
        try:
            write_record(target, record, model if checkpoint else None)
        finally:
            self._release()
        return record

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _finish_model(self, model: nn.Module | None) -> nn.Module:
        model = model if model is not None else self._model
        if not isinstance(model, nn.Module) or not list(model.parameters()):
            raise RunRecordError("finish", "model", "no nn.Module with parameters given (nor to RunRecorder)")
        return model

    def _finish_target(self, run_dir: str | Path | None) -> Path:
        if run_dir is None and self.run_dir is None:
            raise RunRecordError("finish", "run_dir", "none given (nor to RunRecorder)")
        return Path(run_dir) if run_dir is not None else self.run_dir  # type: ignore[return-value]

    def _refuse_incomplete(self) -> None:
        """A record the gates would refuse is refused here, on every rank alike, before anything is written.
        Evals are not: any steps, rank 0's alone (the gates compare the steps both runs evaluated at)."""
        if len(self.train_loss) != self.steps:
            raise RunRecordError(
                "finish", "", f"{len(self.train_loss)} steps recorded, train.steps {self.steps}"
            )
        if any(self._pending):
            raise RunRecordError("finish", "", "samples() after the last step()")

    def _agree_on_target(self, target: Path, model: nn.Module) -> None:
        """Rank 0 checks the run folder (contracts/outputs.py); every rank raises if it is refused."""
        problem: Exception | None = None
        if self.rank == 0:
            try:
                check_run_dir(target)
            except XtrainError as e:  # OutputRefused: the guard's own one line
                problem = e
        refused = problem is not None
        if self.world > 1:
            flag = torch.tensor([float(refused)], device=next(model.parameters()).device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            refused = bool(flag.item())
        if problem is not None:
            raise problem
        if refused:
            raise RunRecordError("finish", "run_dir", f"rank 0 refused {target} (its error names why)")

    def _reduced_samples(self, device: torch.device) -> dict[str, list[int]]:
        rows = torch.tensor(self._rows, dtype=torch.float64, device=device)  # exact below 2^53
        if self.world > 1:
            dist.all_reduce(rows)
        cols = [[int(v) for v in col] for col in rows.t().tolist()]
        return {"count": cols[0], "hash_sum": cols[1], "dropout_hash_sum": cols[2], "not_training": cols[3]}

    def _windows(self) -> list[dict[str, Any]]:
        ends = [self._t0, *self._step_end]
        out = []
        for first in range(0, len(self._step_end) - WINDOW_STEPS + 1, WINDOW_STEPS):
            seconds = ends[first + WINDOW_STEPS] - ends[first]
            out.append({"first_step": first, "steps": WINDOW_STEPS, "seconds": seconds})
        return out or [{"first_step": 0, "steps": len(self._step_end), "seconds": ends[-1] - ends[0]}]

    def _observed(self, samples: dict[str, list[int]]) -> dict[str, Any]:
        """What only a watched model lets the recorder say: train mode per step, the dropout masks."""
        not_training = samples.pop("not_training")
        out: dict[str, Any] = {}
        if self._model is not None:
            out["eval_mode_steps"] = [s for s, n in enumerate(not_training) if n]
            out["dropout"] = self._dropout
        elif self._given_seeds:
            out["dropout"] = {"masks": "given", "modules": 0, "p": []}
        if self._replica is not None:
            out["replica"] = self._replica  # rank 0's noise seed; every rank's is derived alike
        return out

    def _record(self, model, device, samples, per_rank_max, sums, peaks) -> dict[str, Any]:
        windows, steps = self._windows(), len(self.train_loss)
        elapsed = self._step_end[-1] - self._t0
        steady = windows[1:] or windows
        steady_rate = (
            sum(w["steps"] for w in steady) * self.tokens_per_step / sum(w["seconds"] for w in steady)
        )
        evals = sorted(self.evals, key=_step)
        observed = self._observed(samples)
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
            **observed,
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
            "param_shapes_digest": param_shapes_digest(model),
            **({"init_param_digest": self._init_digest} if self._init_digest else {}),
            "cross_rank": {
                "max_abs_diff": max(per_rank_max),
                "per_rank": [
                    {"rank": r, "max_abs_diff": d, "param_sum": s}
                    for r, (d, s) in enumerate(zip(per_rank_max, sums, strict=True))
                ],
            },
        }


def _step(e: dict[str, Any]) -> int:
    return e["step"]


def _gather_floats(value: float, device: torch.device) -> list[float]:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    # one slot per rank, summed: all_reduce runs on every backend (gloo has no all_gather of CUDA tensors)
    out = torch.zeros(dist.get_world_size(), dtype=torch.float64, device=device)
    out[dist.get_rank()] = value
    dist.all_reduce(out)
    return [float(v) for v in out.tolist()]


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
