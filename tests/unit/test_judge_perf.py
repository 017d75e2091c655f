"""gates/judges/perf.py and contracts/perf_record.py under mutation (docs/judge-mutation.md).

The perf gates' statistics (steady rates, median and spread, the faster half, the Hodges-Lehmann
shift and its interval, the band check) and verdicts (throughput, memory, combining stages, what
is comparable with a baseline), pure and in-process, with exact numbers and messages.
"""

from __future__ import annotations

import math

import pytest

from contracts.perf_record import (
    StagePerf,
    band_check,
    faster_half,
    judged_spread,
    median_spread,
    shift_ci,
    stage_perf,
    steady_rates,
)
from gates.judges.perf import MIN_WINDOWS, combine, comparable, memory_check, threshold_text, throughput_check

PROFILE = {"slowdown": 0.1, "memory_growth": 0.2}


def perf(
    rates=(100.0, 100.0, 100.0, 100.0), peaks=(2.0**30,), kind="rss", scope="rank", **changes
) -> StagePerf:
    p = StagePerf("thread", "env", len(peaks), "cfg", list(rates), list(peaks), kind, scope)
    return StagePerf(**{**p.__dict__, **changes})


# -- contracts/perf_record.py ------------------------------------------------------------------------


def test_steady_rates_drop_the_warm_up_and_time_each_window() -> None:
    p = {"warmup_windows": 1, "windows": [{"steps": 9, "seconds": 9.0}, {"steps": 2, "seconds": 0.5},
                                          {"steps": 3, "seconds": 1.5}, {"steps": 1, "seconds": 0.0}]}  # fmt: skip
    assert steady_rates(p, 8) == [32.0, 16.0, math.inf]
    assert steady_rates({**p, "warmup_windows": 0}, 1)[0] == 1.0


def test_median_and_spread() -> None:
    assert median_spread([10.0, 30.0, 20.0]) == (20.0, 1.0)
    assert median_spread([10.0, 20.0]) == (15.0, pytest.approx(10 / 15))
    med, spread = median_spread([0.0, 0.0, 5.0])
    assert med == 0.0 and spread == math.inf


@pytest.mark.parametrize(
    ("rates", "kept"),
    [([1.0], [1.0]), ([1.0, 2.0], [2.0, 1.0]), ([1.0, 3.0, 2.0], [3.0, 2.0]), ([4.0, 1.0, 3.0, 2.0], [4.0, 3.0]),
     ([5.0, 1.0, 4.0, 2.0, 3.0], [5.0, 4.0, 3.0])],
)  # fmt: skip
def test_the_faster_half_keeps_at_least_two_fastest_first(rates: list[float], kept: list[float]) -> None:
    assert faster_half(rates) == kept


def test_judged_spread_is_the_faster_halfs() -> None:
    assert judged_spread([10.0, 1.0, 9.0, 2.0]) == (9.5, pytest.approx(1 / 9.5))


def test_shift_ci_is_hodges_lehmann_with_the_mann_whitney_interval() -> None:
    change, low, high = shift_ci([110.0] * 7, [100.0] * 7)
    assert (change, low, high) == (pytest.approx(0.1), pytest.approx(0.1), pytest.approx(0.1))
    run = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0]
    base = [100.0] * 7
    change, low, high = shift_ci(run, base)
    assert change == pytest.approx(0.03)
    # 49 pairwise log-ratios, k = floor(24.5 - 1.96 * sqrt(49 * 15 / 12)) = 9: the 10th smallest and largest
    assert (low, high) == (pytest.approx(0.01), pytest.approx(0.05))
    change, low, high = shift_ci([1.0, 2.0], [1.0])
    assert change == pytest.approx(math.sqrt(2) - 1) and (low, high) == (0.0, pytest.approx(1.0))
    assert shift_ci([4.0], [2.0], z=0.0) == (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(1.0))


def test_stage_perf_reads_a_metrics_file_or_a_baseline_entry() -> None:
    record = {
        "launcher": "proc",
        "world": 2,
        "config_hash": "cfg",
        "tokens_per_step": 4,
        "perf": {
            "warmup_windows": 0,
            "windows": [{"steps": 2, "seconds": 1.0}],
            "peak_memory": {"kind": "rss", "scope": "process", "per_rank": [{"rank": 1, "bytes": 7}, {"rank": 0, "bytes": 5}]},
        },
    }  # fmt: skip
    want = StagePerf("proc", "e1", 2, "cfg", [8.0], [5.0, 7.0], "rss", "process")
    assert stage_perf({**record, "env": {"env_id": "e1"}}) == want
    assert stage_perf({**record, "env_id": "e1"}) == want


