"""The scaling stage's first pass: measured processes set up side by side, then measure one at a time.

Real processes (no torch): each calls xtrain.bench.scaling.await_turn, as rank_body does before its
warm-up, then "measures" (sleeps) and writes a result with its span, as rank_body does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conftest import REPO, code_first
from xtrain.bench.scaling import TURN_ENV, Measured, await_turn, check_alone, measure_together

FAKE = """
import json, sys, time
from pathlib import Path
from xtrain.bench.scaling import await_turn
time.sleep(float(sys.argv[2]))  # setting up
await_turn()
began = time.time()
time.sleep(0.3)  # measuring
span = [began, time.time()]
Path(sys.argv[1]).write_text(json.dumps({"1": {"rounds": [[float(sys.argv[2])]], "profile": None, "span": span}}))
"""


def fake(setup_s: dict[str, float]):
    def command(launcher: str, worlds: list[int], max_rounds: int, result: Path) -> list[str]:
        return [sys.executable, "-c", FAKE, str(result), str(setup_s[launcher])]

    return command


def test_processes_set_up_together_and_measure_one_at_a_time(monkeypatch) -> None:
    monkeypatch.setattr(os, "environ", {**os.environ, **code_first(REPO)})
    measured = Measured(2, [1], {"thread": {}, "proc": {}}, {"thread": {}, "proc": {}}, dict(os.environ))
    measure_together(fake({"thread": 0.6, "proc": 0.6}), [("thread", [1]), ("proc", [1])], 4, measured)
    assert measured.rounds == {"thread": {1: [[0.6]]}, "proc": {1: [[0.6]]}}


def test_the_stage_waits_for_every_process_to_be_set_up_before_the_first_measures(monkeypatch) -> None:
    """The slow starter's set-up (1.5 s) is not inside the fast one's measurement: the fast one waits.
    Were turns ignored, the fast process would measure while the slow one still sets up."""
    monkeypatch.setattr(os, "environ", {**os.environ, **code_first(REPO)})
    measured = Measured(2, [1], {"thread": {}, "proc": {}}, {"thread": {}, "proc": {}}, dict(os.environ))
    spans: list[list[float]] = []
    real = check_alone
    monkeypatch.setattr("xtrain.bench.scaling.check_alone", lambda s: (spans.extend(s), real(s)))
    measure_together(fake({"thread": 0.0, "proc": 1.5}), [("thread", [1]), ("proc", [1])], 4, measured)
    (t_began, t_end), (p_began, _) = spans
    assert p_began >= t_end  # one at a time
    assert p_began - t_began < 1.0  # the slow set-up was done before the first measurement, not after it


def test_overlapping_measurements_are_refused() -> None:
    check_alone([[0.0, 1.0], [1.0, 2.0]])  # touching is alone
    with pytest.raises(RuntimeError, match=r"measurements overlapped \(1.500 < 2.000\)"):
        check_alone([[0.0, 2.0], [1.5, 3.0]])


def test_a_process_whose_stage_is_gone_stops_waiting(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "stage.pid").write_text("999999999")  # no such process
    monkeypatch.setenv(TURN_ENV, str(tmp_path))
    with pytest.raises(
        RuntimeError, match="the scaling stage \\(pid 999999999\\) that started this process is gone"
    ):
        await_turn()
    assert (tmp_path / f"ready-{os.getpid()}").exists()


def test_without_a_turn_folder_a_process_measures_at_once(monkeypatch) -> None:
    monkeypatch.delenv(TURN_ENV, raising=False)
    await_turn()  # returns: the repeats and `python -m pipeline.bench` run one process at a time


def test_a_process_that_fails_while_others_wait_stops_them_all(monkeypatch) -> None:
    monkeypatch.setattr(os, "environ", {**os.environ, **code_first(REPO)})
    measured = Measured(2, [1], {"thread": {}, "proc": {}}, {"thread": {}, "proc": {}}, dict(os.environ))

    def command(launcher: str, worlds: list[int], max_rounds: int, result: Path) -> list[str]:
        if launcher == "thread":
            return [sys.executable, "-c", "import sys; sys.exit('no model here')"]
        return [sys.executable, "-c", FAKE, str(result), "0.0"]

    with pytest.raises(RuntimeError, match="scaling thread world 1 failed:\nno model here"):
        measure_together(command, [("thread", [1]), ("proc", [1])], 4, measured)
