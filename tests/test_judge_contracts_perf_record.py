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
