"""The catalogue: every hard gate in report order, collected from the gate modules.

Each gate is one unit in its own module (gates/judges/gate.py): what it checks, why, how it judges, the
thresholds it takes and its picture. This module only lists them and selects among them.
"""

from __future__ import annotations

from collections.abc import Callable

from gates.judges import (
    closed_loop,
    consistency,
    ddp,
    export_gguf,
    export_md5,
    fresh_train,
    perf,
    pilot,
    probes,
    provenance,
    replicas,
    scaling,
    seals,
    training,
)
from gates.judges.gate import Gate

__all__ = [
    "GATES",
    "GATE_STAGES",
    "SEALS",
    "Gate",
    "find",
    "get",
    "not_in_pipeline",
    "select",
    "stages_for",
    "stages_of",
    "stages_read",
]

SEALS = seals.GATE

TRAINS = ["train_single", "train@thread", "train@proc"]
GATE_STAGES = {  # gate id (or prefix) -> the DVC stages whose artifacts it reads
    "loss_match.thread": ["train_single", "train@thread"],
    "loss_match.proc": ["train_single", "train@proc"],
    "launcher_parity": ["train@thread", "train@proc"],
    # the statistical tier: K=3 replicas of single (train_replica@k, runs/single-r<k>) and the DDP run
    "loss_match_stat.proc": ["train_replica@0", "train_replica@1", "train_replica@2", "train@proc"],
    "cross_rank.thread": ["train@thread"],
    "cross_rank.proc": ["train@proc"],
    "export_md5": ["export"],
    "fresh_train": ["train_single", "export"],
    "closed_loop": ["closed_loop"],
    "finite": TRAINS,
    "scaling": ["scaling"],
    "perf": TRAINS,
    "pilot": ["pilot"],
    "model_probes": ["probes"],
    "consistency": TRAINS,
    "provenance": ["env"],  # the machine record it judges the runs against
    "seals": [],  # every stage
}


def stages_for(gate: str | None) -> list[str]:
    """DVC targets for a gate; [] means the whole pipeline (every gate)."""
    if gate is None:
        return []
    for key, stages in GATE_STAGES.items():
        if gate == key or gate.startswith(key + ".") or key.startswith(gate + "."):
            return stages
    raise KeyError(f"no stage map for gate {gate} (known: {', '.join(GATE_STAGES)})")


GATES: list[Gate] = [
    SEALS,
    consistency.GATE,
    provenance.GATE,
    ddp.loss_match_gate("thread"),
    ddp.loss_match_gate("proc"),
    replicas.stat_gate("proc"),
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
    if gates == GATES:
        return None
    stages: set[str] = set()
    for g in gates:
        if g is SEALS:
            continue
        try:
            found = stages_for(g.id)
        except KeyError:
            return None
        if not found:
            return None
        stages.update(found)
    return sorted(stages) or None  # `--only seals` alone seals every stage (it sealed none: a pass)


# Stages a gate reads that GATE_STAGES (the stages bisect reruns) does not name: every gate
# that reads a stage must say which, or a project without that stage gets a row naming a command it
# cannot run (tests/process/test_report_rows.py holds it).
READS = {"export_gguf": ["export"]}


def stages_read(gate_id: str) -> list[str]:
    """The DVC stages a gate reads ([]: none, or every stage: seals)."""
    if gate_id in READS:
        return READS[gate_id]
    try:
        return stages_for(gate_id)
    except KeyError:
        return []


# Stages a gate cannot judge without, every one of them (it compares their runs): a project of its own
# with train_single and train@proc has no thread run for loss_match.thread or launcher_parity.
NEEDS = {
    "loss_match.thread": ["train@thread"],
    "loss_match.proc": ["train@proc"],
    "loss_match_stat.proc": ["train_replica@0", "train@proc"],  # no replicas: nothing to judge
    "launcher_parity": ["train@thread", "train@proc"],
    "fresh_train": ["train_single"],
}


def not_in_pipeline(gate: Gate, has_stage: Callable[[str], bool]) -> list[str]:
    """The stages this project's pipeline lacks for `gate` (a project of its own without our thread
    launcher, export or pilot stages): one it needs (NEEDS), or all it reads; else []. Such a gate has
    nothing to judge and is skipped before it reads params.yaml sections the project does not have."""
    if missing := [s for s in NEEDS.get(gate.id, []) if not has_stage(s)]:
        return missing
    stages = stages_read(gate.id)
    return stages if stages and not any(has_stage(s) for s in stages) else []


def find(gate_id: str) -> Gate | None:
    """The gate of this id, or None (a report may name a gate this code does not know)."""
    return next((g for g in GATES if g.id == gate_id), None)


def get(gate_id: str) -> Gate:
    g = find(gate_id)
    if g is not None:
        return g
    raise KeyError(f"unknown gate {gate_id} (known: {', '.join(g.id for g in GATES)})")