@pytest.mark.parametrize(
    ("a", "b", "where"),
    [([100.0] * 4, [100.0] * 4, "within"), ([100.0] * 4, [70.0] * 4, "beyond"), ([60.0] * 4, [100.0] * 4, "beyond"),
     ([100.0, 100.0, 60.0, 60.0], [100.0] * 4, "within"), ([100.0, 80.0, 80.0, 80.0], [100.0] * 4, "straddles")],
)  # fmt: skip
def test_band_check_judges_the_faster_halves(a: list[float], b: list[float], where: str) -> None:
    got, change, low, high = band_check(a, b, 0.2)
    assert got == where
    assert (change, low, high) == shift_ci(faster_half(a), faster_half(b))


def test_band_check_edges_and_a_full_band_without_an_upper_edge() -> None:
    assert band_check([80.5] * 4, [100.0] * 4, 0.2)[0] == "within"
    assert band_check([79.5] * 4, [100.0] * 4, 0.2)[0] == "beyond"
    assert band_check([124.5] * 4, [100.0] * 4, 0.2)[0] == "within"
    assert band_check([126.0] * 4, [100.0] * 4, 0.2)[0] == "beyond"
    assert band_check([1000.0] * 4, [100.0] * 4, 1.0)[0] == "within"


# -- gates/judges/perf.py --------------------------------------------------------------------------------------


def test_a_steady_run_passes_throughput() -> None:
    status, value, text = throughput_check(perf((99.0, 100.0, 101.0)), perf((100.0, 100.0, 100.0)), PROFILE)
    assert (status, value) == ("pass", "+0.0%")
    assert text == (
        "100 tok/s vs 100: +0.0% (95% CI -1.0% to +1.0%; window spread 2%, baseline 0%), tolerated slowdown 10%"
    )


def test_a_run_wholly_slower_than_tolerated_fails() -> None:
    status, value, text = throughput_check(perf((80.0, 81.0, 82.0)), perf((100.0,) * 3), PROFILE)
    assert (status, value) == ("fail", "-19.0%")
    assert text.startswith("slower than tolerated: 81 tok/s vs 100: -19.0% (95% CI -20.0% to -18.0%;")


def test_an_interval_across_the_tolerance_is_inconclusive() -> None:
    status, value, text = throughput_check(perf((85.0, 95.0, 100.0)), perf((100.0,) * 3), PROFILE)
    assert (status, value) == ("inconclusive", "-5.0%")
    assert text.startswith(
        "too noisy to judge (the interval straddles the tolerance): 95 tok/s vs 100: -5.0%"
    )


def test_just_inside_the_tolerance_passes() -> None:
    assert throughput_check(perf((90.1,) * 3), perf((100.0,) * 3), PROFILE)[0] == "pass"
    assert throughput_check(perf((89.0,) * 3), perf((100.0,) * 3), PROFILE)[0] == "fail"


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.0, -1.0])
@pytest.mark.parametrize("who", ["run", "baseline"])
def test_a_non_finite_or_zero_rate_fails(who: str, bad: float) -> None:
    rates = [100.0, bad, 100.0]
    run, base = (perf(rates), perf()) if who == "run" else (perf(), perf(rates))
    assert throughput_check(run, base, PROFILE) == (
        "fail",
        "non-finite",
        f"{who} has a window with a non-finite or zero rate {rates}",
    )


@pytest.mark.parametrize("who", ["run", "baseline"])
def test_too_few_windows_are_inconclusive(who: str) -> None:
    short = [100.0] * (MIN_WINDOWS - 1)
    run, base = (perf(short), perf()) if who == "run" else (perf(), perf(short))
    assert throughput_check(run, base, PROFILE) == (
        "inconclusive",
        "-",
        f"{who} has 2 steady windows (need 3)",
    )
    assert MIN_WINDOWS == 3


