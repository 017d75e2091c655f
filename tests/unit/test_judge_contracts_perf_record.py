"""contracts/perf_record.py under mutation (docs/judge-mutation.md): the perf gates' arithmetic at its edges."""

from __future__ import annotations

import math

import pytest

from contracts.perf_record import band_check, median_spread, shift_ci


@pytest.mark.parametrize(
    ("rates", "expected"),
    [
        ([0.5, 0.5, 1.0], (0.5, 1.0)),  # a median below 1 is still a median: (1 - 0.5) / 0.5
        ([2.0, 4.0, 3.0], (3.0, 2.0 / 3.0)),
        ([0.0, 0.0, 1.0], (0.0, math.inf)),
    ],
)
def test_median_spread(rates: list[float], expected: tuple[float, float]) -> None:
    assert median_spread(rates) == pytest.approx(expected)


def log_spaced(n: int, step: float) -> list[float]:
    return [math.exp(i * step) for i in range(n)]


@pytest.mark.parametrize(("n", "k"), [(8, 13), (7, 9), (3, 0)])
def test_shift_ci_takes_the_mann_whitney_kth_pair(n: int, k: int) -> None:
    """Distinct pairwise log-ratios (i - j/10), so the k-th smallest and largest name the bound."""
    run, base = log_spaced(n, 1.0), log_spaced(n, 0.1)
    diffs = sorted(i - j / 10 for i in range(n) for j in range(n))
    change, low, high = shift_ci(run, base)
    assert low == pytest.approx(math.exp(diffs[k]) - 1, rel=1e-12)
    assert high == pytest.approx(math.exp(diffs[-1 - k]) - 1, rel=1e-12)
    mid = (diffs[(n * n - 1) // 2] + diffs[n * n // 2]) / 2
    assert change == pytest.approx(math.exp(mid) - 1, rel=1e-12)


def test_shift_ci_estimate_of_an_odd_count_is_the_middle_pair() -> None:
    change, _, _ = shift_ci(log_spaced(3, 1.0), log_spaced(3, 0.1))
    assert change == pytest.approx(math.exp(0.9) - 1, rel=1e-12)  # the 5th of 0, .8, .9, 1, 1.8, 1.9, 2...


@pytest.mark.parametrize(
    ("a", "band", "verdict"),
    [
        (0.5, 0.5, "within"),  # a/b - 1 = -0.5: on the lower edge
        (0.5, 0.49, "beyond"),
        (2.0, 0.5, "within"),  # a/b - 1 = 1 = 1 / (1 - 0.5) - 1: on the upper edge
        (2.0, 0.49, "beyond"),
        (1.0, 0.0, "within"),
        (1.5, 1.0, "within"),  # a band of 1 has no upper edge
    ],
)
def test_band_check_at_the_edges(a: float, band: float, verdict: str) -> None:
    got = band_check([a] * 4, [1.0] * 4, band)
    assert got[0] == verdict and got[1] == pytest.approx(a - 1)


@pytest.mark.parametrize(
    ("a", "band", "interval"),
    [
        ([1.1, 1.3, 1.2, 1.25], 0.2, (0.25, 0.3)),  # the faster half 1.3, 1.25: across 1 / 0.8 - 1
        ([0.75, 0.9, 0.8, 0.85], 0.12, (-0.15, -0.1)),  # the faster half 0.9, 0.85: across -0.12
    ],
)
def test_band_check_an_interval_across_an_edge_straddles(a: list[float], band: float, interval) -> None:
    verdict, _, low, high = band_check(a, [1.0] * 4, band)
    assert verdict == "straddles" and (low, high) == pytest.approx(interval)
    assert band_check(a, [1.0] * 4, 0.5)[0] == "within"


# ---- windows taken in turn: paired intervals, contention readings, the comparisons ---------------------

from contracts.perf_record import (  # noqa: E402
    Comparison,
    Judged,
    band_where,
    comparisons,
    floor_where,
    judge_measurements,
    judge_pairs,
    others_share,
    paired_shift,
    quiet_pairs,
    waited_share,
)


@pytest.mark.parametrize(("n", "k"), [(10, 8), (6, 0), (7, 2), (5, 0), (12, 13), (1, 0)])
def test_paired_shift_takes_the_wilcoxon_kth_walsh_average(n: int, k: int) -> None:
    """Distinct log-ratios 2^i (every Walsh average distinct), so the k-th smallest and largest name the
    bound; for 10 pairs the exact signed-rank table gives k = 8, for 12 k = 13."""
    d = [2.0**i / 2**n for i in range(n)]
    a, b = [math.exp(x) * 3.0 for x in d], [3.0] * n
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    change, low, high = paired_shift(a, b)
    assert low == pytest.approx(math.exp(walsh[k]) - 1, rel=1e-12)
    assert high == pytest.approx(math.exp(walsh[-1 - k]) - 1, rel=1e-12)
    mid = (walsh[(len(walsh) - 1) // 2] + walsh[len(walsh) // 2]) / 2
    assert change == pytest.approx(math.exp(mid) - 1, rel=1e-12)


def test_paired_shift_cancels_what_a_moment_did_to_both_windows() -> None:
    base = [100.0, 20.0, 90.0, 5.0, 100.0]  # a busy machine: windows 20x apart
    change, low, high = paired_shift([x * 0.5 for x in base], base)
    assert (change, low, high) == pytest.approx((-0.5, -0.5, -0.5))
    # the estimate of an even count is the mean of the two middle Walsh averages
    assert paired_shift([math.e, 1.0], [1.0, 1.0])[0] == pytest.approx(math.exp(0.5) - 1)
    with pytest.raises(ValueError):
        paired_shift([1.0, 2.0], [1.0])


def reading(share: float, cpus: int = 2, wall: float = 2.0, cpu: float = 1.0, steal: float = 0.0) -> dict:
    """A window's readings in which other processes held `share` of the CPUs."""
    return {"wall_s": wall, "cpu_s": cpu, "wait_s": 0.5, "busy_s": cpu + share * cpus * wall - steal,
            "steal_s": steal, "runnable": 3, "start_s": 0.0}  # fmt: skip


def test_others_share_is_what_was_busy_or_stolen_and_not_ours() -> None:
    r = {"wall_s": 2.0, "cpu_s": 1.5, "busy_s": 3.0, "steal_s": 0.5, "wait_s": 0.0}
    assert others_share(r, 2) == pytest.approx((3.0 + 0.5 - 1.5) / 4)
    assert others_share(r, 4) == pytest.approx(2.0 / 8)
    assert others_share({**r, "busy_s": 1.0, "steal_s": 0.0}, 2) == 0.0  # tick rounding below ours: none
    assert others_share({**r, "wall_s": 0.0}, 2) == math.inf
    assert others_share(reading(0.3, steal=0.4), 2) == pytest.approx(0.3)


def test_waited_share_is_run_delay_over_runnable_time() -> None:
    assert waited_share({"wait_s": 1.0, "cpu_s": 3.0}) == 0.25
    assert waited_share({"wait_s": 0.1, "cpu_s": 0.3}) == pytest.approx(0.25)  # under a second runnable
    assert waited_share({"wait_s": 0.0, "cpu_s": 0.0}) == 0.0


def test_quiet_pairs_keep_a_cycle_only_where_both_windows_were_quiet_and_alike() -> None:
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    sa = [0.5, 0.6, 0.1, 0.3, 0.0, 0.45]
    sb = [0.5, 0.1, 0.6, 0.3, 0.25, 0.2]
    assert quiet_pairs(a, sa, b, sb, 0.5, math.inf) == ([1.0, 4.0, 5.0, 6.0], [10.0, 40.0, 50.0, 60.0])
    assert quiet_pairs(a, sa, b, sb, 0.5, 0.25) == (
        [1.0, 4.0, 5.0, 6.0],
        [10.0, 40.0, 50.0, 60.0],
    )  # inclusive
    assert quiet_pairs(a, sa, b, sb, 0.5, 0.2499) == ([1.0, 4.0], [10.0, 40.0])
    assert quiet_pairs(a, sa, b, sb, 0.6, 0.0) == ([1.0, 4.0], [10.0, 40.0])
    with pytest.raises(ValueError):
        quiet_pairs(a, sa[:5], b, sb, 0.5, 0.1)


@pytest.mark.parametrize(
    ("low", "high", "band", "where"),
    [(-0.5, 0.0, 0.5, "within"), (-0.51, 0.0, 0.5, "straddles"), (0.9, 1.0, 0.5, "within"),
     (0.9, 1.01, 0.5, "straddles"), (1.01, 2.0, 0.5, "beyond"), (-0.9, -0.51, 0.5, "beyond"),
     (5.0, 9.0, 1.0, "within")],
)  # fmt: skip
def test_band_where(low: float, high: float, band: float, where: str) -> None:
    assert band_where(low, high, band) == where


@pytest.mark.parametrize(
    ("low", "high", "where"),
    [(0.8, 0.9, "above"), (0.79, 0.9, "straddles"), (0.7, 0.79, "below"), (0.7, 0.8, "straddles")],
)
def test_floor_where_is_one_sided_and_inclusive(low: float, high: float, where: str) -> None:
    assert floor_where(low, high, 0.8) == where


def test_comparisons_are_thread_vs_proc_per_world_and_each_floor_against_world_1() -> None:
    measured = {("thread", 1), ("proc", 1), ("thread", 2), ("proc", 2), ("proc", 4), ("thread", 8)}
    assert comparisons(measured, {2: 0.8, 4: 3.0, 8: 5.0, 1: 1.0}, 0.4) == [
        Comparison("band", ("thread", 1), ("proc", 1), 0.4),
        Comparison("band", ("thread", 2), ("proc", 2), 0.4),
        Comparison("floor", ("proc", 2), ("proc", 1), 0.8),
        Comparison("floor", ("proc", 4), ("proc", 1), 3.0),
        Comparison("floor", ("thread", 2), ("thread", 1), 0.8),
        Comparison("floor", ("thread", 8), ("thread", 1), 5.0),
    ]
    assert comparisons({("thread", 2), ("proc", 2)}, {2: 0.8}, 0.4) == [
        Comparison("band", ("thread", 2), ("proc", 2), 0.4)
    ]  # no world 1: no floor to judge


def test_judge_pairs_needs_enough_quiet_pairs_and_reads_the_kind() -> None:
    band = Comparison("band", ("thread", 1), ("proc", 1), 0.4)
    floor = Comparison("floor", ("thread", 2), ("thread", 1), 0.8)
    a, b = [100.0, 110.0, 90.0], [100.0, 110.0, 90.0]
    verdict, *rest = judge_pairs(a, b, band, 4)
    assert verdict == "contended" and all(math.isnan(x) for x in rest)
    assert judge_pairs([], [], band, 0)[0] == "contended"
    assert judge_pairs(a, b, band, 3) == ("within", 0.0, 0.0, 0.0)
    assert judge_pairs([x * 0.5 for x in a], b, band, 3)[0] == "beyond"
    assert judge_pairs([x * 0.7 for x in a], b, floor, 3) == pytest.approx(("below", -0.3, -0.3, -0.3))
    assert judge_pairs([x * 0.81 for x in a], b, floor, 3)[0] == "above"


def test_judge_measurements_judges_only_quiet_pairs_and_spreads_of_quiet_windows() -> None:
    quiet, busy = reading(0.1), reading(0.9)
    windows = {("thread", 1): [100.0, 10.0, 80.0, 50.0], ("proc", 1): [100.0, 100.0, 100.0, 100.0],
               ("thread", 2): [200.0, 200.0, 20.0, 200.0]}  # fmt: skip
    readings = {("thread", 1): [quiet, busy, quiet, quiet], ("proc", 1): [quiet] * 4,
                ("thread", 2): [quiet, quiet, busy, quiet]}  # fmt: skip
    bounds = {"floors": {"2": 1.5}, "band": 0.4, "max_contention": 0.5, "max_spread": 0.1}
    judged, spreads = judge_measurements(windows, readings, 2, bounds, 3)
    band, floor = judged
    assert band == Judged(Comparison("band", ("thread", 1), ("proc", 1), 0.4), "straddles",
                          *paired_shift([100.0, 80.0, 50.0], [100.0] * 3), 3)  # fmt: skip
    assert (floor.comparison.kind, floor.verdict, floor.pairs) == ("floor", "contended", 2)  # cycles 0 and 3
    assert spreads == {("thread", 1): pytest.approx(20 / 90), ("proc", 1): 0.0, ("thread", 2): 0.0}
    # without a contention limit every window is judged
    unlimited = {k: v for k, v in bounds.items() if k != "max_contention"}
    judged, spreads = judge_measurements(windows, readings, 2, unlimited, 3)
    assert [j.pairs for j in judged] == [4, 4] and spreads[("thread", 2)] == 0.0
    # pairs whose windows saw shares further apart than max_contention_gap are not judged
    judged, _ = judge_measurements(windows, readings, 2, {**unlimited, "max_contention_gap": 0.79}, 3)
    assert [j.pairs for j in judged] == [3, 2]
    judged, _ = judge_measurements(windows, readings, 2, {**unlimited, "max_contention_gap": 0.81}, 3)
    assert [j.pairs for j in judged] == [4, 4]
    busy_everywhere = {k: [busy] * 4 for k in readings}
    assert math.isnan(judge_measurements(windows, busy_everywhere, 2, bounds, 3)[1][("proc", 1)])


@pytest.mark.parametrize(
    ("n", "k"), [(1, 0), (5, 0), (6, 0), (7, 2), (8, 3), (10, 8), (12, 13), (20, 52), (60, 648), (100, 1955)]
)
def test_signed_rank_k_is_the_tables_critical_value(n: int, k: int) -> None:
    from contracts.perf_record import signed_rank_k

    assert signed_rank_k(n) == k


def test_signed_rank_k_above_100_pairs_is_the_normal_approximation() -> None:
    """Where the two differ: exact 1955 at 100 pairs (the approximation says 1954), and at 101 the
    approximation's 1996 (exact: 1997)."""
    from contracts.perf_record import signed_rank_k

    assert signed_rank_k(101) == math.floor(101 * 102 / 4 - 1.96 * math.sqrt(101 * 102 * 203 / 24)) == 1996
    assert signed_rank_k(400) == 35_565


def test_judge_measurements_refuses_readings_that_do_not_match_the_windows() -> None:
    windows = {("thread", 1): [1.0, 2.0, 3.0]}
    with pytest.raises(ValueError):
        judge_measurements(windows, {("thread", 1): [reading(0.0)] * 2}, 2, {"floors": {}, "band": 0.4}, 1)


def test_signed_rank_counts_are_the_whole_distribution() -> None:
    from contracts.perf_record import signed_rank_counts

    assert signed_rank_counts(0) == [1]
    assert signed_rank_counts(1) == [1, 1]
    assert signed_rank_counts(3) == [1, 1, 1, 2, 1, 1, 1]
    assert signed_rank_counts(4) == [1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 1]
    for n in range(2, 13):
        counts = signed_rank_counts(n)
        assert len(counts) == n * (n + 1) // 2 + 1 and sum(counts) == 2**n and counts == counts[::-1]


def test_a_window_at_the_contention_limit_counts_in_its_spread() -> None:
    windows = {("thread", 1): [100.0, 50.0, 90.0]}
    readings = {("thread", 1): [reading(0.0), reading(0.5), reading(0.0)]}
    bounds = {"floors": {}, "band": 0.4, "max_contention": 0.5}
    assert judge_measurements(windows, readings, 2, bounds, 1)[1] == {("thread", 1): pytest.approx(10 / 95)}
    assert judge_measurements(windows, readings, 2, {**bounds, "max_contention": 0.49}, 1)[1] == {
        ("thread", 1): pytest.approx(10 / 95)
    }
    windows = {("thread", 1): [100.0, 50.0, 20.0]}
    assert judge_measurements(windows, readings, 2, bounds, 1)[1] == {("thread", 1): pytest.approx(50 / 75)}
    assert judge_measurements(windows, readings, 2, {**bounds, "max_contention": 0.49}, 1)[1] == {
        ("thread", 1): pytest.approx(80 / 60)
    }
