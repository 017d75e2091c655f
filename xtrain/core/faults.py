"""Fault injection for the failure tests and the DDP gate's negative controls.

XTRAIN_FAULT=<kind>@<rank>:<step>, rank `*` meaning every rank. Unset in normal runs; read once
per process. XTRAIN_FAULT_IN=<name> confines the launcher failures (raise, hang, nan) to the runs
whose folder has a path component <name>: one pilot cell (runs/pilot/<cell>/<launcher>).

Launcher failures, at exactly that step: `raise` (the rank raises), `hang` (the rank stops
answering collectives), `nan` (the rank's loss becomes NaN).

Real DDP bugs, from that step on (the loss_match gate must fail each one):
- `grad_sum`: the rank's synchronised gradients are the sum over ranks, not the mean.
- `same_shard`: the rank reads rank 0's rows of the global batch instead of its own.
- `dropout_unsync`: the rank's dropout masks come from a seed that mixes in the rank (what the
  code did before masks were drawn per global sample), so they differ from single-device's.

Feature-path bugs, from that step on (the pilot gates must fail each one; docs/pilot.md):
- `ddp_eval`: under DDP (world > 1) the rank trains in eval mode, past the train-mode guard
  (the seed's T21: dropout silently off under DDP).
- `ddp_no_dropout`: under DDP the rank's model is built without dropout (T21: the flag never passed).
- `ddp_stays_eval`: under DDP an evaluation leaves the rank in eval mode (T21 as it happened: the
  loop never called model.train() again); the trainer records the steps, the gates fail them.
- `recompute_drift`: activation recompute replays a block with different numbers (KI-3).
- `accum_undivided`: the micro-batch loss is not divided by grad_accum.
- `resume_drop_v`: a resume restores Adam's exp_avg_sq as zeros (the second moment dropped).
- `bf16_no_master`: bf16 training casts the weights to bf16: no fp32 master weights (KI-2).
- `fused_lr_frozen`: with fused AdamW the schedule never reaches the optimizer (it keeps train.lr).

A slower launcher, in the scaling benchmark only: `slow_thread` or `slow_proc` (e.g. slow_proc@*:0)
makes every timed step of that launcher take twice as long (xtrain.bench.scaling.slowed); the scaling
gate must fail it, not re-measure it away.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from xtrain.core.determinism import derive_seed

STEP_KINDS = ("raise", "hang", "nan")
DDP_BUG_KINDS = ("grad_sum", "same_shard", "dropout_unsync")
FEATURE_BUG_KINDS = (
    "ddp_eval",
    "ddp_no_dropout",
    "ddp_stays_eval",
    "recompute_drift",
    "accum_undivided",
    "resume_drop_v",
    "bf16_no_master",
    "fused_lr_frozen",
)
PERF_KINDS = ("slow_thread", "slow_proc")
EVERY_RANK = -1


class InjectedFault(RuntimeError):
    pass


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int  # EVERY_RANK for `*`
    step: int

    def hits(self, kind: str, rank: int, step: int) -> bool:
        """Whether this fault of `kind` acts on (rank, step): at its step, or from it on for DDP bugs."""
        if self.kind != kind or self.rank not in (EVERY_RANK, rank):
            return False
        return step >= self.step if kind in DDP_BUG_KINDS + FEATURE_BUG_KINDS else step == self.step


def parse(text: str | None) -> Fault | None:
    if not text:
        return None
    try:
        kind, where = text.split("@")
        rank, step = where.split(":")
        fault = Fault(kind, EVERY_RANK if rank == "*" else int(rank), int(step))
    except ValueError:
        raise ValueError(
            f"XTRAIN_FAULT={text!r}: expected KIND@RANK:STEP, e.g. raise@1:3 or grad_sum@*:0"
        ) from None
    kinds = STEP_KINDS + DDP_BUG_KINDS + FEATURE_BUG_KINDS + PERF_KINDS
    if fault.kind not in kinds:
        raise ValueError(f"XTRAIN_FAULT={text!r}: kind must be one of {', '.join(kinds)}")
    return fault


_FAULT = parse(os.environ.get("XTRAIN_FAULT"))
_SCOPE = os.environ.get("XTRAIN_FAULT_IN") or None


def in_scope(run_dir: str | None) -> bool:
    """Whether the launcher failures act in the run training in `run_dir` (XTRAIN_FAULT_IN)."""
    return _SCOPE is None or (run_dir is not None and _SCOPE in Path(run_dir).parts)


def _hits(kind: str, rank: int, step: int) -> bool:
    return _FAULT is not None and _FAULT.hits(kind, rank, step)


def slows(launcher: str) -> bool:
    """Whether `launcher`'s timed benchmark steps are slowed twofold (XTRAIN_FAULT=slow_<launcher>@...)."""
    return _FAULT is not None and _FAULT.kind == f"slow_{launcher}"


