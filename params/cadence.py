"""When a run evaluates (torch-free): one rule for the trainer that evaluates and the gates that check it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def eval_due(every: int, steps: int, done: int) -> bool:
    """Evaluate at step 0, every `every` steps and after the last one (never when `every` is 0)."""
    return bool(every) and (done % every == 0 or done == steps)


def eval_steps(train: Mapping[str, Any]) -> list[int]:
    """Every step a run of params.yaml `train:` evaluates at, in order."""
    every, steps = train["eval_every"], train["steps"]
    return [s for s in range(steps + 1) if eval_due(every, steps, s)]
