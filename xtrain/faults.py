"""Fault injection for the failure tests and the DDP gate's negative controls.

XTRAIN_FAULT=<kind>@<rank>:<step>, rank `*` meaning every rank. Unset in normal runs; read once
per process.

Launcher failures, at exactly that step: `raise` (the rank raises), `hang` (the rank stops
answering collectives), `nan` (the rank's loss becomes NaN).

Real DDP bugs, from that step on (the loss_match gate must fail each one):
- `grad_sum`: the rank's synchronised gradients are the sum over ranks, not the mean.
- `same_shard`: the rank reads rank 0's rows of the global batch instead of its own.
- `dropout_unsync`: the rank's dropout masks come from a seed that mixes in the rank (what the
  code did before masks were drawn per global sample), so they differ from single-device's.

A slower launcher, in the scaling benchmark only: `slow_thread` or `slow_proc` (e.g. slow_proc@*:0)
makes every timed step of that launcher take twice as long (xtrain.scaling_bench.slowed); the scaling
gate must fail it, not re-measure it away.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from xtrain.determinism import derive_seed

STEP_KINDS = ("raise", "hang", "nan")
DDP_BUG_KINDS = ("grad_sum", "same_shard", "dropout_unsync")
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
        return step >= self.step if kind in DDP_BUG_KINDS else step == self.step


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
    kinds = STEP_KINDS + DDP_BUG_KINDS + PERF_KINDS
    if fault.kind not in kinds:
        raise ValueError(f"XTRAIN_FAULT={text!r}: kind must be one of {', '.join(kinds)}")
    return fault


_FAULT = parse(os.environ.get("XTRAIN_FAULT"))


def _hits(kind: str, rank: int, step: int) -> bool:
    return _FAULT is not None and _FAULT.hits(kind, rank, step)


def slows(launcher: str) -> bool:
    """Whether `launcher`'s timed benchmark steps are slowed twofold (XTRAIN_FAULT=slow_<launcher>@...)."""
    return _FAULT is not None and _FAULT.kind == f"slow_{launcher}"


def at_step(rank: int, step: int) -> bool:
    """Apply a `raise`/`hang` fault for (rank, step); True when the loss should be poisoned (`nan`)."""
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
