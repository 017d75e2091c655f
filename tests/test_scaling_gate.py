"""The scaling gate's launcher check on synthetic windows: thread and proc measure the same step, so a
gap is judged by the confidence interval of thread/proc, not by two medians alone.

The windows are shaped like the H200 pair's (four 20-step windows per world, 10-20% spreads); the
gate-tree tests (test_gates.py, test_tamper.py) cover the whole gate on real measurements.
"""

from __future__ import annotations

from gates.judges.scaling import launcher_gaps

TIGHT_PROC = [100_000.0, 101_000.0, 99_000.0, 100_500.0]


def table(thread: list[float], proc: list[float]) -> dict:
    return {"results": {"thread": {"1": {"windows": thread}}, "proc": {"1": {"windows": proc}}}}


def test_equal_launchers_pass() -> None:
    sure, unsure, worst = launcher_gaps(table([99_500.0, 100_200.0, 101_000.0, 98_800.0], TIGHT_PROC), 0.25)
    assert (sure, unsure) == ([], []) and worst < 0.01


def test_a_launcher_surely_half_as_fast_fails() -> None:
    sure, unsure, _ = launcher_gaps(table([r / 2 for r in TIGHT_PROC], TIGHT_PROC), 0.25)
    assert len(sure) == 1 and "world 1: thread" in sure[0] and "the launchers differ" in sure[0]
    assert unsure == []


def test_a_gap_near_the_band_in_noisy_windows_is_inconclusive() -> None:
    # medians 26% apart (the H200 pair once), windows spread ~20%: the interval straddles the band
    thread = [70_000.0, 74_000.0, 80_000.0, 84_000.0]
    proc = [92_000.0, 100_000.0, 104_000.0, 112_000.0]
    sure, unsure, worst = launcher_gaps(table(thread, proc), 0.25)
    assert sure == [] and len(unsure) == 1 and "may differ by more than the band" in unsure[0]
    assert 0.2 < worst < 0.3


def test_a_faster_thread_launcher_is_judged_by_the_same_band() -> None:
    sure, _, _ = launcher_gaps(table([r * 2 for r in TIGHT_PROC], TIGHT_PROC), 0.25)
    assert len(sure) == 1  # 2x faster is beyond 1 / (1 - 0.25) = 1.33x
