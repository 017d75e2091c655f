"""The scaling gate's launcher check on synthetic windows: thread and proc measure the same step, in turn,
so a gap is judged by the confidence interval of the paired thread/proc ratios of quiet windows, not by
two medians alone, and never on windows in which other processes held the CPUs.

The windows are shaped like the H200 pair's (four 20-step windows per world, 10-20% spreads); the
gate-tree tests (test_gates.py, test_tamper.py) cover the whole gate on real measurements.
"""

from __future__ import annotations

from test_judge_scaling import busy, measurement, slot

from gates.judges.scaling import verdicts

TIGHT_PROC = [100_000.0, 101_000.0, 99_000.0, 100_500.0]
BOUNDS = {"floors": {}, "band": 0.25, "max_spread": 1.0, "max_contention": 0.5}


def table(thread: list[float], proc: list[float]) -> dict:
    return {
        "cpus": 2,
        "results": {
            "thread": {"1": measurement(thread, None, at=slot("thread", 1))},
            "proc": {"1": measurement(proc, None, at=slot("proc", 1))},
        },
    }


def test_equal_launchers_pass() -> None:
    assert verdicts(table([99_500.0, 100_200.0, 101_000.0, 98_800.0], TIGHT_PROC), BOUNDS, 4) == ([], [], [])


def test_a_launcher_surely_half_as_fast_fails() -> None:
    sure, unsure, contended = verdicts(table([r / 2 for r in TIGHT_PROC], TIGHT_PROC), BOUNDS, 4)
    assert len(sure) == 1 and "world 1: thread" in sure[0] and "the launchers differ" in sure[0]
    assert (unsure, contended) == ([], [])


def test_a_gap_near_the_band_in_noisy_windows_is_inconclusive() -> None:
    # medians 26% apart (the H200 pair once), windows spread ~20% and not moving together
    thread = [70_000.0, 84_000.0, 80_000.0, 74_000.0]
    proc = [92_000.0, 100_000.0, 104_000.0, 112_000.0]
    sure, unsure, _ = verdicts(table(thread, proc), BOUNDS, 4)
    assert sure == [] and len(unsure) == 1 and "may be beyond the bound" in unsure[0]


def test_windows_that_move_together_are_judged_by_their_ratio() -> None:
    """A busy host slowed both launchers' windows of a cycle alike: the pairs still agree (pass)."""
    moments = [1.0, 0.6, 0.9, 0.5]
    thread = [100_000.0 * m for m in moments]
    proc = [101_000.0 * m for m in moments]
    assert verdicts(table(thread, proc), BOUNDS, 4) == ([], [], [])


def test_a_faster_thread_launcher_is_judged_by_the_same_band() -> None:
    sure, _, _ = verdicts(table([r * 2 for r in TIGHT_PROC], TIGHT_PROC), BOUNDS, 4)
    assert len(sure) == 1  # 2x faster is beyond 1 / (1 - 0.25) = 1.33x


def test_a_launcher_slowed_only_while_a_neighbour_held_the_cpus_is_not_failed() -> None:
    """Issue 52: one launcher measured on a busier moment than the other. Its slow windows carry the
    readings of that moment (other processes held 80-90% of the CPUs): not judged, and named."""
    s = busy(table([r / 2 for r in TIGHT_PROC], TIGHT_PROC), "thread", 1, [0.8, 0.85, 0.9, 0.8])
    sure, unsure, contended = verdicts(s, BOUNDS, 4)
    assert (sure, unsure) == ([], [])
    assert contended[0] == "world 1 thread vs proc: 0 of 4 pairs quiet (need 4)"
    assert contended[1].startswith(
        "other processes held 82% of the 2 CPUs (median of 4 windows above the 50%"
    )
