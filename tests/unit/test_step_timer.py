"""The step timer alone: windows, the warm-up window left out of steady throughput, pauses left out."""

from __future__ import annotations

import time

import pytest

from xtrain.core.step_timer import StepTimer

PAUSE = 0.3  # much longer than any window below, so a pause counted by mistake shows


def timed(work_s: list[float], pause_inside: bool) -> StepTimer:
    syncs: list[int] = []
    timer = StepTimer(lambda: syncs.append(1), tokens_per_step=100)
    timer.start()
    for i, seconds in enumerate(work_s):
        time.sleep(seconds)
        if pause_inside:
            with timer.paused():
                time.sleep(PAUSE)
        else:
            time.sleep(PAUSE)
        timer.close_window(first_step=2 * i, steps=2)
    assert len(syncs) == 1 + len(work_s)  # a device sync before every reading of the clock
    return timer


def test_windows_and_steady_throughput() -> None:
    timer = timed([0.05, 0.02, 0.02], pause_inside=True)
    assert [w["first_step"] for w in timer.windows] == [0, 2, 4]
    assert [w["steps"] for w in timer.windows] == [2, 2, 2]
    assert timer.train_time == pytest.approx(sum(w["seconds"] for w in timer.windows))
    # steady: the two windows after the warm-up one, 2 steps x 100 tokens each
    assert timer.steady_tokens == 400
    assert timer.steady_time == pytest.approx(timer.windows[1]["seconds"] + timer.windows[2]["seconds"])
    assert timer.steady_tokens_per_s(600) == pytest.approx(400 / timer.steady_time)
    assert timer.tokens_per_s(600) == pytest.approx(600 / timer.train_time)


def test_paused_time_is_not_training_time() -> None:
    paused = timed([0.02, 0.02], pause_inside=True)
    assert paused.train_time < PAUSE, paused.windows
    # negative control: the same sleep outside paused() is counted
    counted = timed([0.02, 0.02], pause_inside=False)
    assert counted.train_time > 2 * PAUSE, counted.windows


def test_one_window_is_all_there_is() -> None:
    timer = timed([0.01], pause_inside=True)
    assert timer.steady_time == 0.0 and timer.steady_tokens == 0
    assert timer.steady_tokens_per_s(200) == timer.tokens_per_s(200)  # no steady window: all of it
