"""A training stage's perf record, read the same way by the perf gates and by `registry bless --perf`.

Torch-free and pure. The raw fields are those xtrain.core.train writes in metrics.json `perf` (and a perf
baseline keeps per stage): per-window (steps, seconds) and per-rank peak bytes. A rate is
tokens_per_step * steps / seconds of a steady window (the warm-up windows dropped); a run's
throughput is the median window and its spread is (max - min) / median. The change between two
records is judged by `shift_ci`: a distribution-free confidence interval from their windows.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

STAGES = {"single": "train_single", "thread": "train@thread", "proc": "train@proc"}  # launcher -> DVC stage


@dataclass(frozen=True)
class StagePerf:
    """One training stage's perf record (from a metrics file or a baseline entry)."""

    launcher: str
    env_id: str
    world: int
    config_hash: str
    rates: list[float]  # tokens/s of each steady window
    peaks: list[float]  # peak bytes per rank
    memory_kind: str
    memory_scope: str


def steady_rates(perf: dict[str, Any], tokens_per_step: int) -> list[float]:
    """tokens/s of each window after the warm-up; inf or nan where a window cannot be timed."""
    out = []
    for w in perf["windows"][perf["warmup_windows"] :]:
        secs = w["seconds"]
        out.append(tokens_per_step * w["steps"] / secs if secs > 0 else math.inf)
    return out


def median_spread(rates: list[float]) -> tuple[float, float]:
    """Median rate and (max - min) / median."""
    med = statistics.median(rates)
    return med, (max(rates) - min(rates)) / med if med > 0 else math.inf


def faster_half(rates: list[float]) -> list[float]:
    """The faster half of a measurement's windows (ceil(n / 2), at least two), fastest first.

    Interference on a shared machine only ever slows a window (another process takes the core, an
    OpenMP team waits at a barrier); it never makes the step faster than the machine runs it. So the
    slow half carries the interference and the fast half the step: judging the fast half is the
    min-of-times idea (timeit) made robust to one lucky window by keeping half of them. A real
    slowdown of the step slows every window, the fast half included.
    """
    ordered = sorted(rates, reverse=True)
    return ordered[: min(len(ordered), max(2, (len(ordered) + 1) // 2))]


def judged_spread(rates: list[float]) -> tuple[float, float]:
    """Median rate and spread of the faster half (faster_half): the scaling gate's figures."""
    return median_spread(faster_half(rates))


def shift_ci(run: list[float], base: list[float], z: float = 1.96) -> tuple[float, float, float]:
    """Relative change run/base - 1: Hodges-Lehmann estimate and its ~95% confidence interval.

    The estimate is the median of all pairwise log-ratios of a run window and a baseline window; the
    interval is the k-th smallest and largest of them, k from the Mann-Whitney U distribution
    (normal approximation; for 7 and 7 windows it gives k = 9, as the exact table does). It uses
    the number of windows, which a (max - min) range does not: one slow window widens the range, not
    the interval. It holds within two runs; drift between runs is the gate's tolerance, not this.
    """
    diffs = sorted(math.log(r) - math.log(b) for r in run for b in base)
    n, m, total = len(run), len(base), len(diffs)
    k = max(0, math.floor(total / 2 - z * math.sqrt(n * m * (n + m + 1) / 12)))
    mid = (diffs[(total - 1) // 2] + diffs[total // 2]) / 2
    return math.exp(mid) - 1, math.exp(diffs[k]) - 1, math.exp(diffs[total - 1 - k]) - 1


def stage_perf(record: dict[str, Any]) -> StagePerf:
    """From a metrics.json, or a baseline's stage entry (which keeps the same raw fields)."""
    perf = record["perf"]
    mem = perf["peak_memory"]
    return StagePerf(
        launcher=record["launcher"],
        env_id=record["env"]["env_id"] if "env" in record else record["env_id"],
        world=record["world"],
        config_hash=record["config_hash"],
        rates=steady_rates(perf, record["tokens_per_step"]),
        peaks=[float(r["bytes"]) for r in sorted(mem["per_rank"], key=lambda r: r["rank"])],
        memory_kind=mem["kind"],
        memory_scope=mem["scope"],
    )


def band_check(a: list[float], b: list[float], band: float) -> tuple[str, float, float, float]:
    """Whether two measurements of the same step agree within `band`, judged on their faster halves.

    Within the band means a/b in [1 - band, 1 / (1 - band)] (|a - b| / max(a, b) <= band). Returns
    ("beyond" | "straddles" | "within", change, low, high): "beyond" when the ~95% interval of a/b - 1
    (shift_ci) lies wholly outside the band, "straddles" when it crosses an edge.
    """
    change, low, high = shift_ci(faster_half(a), faster_half(b))
    low_ok, high_ok = -band, 1 / (1 - band) - 1 if band < 1 else math.inf
    if high < low_ok or low > high_ok:
        return "beyond", change, low, high
    if low < low_ok or high > high_ok:
        return "straddles", change, low, high
    return "within", change, low, high