def test_memory_within_its_limit_names_the_worst_rank() -> None:
    mib = 2.0**20
    run, base = perf(peaks=(100 * mib, 110 * mib)), perf(peaks=(100 * mib, 100 * mib))
    assert memory_check(run, base, PROFILE) == (
        "pass",
        "+10.0%",
        "rank 1 peak 110 MiB vs 100 MiB (+10.0%, limit +20%, rss)",
    )
    shared = perf(peaks=(120 * mib, 100 * mib), scope="process")
    assert memory_check(shared, base, PROFILE) == (
        "pass",
        "+20.0%",
        "rank 0 peak 120 MiB vs 100 MiB (+20.0%, limit +20%, rss) (ranks share one process: one RSS)",
    )


def test_memory_over_its_limit_fails() -> None:
    mib = 2.0**20
    status, value, text = memory_check(perf(peaks=(2048 * mib,)), perf(peaks=(1024 * mib,)), PROFILE)
    assert (status, value, text) == (
        "fail",
        "+100.0%",
        "grew over the limit: rank 0 peak 2,048 MiB vs 1,024 MiB (+100.0%, limit +20%, rss)",
    )


def test_memory_of_another_kind_or_non_finite_fails() -> None:
    assert memory_check(perf(kind="cuda"), perf(kind="rss"), PROFILE) == (
        "fail",
        "-",
        "memory measured as cuda, baseline as rss",
    )
    for bad in (math.nan, 0.0, math.inf):
        assert memory_check(perf(peaks=(bad,)), perf(), PROFILE) == (
            "fail",
            "non-finite",
            f"a peak is non-finite or zero: run {[bad]}, baseline {[2.0**30]}",
        )
        assert memory_check(perf(), perf(peaks=(bad,)), PROFILE)[0] == "fail"


def test_comparable_needs_the_same_environment_world_and_config() -> None:
    base = {
        "launcher": "thread",
        "env_id": "env",
        "world": 1,
        "config_hash": "cfg",
        "tokens_per_step": 1,
        "perf": {"warmup_windows": 0, "windows": [{"steps": 1, "seconds": 0.01}] * 3,
                 "peak_memory": {"kind": "rss", "scope": "rank", "per_rank": [{"rank": 0, "bytes": 2**30}]}},
    }  # fmt: skip
    b, why = comparable(perf(), base)
    assert why is None and b == stage_perf(base)
    assert comparable(perf(), None) == (None, "thread: not in the baseline")
    for what, value in (("env_id", "other"), ("world", 2), ("config_hash", "x")):
        assert comparable(perf(), {**base, what: value}) == (
            None,
            f"thread: {what} {perf().__dict__[what]} differs from the baseline's {value}",
        )


def test_combine_takes_the_worst_status_and_never_passes_on_nothing() -> None:
    p = ("single", "pass", "+1.0%", "fine")
    i = ("thread", "inconclusive", "-8.0%", "noisy")
    f = ("proc", "fail", "-30.0%", "slow")
    o = combine([p], ["proc: not judged"], "baseline e v2")
    assert (o.status, o.measured, o.threshold) == ("pass", "single +1.0%", None)
    assert o.message == "single: fine; proc: not judged (vs baseline e v2)"
    o = combine([p, i], [], "baseline e v2")
    assert (o.status, o.measured) == ("inconclusive", "single +1.0%, thread -8.0%")
    assert o.message == "single: fine; thread: noisy (vs baseline e v2). Rerun on a quiet machine"
    o = combine([p, i, f], [], "b")
    assert (o.status, o.message) == ("fail", "single: fine; thread: noisy; proc: slow (vs b)")
    o = combine([], ["single: not in the baseline", "thread: x"], "baseline e v2")
    assert (o.status, o.measured, o.threshold) == ("skip", None, None)
    assert o.message == "no stage comparable with baseline e v2: single: not in the baseline; thread: x"


def test_threshold_text_per_device() -> None:
    t = {"perf": {"cpu": {"slowdown": 0.25, "memory_growth": 0.1, "throughput": "skip"}, "cuda": {"slowdown": 0.05, "memory_growth": 0.02}}}  # fmt: skip
    assert (
        threshold_text(t, "slower than {slowdown}")
        == "cpu: slower than 25% (throughput: skip); cuda: slower than 5%"
    )
    assert threshold_text(t, "growth <= {memory_growth}") == "cpu: growth <= 10%; cuda: growth <= 2%"
    assert threshold_text({}, "x") == "no gates.perf thresholds"
    assert threshold_text({"perf": None}, "x") == "no gates.perf thresholds"
