"""What loss_match says about records it judges (issue #34 items 2 and 5), on synthetic records: a
check it cannot apply is named as such (never "drew no masks (no dropout)" for masks nobody
recorded); a failure of the numbers names the case the numbers show, loss only, eval only or the
gradients, on the user's side for runrecord runs and on xtrain's for our own.
"""

from __future__ import annotations

import copy

import pytest

from gates.judges import ddp
from gates.judges.training import with_train_mode

LOSS_MATCH = {"max_rel": 1e-3, "cpu": {"first_step_rtol": 1e-5, "prefix_steps": 64, "final_val_atol": 0.01}}
STEPS = 6


def record(recorder: str | None, world: int = 1) -> dict:
    """The fields loss_match reads, consistent with each other (a runrecord 1.2 record: no model seen)."""
    losses = [5.0 - 0.1 * i for i in range(STEPS)]
    evals = [{"step": s, "loss": 5.0 - 0.1 * s} for s in (0, 3, 6)]
    m = {
        "config_hash": "0123456789abcdef",
        "config": {"seed": 0, "model": {}, "train": {"steps": STEPS, "eval_every": 3}},
        "steps": STEPS,
        "world": world,
        "device": "cpu",
        "precision": "fp32",
        "train_loss": losses,
        "grad_norm": [1.0 + 0.01 * i for i in range(STEPS)],
        "lr": [0.1] * STEPS,
        "eval": evals,
        "final_val_loss": evals[-1]["loss"],
        "samples": {"count": [8] * STEPS, "hash_sum": [123] * STEPS, "dropout_hash_sum": [0] * STEPS},
        "determinism": {"recorder": recorder} if recorder else {},
    }
    if recorder is None:
        m["eval_mode_steps"] = []  # xtrain's trainer always records it
    return m


def judge(single: dict, got: dict):
    return with_train_mode(
        ddp.equivalence(single, got, "proc", LOSS_MATCH), [("single", single), ("proc", got)]
    )


def test_what_an_older_record_cannot_say_is_named_not_applied() -> None:
    single, got = record("runrecord 1.2"), record("runrecord 1.2", world=2)
    o = judge(single, got)
    assert o.status == "pass"
    assert set(o.not_applied) == {"dropout masks", "train mode"}
    assert "drew no masks" not in o.message and "no dropout" not in o.message
    assert "dropout masks: not applied: not recorded" in o.message
    assert "train mode: not applied: not recorded in runs/single, runs/proc" in o.message
    ours = judge(record(None), record(None, world=2))  # the control: our trainer records both
    assert (
        ours.status == "pass"
        and ours.not_applied == {}
        and "no masks (no dropout), like single" in ours.message
    )


def perturb(m: dict, key: str, factor: float, from_step: int = 0) -> None:
    if key == "eval":
        for e in m["eval"]:
            e["loss"] *= factor if e["step"] >= from_step else 1.0
        m["final_val_loss"] = m["eval"][-1]["loss"]
    else:
        m[key] = [v * (factor if i >= from_step else 1.0) for i, v in enumerate(m[key])]


@pytest.mark.parametrize(
    ("edits", "yours", "ours"),
    [
        ([("train_loss", 1.01)], "your loss logging", "the loss reduction over ranks"),
        ([("eval", 1.01)], "your eval set", "the evaluation (xtrain/core/train.py evaluate)"),
        ([("grad_norm", 1.01), ("train_loss", 1.01)], "your gradient all-reduce", "xtrain/core/comm.py"),
        (
            [("train_loss", 1.01), ("eval", 1.01)],
            "your loss logging and your eval set",
            "the loss reduction and",
        ),
    ],
)
def test_a_failure_names_the_case_the_numbers_show(edits: list, yours: str, ours: str) -> None:
    for recorder, named in (("runrecord 1.3", yours), (None, ours)):
        single = record(recorder)
        got = copy.deepcopy(record(recorder, world=2))
        for key, factor in edits:
            perturb(got, key, factor)
        o = judge(single, got)
        assert o.status == "fail" and named in o.message, o.message
        if recorder:
            assert "xtrain/" not in o.message


def test_a_whole_multiple_of_the_grad_norm_still_says_summed() -> None:
    single, got = record("runrecord 1.3"), record("runrecord 1.3", world=2)
    perturb(got, "grad_norm", 2.0)
    o = judge(single, got)
    assert "a whole multiple: gradients summed instead of averaged?" in o.message
    assert "the gradients differ (grad_norm first out at step 0)" in o.message
