"""gates/judges/training.py's entry points under mutation (docs/judge-mutation.md): cross_rank, finite
and the cross_rank gates on real, torch-free artifact trees, and the two pictures (read from the figure).

tests/unit/test_judge_training.py judges hand-made records, no tree; here each run is a
metrics.json valid against metrics.schema.json, recorded in dvc.lock under its launcher's stage, and
read through Artifacts: the schema, the stage, NaN refusal and params.yaml are the real ones.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from matplotlib.colors import to_rgba
from test_judge_training import FakeParams, pipeline_record, record

from conftest import PARAMS
from gates.judges import plots
from gates.judges.outcome import passed
from gates.judges.training import (
    FINITE,
    cross_rank,
    cross_rank_gate,
    cross_rank_picture,
    finite,
    finite_picture,
    non_finite_steps,
    train_mode_unrecorded,
    with_train_mode,
)
from gates.reading.artifacts import ArtifactError, NonFinite, StageNotRun
from gates.reading.runs import describes_runs, read_cross_rank, read_finite, read_finite_picture, run_metrics
from judge_trees import Tree
from params.config import load_params
from params.identity import config_identity

STAGE = {"single": "train_single", "thread": "train@thread", "proc": "train@proc"}
T = {"cross_rank": {"max_abs": 1e-6}}


def full(m: dict[str, Any]) -> dict[str, Any]:
    """A record with every key metrics.schema.json requires (the judged ones as `m` has them)."""
    rest = {
        "format": "xtrain-metrics/1", "device": "cpu", "precision": "fp32",
        "env": {"env_id": "cpu-test", "torch": "2.13.0+cpu", "device_type": "cpu"},
        "tokens_per_step": 64, "initial_val_loss": 4.5, "final_val_loss": 2.0, "tokens_per_s": 1.0,
        "steady_tokens_per_s": 1.0, "train_time_s": 1.0, "wall_s": 1.0, "resumed_from_step": None,
        "param_digest": "d" * 64,
    }  # fmt: skip
    return {**rest, **m}


def tree_of(root: Path, runs: dict[str, dict[str, Any]], params: Any = None, raw: str = "") -> Tree:
    """A tree holding these runs, each recorded under its stage; `raw` replaces one run's text."""
    tree = Tree(root, params=params)
    for run, m in runs.items():
        path = root / "runs" / run / "metrics.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(raw if raw and run == "single" else json.dumps(full(m)))
        tree.record_out(STAGE[run], f"runs/{run}/metrics.json")
    return tree


def ranks(m: dict[str, Any], *rows: tuple[float, float]) -> dict[str, Any]:
    """`m` with per_rank rows (max_abs_diff, param_sum) for ranks 0.. and the claimed maximum theirs."""
    m["cross_rank"] = {
        "max_abs_diff": max(d for d, _ in rows),
        "per_rank": [{"rank": r, "max_abs_diff": d, "param_sum": s} for r, (d, s) in enumerate(rows)],
    }
    m["world"] = len(rows)
    return m


def judge(root: Path, m: dict[str, Any], max_abs: float = 1e-6, params: Any = None):
    return cross_rank(
        read_cross_rank(tree_of(root, {m["launcher"]: m}, params).artifacts(), m["launcher"]), max_abs
    )


# -- the reading ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("run", ["single", "thread", "proc"])
def test_each_run_is_read_from_its_folder_under_its_stage(tmp_path: Path, run: str) -> None:
    m = record(world=1 if run == "single" else 2, launcher=run)
    a = tree_of(tmp_path, {run: m}).artifacts()
    assert run_metrics(a, run)["cross_rank"] == m["cross_rank"]
    assert list(a.read) == [f"runs/{run}/metrics.json"]
    other = {"single": "thread", "thread": "proc", "proc": "single"}[run]
    tree = tree_of(tmp_path / "x", {run: m})
    tree.stages[STAGE[other]] = tree.stages.pop(STAGE[run])  # recorded under another launcher's stage
    with pytest.raises(ArtifactError, match=f"does not record stage {STAGE[run]}"):
        run_metrics(tree.artifacts(), run)
    with pytest.raises(StageNotRun, match=f"stage {STAGE[other]} has not run"):
        run_metrics(tree_of(tmp_path / "y", {}).artifacts(), other)


