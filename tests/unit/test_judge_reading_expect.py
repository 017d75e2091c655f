"""gates/reading/expect.py under mutation (docs/judge-mutation.md): what a recorder said it saw, in-process.

recorded_problems holds a record's own claims against the series it wrote: eval-mode steps inside
the run (step `steps` and beyond are past it) and no dropout masks fingerprinted where it says none
were drawn. run_problems gathers every check in order; records are tests/unit/test_judge_training.py's.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_judge_training import FakeParams, pipeline_record, record

from conftest import PARAMS
from gates.reading import expect
from params.config import load_params

WHERE = "runs/x/metrics.json"


@pytest.mark.parametrize(
    ("eval_mode_steps", "late"),
    [
        (None, None),
        ([], None),
        ([0, 1, 2, 3], None),  # the run has steps 0..3: step 3 is inside
        ([0, 4], [4]),  # step 4 == steps: past it
        ([5, 1, 9], [5, 9]),
        ([-1, 3], None),
    ],
)
def test_eval_mode_steps_past_the_run_are_named(eval_mode_steps: Any, late: list[int] | None) -> None:
    m = record(eval_mode_steps=eval_mode_steps)
    want = [] if late is None else [f"{WHERE}: eval_mode_steps {late} past the run's 4 steps"]
    assert expect.recorded_problems("x", m) == want


def test_a_record_without_eval_mode_steps_or_dropout_has_no_recorded_problem() -> None:
    m = record()
    del m["eval_mode_steps"]
    assert "dropout" not in m and expect.recorded_problems("x", m) == []


@pytest.mark.parametrize(
    ("dropout", "hashes", "first"),
    [
        ({"masks": "none"}, [0, 0, 0, 0], None),
        ({"masks": "off"}, [0, 0, 0, 0], None),
        ({"masks": "none"}, [0, 0, 5, 7], 2),
        ({"masks": "off"}, [3, 0, 0, 0], 0),
        ({"masks": "off"}, [0, 0, 0, 1], 3),
        ({"masks": "drawn"}, [1, 1, 1, 1], None),
        ({"masks": "NONE"}, [1, 1, 1, 1], None),
        ({"masks": None}, [1, 1, 1, 1], None),
        ({}, [1, 1, 1, 1], None),
        (None, [1, 1, 1, 1], None),
    ],
)
def test_masks_drawn_where_the_record_says_none_are_named(
    dropout: Any, hashes: list[int], first: int | None
) -> None:
    m = record(dropout=dropout)
    m["samples"]["dropout_hash_sum"] = hashes
    masks = (dropout or {}).get("masks")
    want = (
        [] if first is None else [f"{WHERE}: dropout.masks is {masks!r} but masks were drawn at step {first}"]
    )
    assert expect.recorded_problems("x", m) == want


def test_both_recorded_problems_in_order_and_in_run_problems() -> None:
    m = record(eval_mode_steps=[4], dropout={"masks": "none"})
    m["samples"]["dropout_hash_sum"] = [0, 9, 0, 0]
    both = [
        f"{WHERE}: eval_mode_steps [4] past the run's 4 steps",
        f"{WHERE}: dropout.masks is 'none' but masks were drawn at step 1",
    ]
    assert expect.recorded_problems("x", m) == both
    assert expect.run_problems(None, "x", m) == both
    assert expect.run_problems(FakeParams(False), "x", m) == both
    m["world"] = 3  # the world check comes after
    assert expect.run_problems(None, "x", m) == [*both, f"{WHERE}: cross_rank lists ranks [0, 1] for world 3"]


def test_a_vocabulary_of_one_is_a_size_and_the_world_message_names_the_run() -> None:
    params = load_params(str(PARAMS), ["profile=cpu"])
    m = pipeline_record(params, "thread")
    m["config"]["model"]["vocab_size"] = 1
    problems = expect.params_problems(params, "thread", m)
    assert len(problems) == 1 and problems[0].startswith(
        f"runs/thread/metrics.json: config_hash {m['config_hash']}"
    )
    m = pipeline_record(params, "thread")
    m["world"] = params.world("thread") + 1
    assert expect.params_problems(params, "thread", m) == [
        f"runs/thread/metrics.json: world {m['world']}, params.yaml says {params.world('thread')}"
    ]
