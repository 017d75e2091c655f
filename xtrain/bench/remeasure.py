"""Re-measure a doubtful measurement: rounds of timed windows until it can be judged or a cap is reached.

Torch-free and pure (the clock and the doubt are injected), so the policy is tested on given
window values (tests/process/test_measure_remeasure.py). xtrain/bench/conductor.py takes the rounds: one
round is `scaling.windows` windows of every measurement, taken in turn.

pyperf repeats a benchmark over many values and processes and warns when the result looks unstable;
here a measurement that cannot be judged yet (other processes held the CPUs, the windows spread too
much, an interval straddles a bound, or a comparison fails: a slowdown is re-measured before it is
believed) takes more windows, up to a cap, and the record says how many rounds it took. The gate
judges every window it took, whatever the rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Remeasure:
    """When the measurements take another round of windows (pyperf repeats a noisy benchmark; so do we).

    They stop once nothing is doubtful (the gate would pass them), at `max_rounds`, or when the next
    round would end past `time_cap_s` from the start: then the gate sees what was taken and says
    why it cannot judge it (inconclusive), or fails what it can judge.
    """

    max_rounds: int = 1
    time_cap_s: float = 0.0


def wants_another_round(rounds: int, doubtful: bool, policy: Remeasure, elapsed_s: float) -> bool:
    """Whether measurements with `rounds` rounds, `elapsed_s` seconds after they began, take one more."""
    if rounds >= policy.max_rounds or elapsed_s * (rounds + 1) / rounds > policy.time_cap_s:
        return False  # the next round (as long as the mean round so far) would end past the cap
    return doubtful


def remeasure(
    take_round: Callable[[], None],
    doubtful: Callable[[], bool],
    policy: Remeasure,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Rounds until nothing is doubtful or a cap is reached (Remeasure); returns how many were taken."""
    start = clock()
    take_round()
    rounds = 1
    while wants_another_round(rounds, doubtful(), policy, clock() - start):
        take_round()
        rounds += 1
    return rounds
