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


def first_over(
    rel: list[float], ev_rel: dict[int, float], max_rel: float, series: dict[str, list[float]]
) -> tuple[bool, str]:
    """Where two trajectories first part: (a train step crossed?, the sentence naming it).

    `rel` per train step, `ev_rel` per eval step; `series` the two runs' train losses by name."""
    over = [i for i, r in enumerate(rel) if not r < max_rel]
    if over:
        s = over[0]
        values = ", ".join(f"{name} {losses[s]:.7g}" for name, losses in series.items())
        return True, f"first step over {max_rel:g}: step {s} ({values}, rel {fmt(rel[s])})"
    s = min(k for k, r in ev_rel.items() if not r < max_rel)
    return False, f"first eval over {max_rel:g}: step {s} (rel {fmt(ev_rel[s])})"