def at_step(rank: int, step: int, run_dir: str | None = None) -> bool:
    """Apply a `raise`/`hang` fault for (rank, step); True when the loss should be poisoned (`nan`)."""
    if not in_scope(run_dir):
        return False
    if _hits("raise", rank, step):
        raise InjectedFault(f"injected fault at step {step}")
    if _hits("hang", rank, step):
        while True:  # never returns: peers must time out, the launcher must not hang
            time.sleep(0.5)
    return _hits("nan", rank, step)


def grad_scale(rank: int, step: int, world: int) -> float:
    """Factor applied to the synchronised gradients: `world` under `grad_sum` (sum, not mean), else 1."""
    return float(world) if _hits("grad_sum", rank, step) else 1.0


def shard_rank(rank: int, step: int) -> int:
    """Whose rows of the global batch this rank reads: its own, or rank 0's under `same_shard`."""
    return 0 if _hits("same_shard", rank, step) else rank


def dropout_seed(seed: int, rank: int, step: int, correct: int) -> int:
    """The step's dropout seed (`correct`), or under `dropout_unsync` one that mixes in the rank."""
    return derive_seed(seed, "dropout", step, 0, rank) if _hits("dropout_unsync", rank, step) else correct


def eval_mode(rank: int, step: int, world: int) -> bool:
    """`ddp_eval`: whether this DDP rank trains this step in eval mode (dropout silently off)."""
    return world > 1 and _hits("ddp_eval", rank, step)


def drops_dropout(rank: int, world: int) -> bool:
    """`ddp_no_dropout`: whether this DDP rank's model is built without dropout."""
    return world > 1 and _hits("ddp_no_dropout", rank, 0)


def stays_in_eval(rank: int, world: int) -> bool:
    """`ddp_stays_eval`: whether this DDP rank stays in eval mode after an evaluation."""
    return world > 1 and _hits("ddp_stays_eval", rank, 0)


def loss_divisor(rank: int, step: int, grad_accum: int) -> int:
    """What each micro-batch loss is divided by: grad_accum, or 1 under `accum_undivided`."""
    return 1 if _hits("accum_undivided", rank, step) else grad_accum


def drops_adam_v(rank: int, step: int) -> bool:
    """`resume_drop_v`: whether a resume at `step` zeroes Adam's exp_avg_sq."""
    return _hits("resume_drop_v", rank, step)


def bf16_weights(rank: int) -> bool:
    """`bf16_no_master`: whether bf16 training casts the weights themselves to bf16."""
    return _hits("bf16_no_master", rank, 0)


def fused_lr_frozen(rank: int, step: int) -> bool:
    """`fused_lr_frozen`: whether the fused optimizer misses this step's learning rate."""
    return _hits("fused_lr_frozen", rank, step)


def recompute_drift(rank: int) -> bool:
    """`recompute_drift`: whether recompute replays each block with its output scaled by 1 + 2**-10."""
    return _hits("recompute_drift", rank, 0)


class RecomputeDrift:
    """A forward pre-hook on each block: every second training call of a block (the recompute replay
    of non-reentrant checkpointing, which follows its forward) sees its input * (1 + 2**-10), so
    the activations the backward uses differ from the forward's while the loss does not."""

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}

    def __call__(self, module, args):  # torch forward-pre-hook signature
        if not module.training:
            return None
        n = self.calls.get(id(module), 0)
        self.calls[id(module)] = n + 1
        return (args[0] * (1 + 2**-10), *args[1:]) if n % 2 else None