def test_a_record_is_validated_against_the_metrics_schema(tmp_path: Path) -> None:
    m = record(world=1, launcher="single", steps=0)
    with pytest.raises(ArtifactError, match=r"^runs/single/metrics\.json: steps"):
        run_metrics(tree_of(tmp_path, {"single": m}).artifacts(), "single")


def test_describes_runs_only_for_a_params_yaml_that_does() -> None:
    assert describes_runs(FakeParams(True))
    assert not describes_runs(FakeParams(False))
    assert not describes_runs(None)


# -- cross_rank on a real tree ---------------------------------------------------------------------------------


def test_ranks_that_agree_pass_and_the_gate_names_its_launcher(tmp_path: Path) -> None:
    m = ranks(record(launcher="proc"), (0.0, 12.5), (4e-7, 12.5), (1e-6, 12.5))
    o = judge(tmp_path, m)
    assert (o.status, o.measured, o.threshold) == ("pass", 1e-6, 1e-6)
    assert o.message == "3 ranks agree: max |p_r - p_0| 1e-06 over 1,000 parameters"
    g = cross_rank_gate("proc")
    assert g.id == "cross_rank.proc" and g.takes == ("cross_rank",)
    assert g.checks == "max |p_rank - p_0| over all ranks and tensors after the last proc step"
    assert g.threshold({"cross_rank": {"max_abs": 2.5e-6}}) == "<= 2.5e-06"
    a = tree_of(tmp_path / "g", {"proc": m}).artifacts()
    assert g.run(a, {"cross_rank": {"max_abs": 5e-7}}).status == "fail"  # the bound is the thresholds'
    assert g.run(a, T).message == o.message
    assert g.why == (
        "replicas that drift apart silently train different models; bitwise equality proved flaky on NCCL "
        "and gates at 1e-6"
    )
    assert g.investigate == (
        "runs/proc/metrics.json cross_rank.per_rank names the rank; check that every rank applies the same "
        "averaged gradient and optimizer step (comm.sync_grads, DDP buckets)"
    )


def test_a_rank_just_over_the_bound_fails(tmp_path: Path) -> None:
    m = ranks(record(), (0.0, 12.5), (1.5e-6, 12.5))
    o = judge(tmp_path, m)
    assert (o.status, o.measured, o.threshold) == ("fail", 1.5e-6, 1e-6)
    assert o.message.startswith(
        "rank 1 differs from rank 0 by 1.5e-06 (parameter sums rank 0: 12.5, rank 1: 12.5)"
    )


def test_a_record_that_is_not_its_config_is_refused_with_the_bound(tmp_path: Path) -> None:
    m = record(config_hash="0" * 16)
    m["world"] = 3  # and two ranks listed
    o = judge(tmp_path, m, max_abs=3e-6)
    assert (o.status, o.measured, o.threshold) == ("fail", None, 3e-6)
    assert o.message.startswith("runs/thread/metrics.json: config_hash: 0000000000000000 is not the identity")
    assert (
        "a hand-edited or mislabelled record; runs/thread/metrics.json: cross_rank lists ranks [0, 1] for "
        in o.message
    )
    assert o.message.endswith(
        "Refusing to judge runs whose records contradict themselves: rerun them (dvc repro)"
    )


def test_a_run_of_another_params_yaml_is_refused_naming_params_yaml(tmp_path: Path) -> None:
    params = load_params(str(PARAMS), ["profile=cpu"])
    m = pipeline_record(params, "thread")
    assert judge(tmp_path, m, params=params).status == "pass"
    m["world"] += 1
    m["cross_rank"]["per_rank"].append({"rank": m["world"] - 1, "max_abs_diff": 0.0, "param_sum": 12.5})
    o = judge(tmp_path / "b", m, params=params)
    assert (o.status, o.measured) == ("fail", None)
    assert f"world {m['world']}, params.yaml says {m['world'] - 1}" in o.message
    assert o.message.endswith("rerun them (dvc repro) with this params.yaml")


def test_an_inconsistent_claim_keeps_the_bound(tmp_path: Path) -> None:
    m = ranks(record(), (0.0, 12.5), (2e-7, 12.5))
    m["cross_rank"]["max_abs_diff"] = 0.0
    o = judge(tmp_path, m, max_abs=4e-6)
    assert (o.status, o.measured, o.threshold) == ("fail", 2e-7, 4e-6)
    assert o.message.startswith("runs/thread/metrics.json is inconsistent: max_abs_diff 0.0 but rank 1")


