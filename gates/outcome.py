"""What a gate returns, and the small helpers every check uses to build one."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

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


def rel_diffs(a: list[float], b: list[float]) -> list[float]:
    """|a - b| / |b| per step (b is the reference); inf where they cannot be compared."""
    out = []
    for x, y in zip(a, b, strict=True):
        if not (math.isfinite(x) and math.isfinite(y)):
            out.append(math.inf)
        else:
            out.append(abs(x - y) / abs(y) if y else (0.0 if x == y else math.inf))
    return out


def fmt(x: float) -> str:
    return f"{x:.3g}"
