"""What a gate returns, and the small helpers every check uses to build one."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from contracts.numbers import rel_diffs  # re-exported: the gates compare trajectories with it

__all__ = ["STATUSES", "Outcome", "failed", "fmt", "inconclusive", "passed", "rel_diffs"]

# inconclusive: a measurement too noisy to judge. It never passes: it counts as a failure (exit 1)
# whose message says to rerun on a quiet machine.
STATUSES = ("pass", "fail", "inconclusive", "skip", "error")


@dataclass
class Outcome:
    status: str
    measured: float | str | bool | None = None
    threshold: float | str | None = None
    message: str = ""
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # checks of the gate that could not be applied to these records, and why ("train mode": "not
    # recorded ..."): said in the row and in the JSON, never passed over as if they had held
    not_applied: dict[str, str] = field(default_factory=dict)
    # the stages this project's pipeline lacks, for a gate skipped because it has nothing to judge here
    not_in_pipeline: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.status in STATUSES, self.status
        if isinstance(self.measured, float) and not math.isfinite(self.measured):
            self.measured = str(self.measured)  # JSON has no NaN/Inf


def passed(measured: Any, threshold: Any, message: str) -> Outcome:
    return Outcome("pass", measured, threshold, message)


def failed(measured: Any, threshold: Any, message: str) -> Outcome:
    return Outcome("fail", measured, threshold, message)


def inconclusive(measured: Any, threshold: Any, message: str) -> Outcome:
    return Outcome("inconclusive", measured, threshold, message)


def fmt(x: float) -> str:
    return f"{x:.3g}"