def test_a_parameter_sum_exactly_at_what_its_difference_allows_passes(tmp_path: Path) -> None:
    # allowed = n_params * (max_abs_diff + 2**-52 * max(1, |s0|)) = 0.5 + 2**-52, an exact float
    m = ranks(record(n_params=1), (0.0, 0.0), (0.5, 0.5 + 2.0**-52))
    assert judge(tmp_path, m, max_abs=1.0).status == "pass"
    m = ranks(record(n_params=1), (0.0, 0.0), (0.5, 0.5 + 2.0**-51))
    o = judge(tmp_path / "over", m, max_abs=1.0)
    assert (o.status, o.measured, o.threshold) == ("fail", 0.5 + 2.0**-51, 1.0)
    assert o.message == (
        "runs/thread/metrics.json is inconsistent: rank 1's parameter sum 0.5000000000000004 differs from rank "
        "0's 0.0 by 0.5, more than its max_abs_diff 0.5 over 1 parameters allows"
    )


def test_a_small_parameter_sum_is_held_to_the_noise_of_one(tmp_path: Path) -> None:
    # |s0| = 0.25 < 1: the noise is n * 2**-52 * 1 (2.2e-13), not * 2 (4.4e-13) nor * 0.25
    m = ranks(record(), (0.0, 0.25), (0.0, 0.25 + 3e-13))
    assert judge(tmp_path, m).status == "fail"
    m = ranks(record(), (0.0, 0.25), (0.0, 0.25 + 1.5e-13))
    assert judge(tmp_path / "in", m).status == "pass"


def test_one_rank_is_a_skip_and_says_whose_world_it_is(tmp_path: Path) -> None:
    o = judge(tmp_path, record(world=1, launcher="single"))
    assert (o.status, o.measured, o.threshold) == ("skip", 0.0, 1e-6)
    assert o.message == "runs/single ran with world 1: no other rank to compare"


# -- finite on a real tree -----------------------------------------------------------------------------------


def three_runs() -> dict[str, dict[str, Any]]:
    return {"single": record(world=1, launcher="single"), "thread": record(), "proc": record(launcher="proc")}


def test_finite_passes_over_the_runs_that_ran(tmp_path: Path) -> None:
    runs = three_runs()
    o = finite(read_finite(tree_of(tmp_path, runs).artifacts()))
    assert (o.status, o.measured, o.threshold) == ("pass", 0, 0)
    assert o.message == "every number is finite in runs single, thread, proc, shaped as their own configs say"
    del runs["thread"]
    o = finite(read_finite(tree_of(tmp_path / "two", runs).artifacts()))
    assert o.message == "every number is finite in runs single, proc, shaped as their own configs say"
    assert FINITE.run(tree_of(tmp_path / "g", runs).artifacts(), {}).message == o.message


def test_finite_without_a_run_is_a_skip(tmp_path: Path) -> None:
    o = finite(read_finite(tree_of(tmp_path, {}).artifacts()))
    assert (o.status, o.measured, o.threshold, o.message) == ("skip", None, None, "no training stage has run")


def test_a_nan_fails_finite_and_the_other_runs_are_still_checked(tmp_path: Path) -> None:
    runs = three_runs()
    text = json.dumps(full(runs["single"])).replace(
        '"train_loss": [4.0, 3.5, 3.0, 2.5]', '"train_loss": [4.0, 3.5, 3.0, NaN]'
    )
    runs["proc"]["steps"] = 5  # misshapen: 4 values for 5 steps
    o = finite(read_finite(tree_of(tmp_path, runs, raw=text).artifacts()))
    assert (o.status, o.measured, o.threshold) == ("fail", 2, 0)
    assert o.message.startswith(
        "runs/single/metrics.json: train_loss[3] = nan; runs/proc/metrics.json: steps 5"
    )
    assert o.message.endswith(
        "Next: the first non-finite step (lower the learning rate, check the data and precision), or rerun a "
        "run that does not match its own record"
    )
    only_nan = finite(
        read_finite(tree_of(tmp_path / "nan", {"single": runs["single"]}, raw=text).artifacts())
    )
    assert (only_nan.status, only_nan.measured) == ("fail", 1)


