"""The catalogue: every hard gate in report order, collected from the gate modules.

Each gate is one unit in its own module (gates/gate.py): what it checks, why, how it judges, the
thresholds it takes and its picture. This module only lists them and selects among them.
"""

from __future__ import annotations

from collections.abc import Callable

from gates import (
    closed_loop,
    consistency,
    ddp,
    export_gguf,
    export_md5,
    fresh_train,
    perf,
    pilot,
    probes,
    scaling,
    seals,
    training,
)
from gates.gate import Gate

__all__ = ["GATES", "SEALS", "Gate", "find", "get", "not_in_pipeline", "select", "stages_of"]

SEALS = seals.GATE

GATES: list[Gate] = [
    SEALS,
    consistency.GATE,
    ddp.loss_match_gate("thread"),
    ddp.loss_match_gate("proc"),
    ddp.LAUNCHER_PARITY,
    training.cross_rank_gate("thread"),
    training.cross_rank_gate("proc"),
    export_md5.GATE,
    fresh_train.GATE,
    closed_loop.GATE,
    export_gguf.GATE,
    probes.GATE,
    training.FINITE,
    scaling.GATE,
    perf.THROUGHPUT,
    perf.MEMORY,
    *pilot.GATES,
]


def select(only: list[str] | None) -> list[Gate]:
    """Gates whose id equals or starts with one of `only` (e.g. `loss_match` selects both launchers);
    the seals gate always (over the selected gates' stages): no selection turns dvc.lock's check off."""
    if not only:
        return GATES
    chosen = [g for g in GATES if any(g.id == o or g.id.startswith(o + ".") for o in only)]
    unknown = [o for o in only if not any(g.id == o or g.id.startswith(o + ".") for g in GATES)]
    if unknown:
        raise KeyError(f"unknown gate {', '.join(unknown)} (known: {', '.join(g.id for g in GATES)})")
    return chosen if SEALS in chosen else [SEALS, *chosen]


def stages_of(gates: list[Gate]) -> list[str] | None:
    """The DVC stages the gates read (None: every stage, for a full check or a gate without a map)."""
    from gates.bisect import BisectError, stages_for

    if gates == GATES:
        return None
    stages: set[str] = set()
    for g in gates:
        if g is SEALS:
            continue
        try:
            found = stages_for(g.id)
        except BisectError:
            return None
        if not found:
            return None
        stages.update(found)
    return sorted(stages) or None  # `--only seals` alone seals every stage (it sealed none: a pass)


def not_in_pipeline(gate: Gate, has_stage: Callable[[str], bool]) -> list[str]:
    """The stages `gate` reads when this project's pipeline has none of them (a project of its own
    without our thread launcher, export or pilot stages), else []: such a gate has nothing to judge
    and is skipped before it reads params.yaml sections the project does not have."""
    from gates.bisect import BisectError, stages_for

    try:
        stages = stages_for(gate.id)
    except BisectError:
        return []
    return stages if stages and not any(has_stage(s) for s in stages) else []


def find(gate_id: str) -> Gate | None:
    """The gate of this id, or None (a report may name a gate this code does not know)."""
    return next((g for g in GATES if g.id == gate_id), None)


def get(gate_id: str) -> Gate:
    g = find(gate_id)
    if g is not None:
        return g
    raise KeyError(f"unknown gate {gate_id} (known: {', '.join(g.id for g in GATES)})")
