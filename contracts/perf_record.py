"""A training stage's perf record, read the same way by the perf gates and by `registry bless --perf`.

Torch-free and pure. The raw fields are those xtrain.core.train writes in metrics.json `perf` (and a perf
baseline keeps per stage): per-window (steps, seconds) and per-rank peak bytes. A rate is
tokens_per_step * steps / seconds of a steady window (the warm-up windows dropped); a run's
throughput is the median window and its spread is (max - min) / median. The change between two
records is judged by `shift_ci`: a distribution-free confidence interval from their windows.
"""

from __future__ import annotations

import itertools
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
    return band_where(low, high, band), change, low, high


def band_where(low: float, high: float, band: float) -> str:
    """Where the interval [low, high] of a/b - 1 lies against the band (band_check)."""
    low_ok, high_ok = -band, 1 / (1 - band) - 1 if band < 1 else math.inf
    if high < low_ok or low > high_ok:
        return "beyond"
    if low < low_ok or high > high_ok:
        return "straddles"
    return "within"


# ---- windows taken in turn, and what else ran on the machine meanwhile (docs/scaling.md) -----------


def signed_rank_counts(n: int) -> list[int]:
    """counts[t]: how many of the 2^n sign patterns of n pairs give the Wilcoxon signed-rank statistic
    T = t (the subsets of the ranks 1..n that sum to t: the coefficients of the product of 1 + x^rank)."""
    counts = [1]
    for rank in range(1, n + 1):
        counts = [a + b for a, b in itertools.zip_longest(counts, [0] * rank + counts, fillvalue=0)]
    return counts


def signed_rank_k(n: int) -> int:
    """How many Walsh averages the ~95% interval of `n` pairs leaves out at each end: the largest k with
    P(T <= k) <= 2.5% (signed_rank_counts; exact up to 100 pairs, the normal approximation above); 0
    where none qualifies (5 or fewer pairs: the whole range, 93.75 % for 5). 10 pairs: 8 and 12
    pairs: 13, as the tables give."""
    if n > 100:
        return math.floor(n * (n + 1) / 4 - 1.96 * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))
    total = 2**n
    for t, below in enumerate(itertools.accumulate(signed_rank_counts(n))):
        scaled = 40 * below  # 40 x P(T <= t) x 2^n: above 2^n is above 2.5 %
        if scaled > total:  # pragma: no mutate -- equivalent: a multiple of 5 never equals a power of 2
            return max(0, t - 1)
    return 0  # pragma: no mutate -- equivalent: unreachable, the counts sum to 2^n