def test_finite_names_params_yaml_where_it_describes_the_runs(tmp_path: Path) -> None:
    params = load_params(str(PARAMS), ["profile=cpu"])
    m = pipeline_record(params, "thread")
    o = finite(read_finite(tree_of(tmp_path, {"thread": m}, params).artifacts()))
    assert o.message == "every number is finite in runs thread, shaped as params.yaml says"
    m["steps"] += 1
    o = finite(read_finite(tree_of(tmp_path / "b", {"thread": m}, params).artifacts()))
    assert o.status == "fail" and o.message.endswith("or rerun a run that does not match params.yaml")
    other = pipeline_record(params, "thread")  # a record true to itself, of another learning rate
    other["config"]["train"]["lr"] = 1.0
    other["config_hash"] = config_identity(other["config"])
    o = finite(read_finite(tree_of(tmp_path / "c", {"thread": other}, params).artifacts()))
    assert (o.status, o.measured) == ("fail", 1)
    assert o.message.startswith(
        f"runs/thread/metrics.json: config_hash {other['config_hash']}, params.yaml gives"
    )
    assert finite(read_finite(tree_of(tmp_path / "d", {"thread": other}).artifacts())).status == "pass"


# -- train mode: which runs could not say ------------------------------------------------------------------


def foreign(**changes: Any) -> dict[str, Any]:
    m = record(determinism={"recorder": "runrecord/1"}, **changes)
    del m["eval_mode_steps"]
    return m


def test_only_a_foreign_run_without_eval_mode_steps_is_unrecorded() -> None:
    assert (
        train_mode_unrecorded([("single", record()), ("thread", record(determinism={"recorder": "r"}))])
        is None
    )
    own = record()
    del own["eval_mode_steps"]  # xtrain's trainer without them is a failure, not "not applied"
    assert train_mode_unrecorded([("single", own)]) is None
    assert train_mode_unrecorded([("thread", foreign()), ("single", record()), ("proc", foreign())]) == (
        "not recorded in runs/thread, runs/proc (runrecord did not see the model: RunRecorder(..., "
        "model=model) records the mode of every step)"
    )


def test_an_unrecorded_train_mode_is_named_as_not_applied_on_the_outcome() -> None:
    o = passed(0.0, 1e-6, "all equal")
    got = with_train_mode(o, [("thread", foreign()), ("single", record())])
    why = train_mode_unrecorded([("thread", foreign())])
    assert got is o and got.not_applied == {"train mode": why}
    assert got.message == f"all equal; train mode: not applied: {why}"
    o = passed(0.0, 1e-6, "all equal")
    got = with_train_mode(o, [("thread", foreign()), ("proc", record(eval_mode_steps=[3]))])
    assert got.status == "fail" and got.not_applied == {"train mode": why}
    assert got.message.startswith(
        "model in eval mode at training steps 3 on proc (dropout would be silently off: the seed's T21). Next:"
    )
    assert got.message.endswith(f"The comparison itself: pass: all equal; train mode: not applied: {why}")
    old = record()
    del old["eval_mode_steps"]
    got = with_train_mode(passed(0.0, 1e-6, "ok"), [("proc", old)])
    assert got.message.startswith("runs/proc/metrics.json: eval_mode_steps missing")


# -- the pictures ----------------------------------------------------------------------------------------------


def test_the_cross_rank_picture_draws_one_bar_per_rank_in_rank_order(tmp_path: Path, drawn) -> None:
    m = ranks(record(launcher="proc"), (0.0, 1.0), (2e-6, 1.0), (5e-7, 1.0))
    m["cross_rank"]["per_rank"].reverse()
    a = tree_of(tmp_path, {"proc": m}).artifacts()
    pic = cross_rank_gate("proc").draw(a, {"cross_rank": {"max_abs": 1e-6}})
    assert pic.html == "<svg/>"
    assert pic.caption == (
        "Largest absolute parameter difference between each rank and rank 0 (parameter units, log scale; 0 "
        f"drawn at {plots.ZERO_FLOOR:g}). Pass: every bar on or below the dashed line (1e-06) and at least two "
        "ranks."
    )
    ((fig,),) = (drawn,)
    (ax,) = fig.axes
    assert fig.get_figheight() == pytest.approx(2.4)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["rank 0", "rank 1", "rank 2"]
    assert [p.get_height() for p in ax.patches] == pytest.approx([plots.ZERO_FLOOR, 2e-6, 5e-7])
    assert [p.get_facecolor() for p in ax.patches] == [
        to_rgba(plots.OK),
        to_rgba(plots.BAD),
        to_rgba(plots.OK),
    ]
    assert ax.get_legend().get_texts()[0].get_text() == "limit 1e-06"
    assert ax.get_ylabel() == "max |p_rank − p_0|"
    assert ax.get_title() == "runs/proc: parameter difference from rank 0 after the last step"
    assert cross_rank_picture(read_cross_rank(a, "proc"), {"cross_rank": {"max_abs": 3e-6}}).caption.endswith(
        "dashed line (3e-06) and at least two ranks."
    )


