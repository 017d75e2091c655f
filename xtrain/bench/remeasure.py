"""Re-measure a noisy measurement: rounds of timed windows until they settle or a cap is reached.

Torch-free and pure (the clock and the rank agreement are injected), so the policy is tested on given
window values (tests/test_measure_remeasure.py). xtrain/bench/scaling.py times the rounds.

pyperf repeats a benchmark over many values and processes and warns when the result looks unstable;
here a measurement that is too noisy to judge first takes more windows, up to a cap, and the
artifact records how many rounds it took. The gate judges every window it took, whatever the rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from contracts.perf_record import judged_spread


@dataclass(frozen=True)
class Remeasure:
    """When a measurement takes another round of windows (pyperf repeats a noisy benchmark; so do we).

    A round is `windows` more windows in the same process, after the one warm-up. A measurement is
    settled once the faster half of all its windows spreads at most `max_spread` (the gate's own
    bound, judged as the gate judges it: contracts.perf_record.judged_spread). It stops at
    `max_rounds`, or when the next round would end past `time_cap_s` from the start: then the gate
    sees a measurement that is still noisy and says inconclusive.
    """

    max_spread: float
    max_rounds: int = 1
    time_cap_s: float = 0.0


def wants_another_round(rounds: list[list[float]], policy: Remeasure, elapsed_s: float) -> bool:
    """Whether a measurement with these rounds, `elapsed_s` seconds after it began, takes one more."""
    if len(rounds) >= policy.max_rounds or elapsed_s * (len(rounds) + 1) / len(rounds) > policy.time_cap_s:
        return False  # the next round (as long as the mean round so far) would end past the cap
    _, spread = judged_spread([r for one in rounds for r in one])
    return not spread <= policy.max_spread  # nan is noisy too


def remeasure(
    take_round: Callable[[], list[float]],
    policy: Remeasure,
    clock: Callable[[], float] = time.monotonic,
    agree: Callable[[bool], bool] = lambda go: go,
) -> list[list[float]]:
    """Rounds of windows until settled or capped (Remeasure). `agree` makes every rank of a DDP
    measurement take rank 0's decision, so all of them run the same number of steps."""
    start = clock()
    rounds = [take_round()]
    while agree(wants_another_round(rounds, policy, clock() - start)):
        rounds.append(take_round())
    return rounds