def paired_shift(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Relative change a/b - 1 of windows taken in pairs at the same moments: (estimate, low, high).

    The log-ratio of each pair cancels what the moment did to both; the estimate is the
    Hodges-Lehmann median of the Walsh averages of those log-ratios, the ~95% interval their k-th
    smallest and largest (signed_rank_k: the Wilcoxon signed-rank interval).
    """
    d = [math.log(x) - math.log(y) for x, y in zip(a, b, strict=True)]
    n = len(d)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    total, k = len(walsh), signed_rank_k(n)
    mid = (walsh[(total - 1) // 2] + walsh[total // 2]) / 2
    return math.exp(mid) - 1, math.exp(walsh[k]) - 1, math.exp(walsh[total - 1 - k]) - 1


def others_share(reading: dict[str, float], cpus: int) -> float:
    """The share of the measurement's CPUs that other processes held during one window.

    `reading` is the window's raw record: `busy_s` and `steal_s`, the time the machine's CPUs
    (those the measurement may run on) were busy and stolen by the hypervisor, from /proc/stat;
    `cpu_s`, the time the measurement's own processes ran, from their threads' schedstat; `wall_s`.
    What was busy or stolen and not ours was someone else's: (busy + steal - ours) / (cpus x wall).
    """
    held = reading["busy_s"] + reading["steal_s"] - reading["cpu_s"]
    return max(0.0, held) / (cpus * reading["wall_s"]) if reading["wall_s"] > 0 else math.inf


def waited_share(reading: dict[str, float]) -> float:
    """The share of its runnable time the measurement's threads spent waiting for a CPU (schedstat's
    run delay over run delay plus run time): 0 on an idle machine."""
    runnable = reading["wait_s"] + reading["cpu_s"]
    return reading["wait_s"] / runnable if runnable > 0 else 0.0


def quiet_pairs(
    a: list[float], a_shares: list[float], b: list[float], b_shares: list[float], limit: float, gap: float
) -> tuple[list[float], list[float]]:
    """The windows of two measurements taken in the same turns (cycle i of each) that saw a quiet and
    like machine: others held at most `limit` of the CPUs in each, and their shares differ by at most
    `gap` (a neighbour's burst during one window of a pair only is contention too)."""
    kept = [
        (x, y)
        for x, xs, y, ys in zip(a, a_shares, b, b_shares, strict=True)
        if xs <= limit and ys <= limit and abs(xs - ys) <= gap
    ]
    return [x for x, _ in kept], [y for _, y in kept]


def floor_where(low: float, high: float, floor: float) -> str:
    """Where the interval [low, high] of a speedup lies against its floor (one-sided)."""
    if high < floor:
        return "below"
    if low < floor:
        return "straddles"
    return "above"


@dataclass(frozen=True)
class Comparison:
    """One thing the scaling gate compares on windows taken in turn: `a` against `b`, each a
    (launcher, world). "band": thread vs proc at one world, a/b within the band; "floor": a launcher's
    world w against its world 1, speedup a/b at least the floor."""

    kind: str
    a: tuple[str, int]
    b: tuple[str, int]
    bound: float


def comparisons(measured: set[tuple[str, int]], floors: dict[int, float], band: float) -> list[Comparison]:
    """What the scaling gate compares among the measurements present: thread vs proc at every world
    both measured, and each launcher's world w vs its world 1 where params give w a floor."""
    out = []
    for launcher, w in sorted(measured):  # ("proc", w) sorts before ("thread", w): bands in world order
        if launcher == "thread" and ("proc", w) in measured:
            out.append(Comparison("band", ("thread", w), ("proc", w), band))
    for launcher, w in sorted(measured):
        if w in floors and w != 1 and (launcher, 1) in measured:
            out.append(Comparison("floor", (launcher, w), (launcher, 1), floors[w]))
    return out


def judge_pairs(a: list[float], b: list[float], c: Comparison, need: int) -> tuple[str, float, float, float]:
    """(verdict, change, low, high) of a/b - 1 on the quiet pairs `a`, `b` (quiet_pairs): "contended"
    with fewer than `need` pairs; else the band's "within" | "straddles" | "beyond" or the floor's
    "above" | "straddles" | "below" (the speedup is 1 + change)."""
    if len(a) < need or not a:
        return "contended", math.nan, math.nan, math.nan
    change, low, high = paired_shift(a, b)
    if c.kind == "band":
        return band_where(low, high, c.bound), change, low, high
    return floor_where(1 + low, 1 + high, c.bound), change, low, high


PASSING = ("within", "above")  # judge_pairs' verdicts the gate passes


@dataclass(frozen=True)
class Judged:
    """One comparison's verdict (judge_pairs) and on how many quiet pairs it was made."""

    comparison: Comparison
    verdict: str
    change: float
    low: float
    high: float
    pairs: int


def judge_measurements(
    windows: dict[tuple[str, int], list[float]],
    readings: dict[tuple[str, int], list[dict[str, float]]],
    cpus: int,
    bounds: dict[str, Any],
    need: int,
) -> tuple[list[Judged], dict[tuple[str, int], float]]:
    """Every comparison of the scaling gate (comparisons) judged on the quiet pairs of windows taken in
    turn, and each measurement's spread over its quiet windows (judged_spread; nan: none was quiet).

    `bounds` is params.yaml gates.scaling.<profile>: floors, band, max_contention (the largest share of
    the CPUs other processes may hold in a judged window) and max_contention_gap (the largest
    difference of those shares within a judged pair); absent: no such limit. A comparison needs
    `need` quiet pairs (a round's worth)."""
    limit = float(bounds.get("max_contention", math.inf))
    gap = float(bounds.get("max_contention_gap", math.inf))
    shares = {k: [others_share(r, cpus) for r in readings[k]] for k in windows}
    spreads = {}
    for k, rates in windows.items():
        kept = [r for r, share in zip(rates, shares[k], strict=True) if share <= limit]
        spreads[k] = judged_spread(kept)[1] if kept else math.nan
    floors = {int(w): float(f) for w, f in bounds["floors"].items()}
    judged = []
    for c in comparisons(set(windows), floors, float(bounds["band"])):
        a, b = quiet_pairs(windows[c.a], shares[c.a], windows[c.b], shares[c.b], limit, gap)
        judged.append(Judged(c, *judge_pairs(a, b, c, need), len(a)))
    return judged, spreads