def test_non_finite_steps_are_the_indices_of_nan_and_inf() -> None:
    assert non_finite_steps([1.0, math.nan, 2.0, math.inf, -math.inf]) == [1, 3, 4]
    assert non_finite_steps([0.0, 1e308]) == []


def test_the_finite_picture_marks_every_non_finite_step(tmp_path: Path, drawn) -> None:
    runs = three_runs()
    del runs["thread"]
    text = (
        json.dumps(full(runs["single"]))
        .replace('"train_loss": [4.0, 3.5, 3.0, 2.5]', '"train_loss": [4.0, NaN, 3.0, 2.5]')
        .replace('"grad_norm": [1.0, 1.0, 1.0, 1.0]', '"grad_norm": [1.0, 1.0, Infinity, 1.0]')
        .replace('{"step": 2, "loss": 3.5}', '{"step": 2, "loss": NaN}')
        .replace('{"step": 0, "loss": 4.5}', '{"step": 1, "loss": Infinity}')
    )
    pic = finite_picture(read_finite_picture(tree_of(tmp_path, runs, raw=text).artifacts()), {})
    assert pic.html == "<svg/>"
    assert pic.caption == (
        "Training loss and gradient norm of every run (single, proc); a red vertical line marks each step with "
        "a NaN or Inf (train loss, eval loss or grad norm): 3 here. Pass: no red line."
    )
    (fig,) = drawn
    loss_ax, norm_ax = fig.axes
    assert fig.get_figheight() == pytest.approx(2.8)
    curves = [line for line in loss_ax.get_lines() if line.get_label() in ("single", "proc")]
    assert [c.get_label() for c in curves] == ["single", "proc"]
    assert str([float(v) for v in curves[0].get_ydata()]) == "[4.0, nan, 3.0, 2.5]"
    norms = [line for line in norm_ax.get_lines() if line.get_label() == "single"]
    assert str([float(v) for v in norms[0].get_ydata()]) == "[1.0, 1.0, nan, 1.0]"  # inf drawn as a gap
    assert {c.get_linewidth() for c in [*curves, *norms]} == {1.0}
    marks = [line for line in loss_ax.get_lines() if line.get_color() == plots.BAD]
    assert sorted(line.get_xdata()[0] for line in marks) == [1, 2]  # train loss 1, eval loss 1 and 2
    (norm_mark,) = [line for line in norm_ax.get_lines() if line.get_color() == plots.BAD]
    assert norm_mark.get_xdata()[0] == 2
    assert [(ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) for ax in fig.axes] == [
        ("step", "train loss (nats/token)", "loss per run"),
        ("step", "grad norm (before clipping)", "gradient norm per run"),
    ]
    assert [t.get_text() for t in norm_ax.get_legend().get_texts()] == ["single", "proc"]


def test_the_finite_picture_without_a_run_draws_nothing(tmp_path: Path, drawn) -> None:
    from gates.judges.gate import NothingMeasured

    with pytest.raises(NothingMeasured, match=r"^no training stage has run$"):
        FINITE.draw(tree_of(tmp_path, {}).artifacts(), {})


def test_finite_still_refuses_what_the_picture_draws(tmp_path: Path) -> None:
    text = json.dumps(full(record(world=1, launcher="single"))).replace('"lr": [0.1', '"lr": [NaN')
    a = tree_of(tmp_path, {"single": record(world=1, launcher="single")}, raw=text).artifacts()
    with pytest.raises(NonFinite, match=r"^runs/single/metrics\.json: lr\[0\] = nan$"):
        run_metrics(a, "single")
