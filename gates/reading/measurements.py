"""The measured records the scaling and model_probes gates judge: bench/scaling.json with what
params.yaml says was measured, and runs/probes.json. Files in, plain values out; the judges
(gates/judges/scaling.py, gates/judges/probes.py) open nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gates.reading.artifacts import Artifacts
from gates.reading.deferred import Deferred, deferred

SCALING, SCALING_SCHEMA, SCALING_STAGE = "bench/scaling.json", "scaling.schema.json", "scaling"
PROBES, PROBES_SCHEMA, PROBES_STAGE = "runs/probes.json", "probes.schema.json", "probes"


@dataclass(frozen=True)
class MeasuredWith:
    """What params.yaml says the scaling stage measured: the profile, `scaling:` and the train section
    of its workload (scaling.sets of the profile applied)."""

    profile: str
    scaling: dict[str, Any]
    train: dict[str, Any]


@dataclass(frozen=True)
class ScalingRecords:
    table: dict[str, Any]  # bench/scaling.json, validated
    params: Deferred[MeasuredWith]  # resolved when the profile has floors (an error then, not before)


@dataclass(frozen=True)
class ProbeRecords:
    data: dict[str, Any]  # runs/probes.json, validated


def measured_with(params: Any) -> MeasuredWith:
    """The plain values of the resolved params the scaling gate holds the table to."""
    return MeasuredWith(params["profile"], params["scaling"], params.scaling_workload()["train"])


def read_scaling(a: Artifacts, t: Any = None) -> ScalingRecords:
    """bench/scaling.json (its picture draws from the same: a non-finite figure fails the gate)."""
    table = a.json(SCALING, SCALING_SCHEMA, SCALING_STAGE)
    return ScalingRecords(table, deferred(lambda: measured_with(a.params)))


def read_probes(a: Artifacts, t: Any = None, refuse_non_finite: bool = True) -> ProbeRecords:
    return ProbeRecords(a.json(PROBES, PROBES_SCHEMA, PROBES_STAGE, refuse_non_finite=refuse_non_finite))


def read_probes_for_picture(a: Artifacts, t: Any = None) -> ProbeRecords:
    return read_probes(a, refuse_non_finite=False)
