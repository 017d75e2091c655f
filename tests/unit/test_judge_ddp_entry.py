"""gates/judges/ddp.py under mutation (docs/judge-mutation.md): records of other recorders, which side a
failure points at, and the gate entries on an artifact tree.

tests/unit/test_judge_ddp.py pins each check on xtrain's own records. Here: records written by another
recorder (runrecord: how its dropout masks were recorded, hints that name the user's side), the
Next of a failure of the numbers (failure_case: logging, eval set or gradients, told apart by what
agrees), and loss_match / launcher_parity / their pictures and unit text reading runs/*/metrics.json
from a hand-built tree through Artifacts (the schema check is contracts', replaced by a plain read).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from contracts import artifact_table
from gates.judges.ddp import (
    LAUNCHER_PARITY,
    _near_integer_ratio,
    check_dropout,
    check_samples,
    dropout_mode,
    equivalence,
    failure_case,
    launcher_parity,
    launcher_parity_picture,
    loss_match,
    loss_match_gate,
    loss_match_picture,
    tier_for,
)
from gates.reading.runs import read_launcher_parity, read_loss_match
from judge_trees import Tree
from params.identity import config_identity

LOSS_MATCH = {
    "max_rel": 1e-3,
    "cpu": {"first_step_rtol": 1e-5, "prefix_steps": None, "final_val_atol": 0.01},
    "cuda": {"first_step_rtol": 1e-5, "prefix_steps": 2, "final_val_atol": 0.01},
    "mps": {"first_step_rtol": 1e-5, "prefix_steps": 10, "final_val_atol": 0.01},
}
THRESHOLDS = {"loss_match": LOSS_MATCH, "launcher_parity": {"max_rel": 5e-4}}
CONFIG = {
    "seed": 1,
    "model": {"vocab_size": 300, "dim": 8},
    "train": {"steps": 4, "eval_every": 2, "lr": 0.1},
}
RUNRECORD = {"recorder": "runrecord/1"}
NOT_RECORDED = (
    "not recorded: runrecord did not see the model, so the masks drawn are unknown (RunRecorder(..., "
    "model=model) seeds them per sample and records them)"
)


def record(launcher: str = "single", world: int = 1, **changes) -> dict:
    """A run's metrics.json as the gates read it (consistent with itself: expect.run_problems is empty)."""
    m = {
        "launcher": launcher,
        "world": world,
        "device": "cpu",
        "precision": "fp32",
        "config": copy.deepcopy(CONFIG),
        "config_hash": config_identity(CONFIG),
        "steps": 4,
        "train_loss": [4.0, 3.5, 3.0, 2.5],
        "grad_norm": [2.0] * 4,
        "lr": [0.1] * 4,
        "samples": {"count": [8] * 4, "hash_sum": [100, 101, 102, 103], "dropout_hash_sum": [7, 8, 9, 10]},
        "eval": [{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.5}, {"step": 4, "loss": 2.0}],
        "final_val_loss": 2.0,
        "n_params": 1000,
        "cross_rank": {
            "max_abs_diff": 0.0,
            "per_rank": [{"rank": r, "max_abs_diff": 0.0, "param_sum": 12.5} for r in range(world)],
        },
        "eval_mode_steps": [],
        "determinism": {},
    }
    m.update(changes)
    return m


def foreign(m: dict, dropout_sums: list[int] | None = None, dropout: dict | None = None) -> dict:
    """`m` as runrecord writes it: it names itself; its dropout section only when it saw the model."""
    m = copy.deepcopy(m)
    m["determinism"] = dict(RUNRECORD)
    if dropout_sums is not None:
        m["samples"]["dropout_hash_sum"] = dropout_sums
    if dropout is not None:
        m["dropout"] = dropout
    return m


# -- how the dropout masks were recorded ----------------------------------------------------------------


def test_dropout_mode_of_each_recorder() -> None:
    assert dropout_mode(record()) == "xtrain"
    assert dropout_mode(record(samples={"count": [8], "hash_sum": [1], "dropout_hash_sum": [0]})) == "xtrain"
    assert dropout_mode(foreign(record(), dropout={"masks": "seeded"})) == "seeded"
    assert dropout_mode(foreign(record(), [0, 0, 0, 0], {"masks": "off"})) == "off"
    assert dropout_mode(foreign(record(), [0, 0, 3, 0])) == "given"
    assert dropout_mode(foreign(record(), [0, 0, 0, 0])) is None


@pytest.mark.parametrize("unseen", ["single", "ddp", "both"])
def test_masks_a_recorder_did_not_see_are_not_applied(unseen: str) -> None:
    s, d = record(), record("thread", 2)
    if unseen in ("single", "both"):
        s = foreign(s, [0, 0, 0, 0])
    if unseen in ("ddp", "both"):
        d = foreign(d, [0, 0, 0, 0])
    c = check_dropout(s, d)
    assert (c.name, c.ok, c.applied, c.detail) == ("dropout masks", True, False, NOT_RECORDED)


def test_dropout_switched_off_on_both_sides_is_not_applied() -> None:
    off = {"masks": "off", "modules": 3, "p": [0.1, 0.25]}
    s = foreign(record(), [0, 0, 0, 0], off)
    c = check_dropout(s, foreign(record("thread", 2), [0, 0, 0, 0], {"masks": "off"}))
    assert (c.name, c.ok, c.applied) == ("dropout masks", True, False)
    assert c.detail == (
        "dropout switched off for these runs (runrecord dropout='off': 3 dropouts at p 0.1, 0.25 set to 0): "
        "no masks to compare"
    )
    s["dropout"]["p"] = []
    assert "(runrecord dropout='off': 3 dropouts at p - set to 0)" in check_dropout(s, s).detail


@pytest.mark.parametrize("off", ["single", "ddp"])
def test_dropout_off_on_one_side_only_fails(off: str) -> None:
    s = foreign(record(), dropout={"masks": "off" if off == "single" else "seeded"})
    d = foreign(record("thread", 2), dropout={"masks": "off" if off == "ddp" else "seeded"})
    c = check_dropout(s, d, ref="thread")
    assert (c.name, c.ok, c.applied) == ("dropout masks", False, True)
    other = {"single": ("off", "seeded"), "ddp": ("seeded", "off")}[off]
    assert c.detail == (
        f"the runs' dropout differs: thread {other[0]}, the other {other[1]} (runrecord dropout=): compare "
        "runs of one setting"
    )


@pytest.mark.parametrize(
    ("mode", "drawn"),
    [
        ("none", "no masks, like single: the model has no dropout with p > 0 (runrecord saw it)"),
        ("seeded", "no masks, like single, though the model has dropout: were both in eval mode?"),
    ],
)
def test_no_masks_drawn_say_what_runrecord_saw(mode: str, drawn: str) -> None:
    s = foreign(record(), [0, 0, 0, 0], {"masks": mode})
    c = check_dropout(s, foreign(record("thread", 2), [0, 0, 0, 0], {"masks": mode}))
    assert (c.ok, c.applied, c.detail) == (True, True, f"4 steps drew {drawn}")


def test_masks_given_by_runrecord_are_compared() -> None:
    s = foreign(record(), [5, 0, 6, 0])
    c = check_dropout(s, copy.deepcopy(s))
    assert (c.ok, c.applied, c.detail) == (True, True, "4 steps drew the same masks as single")


@pytest.mark.parametrize("which", ["single", "ddp"])
def test_a_foreign_recorders_failures_name_the_users_side(which: str) -> None:
    s, d = record(), record("thread", 2)
    if which == "single":
        s = foreign(s)
    else:
        d = foreign(d)
    d["samples"]["dropout_hash_sum"][2] = 0
    d["samples"]["hash_sum"][1] = 5
    c = check_dropout(s, d)
    assert (c.ok, c.detail) == (
        False,
        "dropout differs at 1 of 4 steps, first step 2: the ranks drew none (hash sum 0 vs 9): your samples() "
        "indices must be the batch rows' dataset indices, in row order, before the forward; or a rank "
        "trained with dropout off (eval mode)",
    )
    c = check_samples(s, d)
    assert (c.ok, c.detail) == (
        False,
        "samples differ at 1 of 4 steps, first step 1: 8 rows but other samples (hash sum 5 vs 101): the "
        "ranks' shards overlap or miss rows (your sampler: each rank must read its own part of the step's "
        "global batch, together all of it (DistributedSampler, or batch[rank::world]), and samples() its "
        "dataset indices)",
    )


# -- which side a failure of the numbers points at ----------------------------------------------------------

LOSS = (
    "the logged training loss differs while the gradient norms and the validation losses agree: a logging "
    "bug, not a training bug: the loss reduction over ranks (xtrain/core/train.py)"
)
EVAL = (
    "training agrees (train losses and gradient norms) and only the validation loss differs: the "
    "evaluation (xtrain/core/train.py evaluate)"
)
LOSSES = (
    "the train and validation losses differ while the gradient norms agree: the loss reduction and the "
    "evaluation (xtrain/core/train.py)"
)


def gradient(step: int) -> str:
    return (
        f"the gradients differ (grad_norm first out at step {step}): the gradient reduction or sharding "
        "(xtrain/core/comm.py, xtrain/core/data.py)"
    )


def case_of(device: str = "cpu", **edits) -> str:
    """failure_case of a DDP run whose series differ from single's by `edits` ({key: {index: factor}})."""
    s = record(device=device)
    d = record("thread", 2, device=device)
    for key, changes in edits.items():
        for i, factor in changes.items():
            if key == "eval":
                d["eval"][i]["loss"] *= factor
            elif key == "final_val_loss":
                d[key] *= factor
            else:
                d[key][i] *= factor
    return failure_case(s, d, tier_for(LOSS_MATCH, device))


def test_a_train_loss_alone_points_at_the_logging() -> None:
    assert case_of(train_loss={2: 1.01}) == LOSS
    assert case_of(train_loss={0: 1 + 1e-4}) == LOSS  # within the prefix bound, not step 0's


def test_an_eval_alone_points_at_the_eval_set() -> None:
    assert case_of(eval={1: 1.01}) == EVAL  # the eval at step 2
    assert case_of(eval={0: 1 + 1e-4}) == EVAL  # val loss at step 0: within max_rel, not step 0's bound
    assert case_of(final_val_loss={0: 1.25}) == EVAL  # the end alone


def test_train_and_val_losses_without_the_gradients() -> None:
    assert case_of(train_loss={1: 1.01}, final_val_loss={0: 1.25}) == LOSSES
    assert case_of(train_loss={1: 1.01}, eval={1: 1.01}) == LOSSES


def test_the_gradients_name_their_first_step_out() -> None:
    assert case_of(grad_norm={2: 1.01}) == gradient(2)
    assert case_of(grad_norm={2: 1.01, 3: 1.01}, train_loss={1: 1.01}) == gradient(2)
    # grad_norm[0] beyond step 0's bound but within max_rel: out of the first-step check only
    assert case_of(grad_norm={0: 1 + 1e-4}) == gradient(0)


def test_the_first_step_compares_step_0_with_step_0() -> None:
    s, d = record(), record("thread", 2)
    s["grad_norm"] = [2.0, 2.0002, 2.0002, 2.0002]
    d["grad_norm"] = [2.0002, 2.0, 2.0002, 2.0002]  # step 1 rel 1e-4: within max_rel
    assert failure_case(s, d, tier_for(LOSS_MATCH, "cpu")) == gradient(0)


def test_only_the_tiers_prefix_is_asked() -> None:
    # cuda: a 2-step prefix; a gradient out at step 3 is past it
    assert case_of("cuda", grad_norm={3: 1.01}, train_loss={1: 1.01}) == LOSS
    assert case_of("cuda", grad_norm={1: 1.01}, train_loss={1: 1.01}) == gradient(1)
    # mps: a 10-step prefix of a 4-step run is the whole run
    assert case_of("mps", grad_norm={3: 1.01}) == gradient(3)


@pytest.mark.parametrize("which", ["single", "ddp"])
def test_a_foreign_recorders_case_names_the_users_side(which: str) -> None:
    s, d = record(), record("thread", 2)
    d["grad_norm"][1] *= 1.01
    if which == "single":
        s = foreign(s)
    else:
        d = foreign(d)
    assert failure_case(s, d, tier_for(LOSS_MATCH, "cpu")) == (
        "the gradients differ (grad_norm first out at step 1): your gradient all-reduce (the mean over "
        "ranks), your init (the same weights on every rank), your lr schedule (stepped once per step on "
        "every rank) or your dropout (RunRecorder(model=...) seeds it per sample)"
    )
    d["grad_norm"][1] = s["grad_norm"][1]
    d["train_loss"][3] *= 1.01
    assert failure_case(s, d, tier_for(LOSS_MATCH, "cpu")).endswith(
        ": your loss logging: log the mean over ranks (all_reduce(loss) / world), not one rank's"
    )


@pytest.mark.parametrize(
    ("ratio", "near"),
    [(2.0, True), (1.995, True), (4.009, True), (2.989, False), (1.0, False), (1.004, False), (2.5, False),
     (1e8 + 0.005, True), (1e8 + 0.02, False), (-2.0, False), (math.inf, False), (math.nan, False)],
)  # fmt: skip
def test_a_whole_multiple_is_within_0_01_of_2_or_more(ratio: float, near: bool) -> None:
    assert _near_integer_ratio(ratio) is near


# -- the verdict: checks not applied, and which Next ----------------------------------------------------------


def test_a_check_not_applied_is_named_in_a_pass_and_in_a_fail() -> None:
    s = foreign(record(), [0, 0, 0, 0])
    d = foreign(record("thread", 2), [0, 0, 0, 0])
    o = equivalence(s, d, "thread", LOSS_MATCH)
    assert (o.status, o.not_applied) == ("pass", {"dropout masks": NOT_RECORDED})
    assert o.message == (
        "world 2 vs 1: 4 steps consumed exactly the single rows; dropout masks: not applied: "
        f"{NOT_RECORDED}; loss[0] rel 0, grad_norm[0] rel 0, val_loss@0 rel 0; max rel 0 at step 0 over 4 "
        "of 4 steps and 3 evals; final val 2.00000 vs single 2.00000 (diff +0.00e+00, tolerance 0.01); the "
        "same rows per step, lr per step, parameter count as single (tokens per step, parameter shapes, "
        "initial parameters: not recorded)"
    )
    d["final_val_loss"] = 2.5
    o = equivalence(s, d, "thread", LOSS_MATCH)
    assert (o.status, o.not_applied) == ("fail", {"dropout masks": NOT_RECORDED})
    assert o.message.startswith("world 2 vs 1: end: final val 2.50000") and "not applied" not in o.message


def test_a_first_step_failure_says_which_side_next() -> None:
    d = record("thread", 2)
    d["grad_norm"][0] *= 1 + 1e-4
    o = equivalence(record(), d, "thread", LOSS_MATCH)
    assert o.status == "fail" and o.not_applied == {}
    assert o.message == (
        "world 2 vs 1: first step: step 0 differs beyond summation order (rel <= 1e-05): grad_norm[0] 2.0002 vs "
        "single 2; loss[0] rel 0, grad_norm[0] rel 0.0001, val_loss@0 rel 0. Next: "
        f"{gradient(0)}; compare runs/single/loss.csv with runs/thread/loss.csv"
    )


def test_a_dropout_failure_points_at_the_notes() -> None:
    d = record("thread", 2)
    d["samples"]["dropout_hash_sum"][3] = 1
    o = equivalence(record(), d, "proc", LOSS_MATCH)
    assert o.status == "fail" and o.message.endswith(
        "(xtrain/core/model.py Dropout, xtrain/core/train.py). Next: see docs/ddp-gate.md; compare "
        "runs/single/loss.csv with runs/proc/loss.csv"
    )


# -- the gate entries on an artifact tree ----------------------------------------------------------------------

STAGE = {"single": "train_single", "thread": "train@thread", "proc": "train@proc"}


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch) -> Tree:
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    return Tree(tmp_path, params=None)


def write(t: Tree, **runs: dict) -> None:
    for run, m in runs.items():
        path = t.root / "runs" / run / "metrics.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(m))
        t.record_out(STAGE[run], f"runs/{run}")


def test_loss_match_reads_single_and_the_launchers_run(tree: Tree) -> None:
    thread = record("thread", 2)
    thread["train_loss"][1] *= 1.02
    write(tree, single=record(), thread=thread, proc=record("proc", 2))
    a = tree.artifacts()
    o = loss_match(read_loss_match(a, "thread"), LOSS_MATCH)
    assert o.status == "fail" and o.message.startswith("world 2 vs 1: prefix: first step over 0.001: step 1 ")
    assert o.message.endswith(f"Next: {LOSS}; compare runs/single/loss.csv with runs/thread/loss.csv")
    assert sorted(a.read) == ["runs/single/metrics.json", "runs/thread/metrics.json"]
    assert loss_match(read_loss_match(tree.artifacts(), "proc"), LOSS_MATCH).status == "pass"


def test_loss_match_refuses_a_record_that_contradicts_itself(tree: Tree) -> None:
    write(tree, single=record(), thread=record("thread", 2, steps=5))
    o = loss_match(read_loss_match(tree.artifacts(), "thread"), LOSS_MATCH)
    assert (o.status, o.measured, o.threshold) == ("fail", None, 1e-3)
    assert o.message.startswith("runs/thread/metrics.json: ") and o.message.endswith(
        ". Refusing to judge runs whose records contradict themselves: rerun them (dvc repro)"
    )


@pytest.mark.parametrize("run", ["single", "thread"])
def test_loss_match_names_the_run_trained_in_eval_mode(tree: Tree, run: str) -> None:
    runs = {"single": record(), "thread": record("thread", 2)}
    runs[run]["eval_mode_steps"] = [1, 2]
    write(tree, **runs)
    o = loss_match(read_loss_match(tree.artifacts(), "thread"), LOSS_MATCH)
    assert o.status == "fail" and o.message.startswith(f"model in eval mode at training steps 1..2 on {run} ")
    assert "The comparison itself: pass: world 2 vs 1: 4 steps consumed exactly the single rows" in o.message


def test_launcher_parity_reads_thread_and_proc(tree: Tree) -> None:
    proc = record("proc", 2)
    proc["train_loss"][2] *= 1 + 7e-4
    write(tree, single=record(), thread=record("thread", 2), proc=proc)
    a = tree.artifacts()
    o = launcher_parity(read_launcher_parity(a), LOSS_MATCH, 5e-4)
    assert o.status == "fail" and o.message.startswith(
        "world 2 vs 2: prefix: first step over 0.0005: step 2 (thread 3, proc 3.0021, rel 0.0007)"
    )
    assert o.message.endswith("; compare runs/thread/loss.csv with runs/proc/loss.csv")
    assert sorted(a.read) == ["runs/proc/metrics.json", "runs/thread/metrics.json"]
    assert launcher_parity(read_launcher_parity(tree.artifacts()), LOSS_MATCH, 1e-3).status == "pass"


@pytest.mark.parametrize("run", ["thread", "proc"])
def test_launcher_parity_refuses_or_names_eval_mode(tree: Tree, run: str) -> None:
    runs = {"thread": record("thread", 2), "proc": record("proc", 2)}
    runs[run]["eval_mode_steps"] = [3]
    write(tree, **runs)
    o = launcher_parity(read_launcher_parity(tree.artifacts()), LOSS_MATCH, 5e-4)
    assert o.status == "fail" and o.message.startswith(f"model in eval mode at training steps 3 on {run} ")
    runs[run]["steps"] = 5
    write(tree, **runs)
    o = launcher_parity(read_launcher_parity(tree.artifacts()), LOSS_MATCH, 5e-4)
    assert (o.measured, o.threshold) == (None, 5e-4) and o.message.startswith(f"runs/{run}/metrics.json: ")


def unit_text(g) -> str:
    """A gate unit as tests/unit/test_judge_catalogue_text.py renders it, for the pinned params."""
    from conftest import PARAMS
    from params.config import load_params

    t = load_params(PARAMS, ["profile=cpu"]).thresholds
    return "\n".join(
        [
            f"[{g.id}]",
            f"checks: {g.checks}",
            f"threshold: {g.threshold(t)}",
            f"why: {g.why}",
            f"investigate: {g.investigate}",
            f"takes: {', '.join(g.takes)}",
            f"runs: {callable(g.run)}, picture: {callable(g.picture)}",
        ]
    )


@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_the_gate_unit_is_the_recorded_text_and_runs_its_launcher(tree: Tree, launcher: str) -> None:
    g = loss_match_gate(launcher)
    recorded = (Path(__file__).parents[1] / "judge_catalogue.txt").read_text().split("\n\n")
    assert unit_text(g) in recorded
    other = record(launcher, 2)
    other["final_val_loss"] = 2.5
    write(tree, single=record(), **{launcher: other})
    o = g.run(tree.artifacts(), THRESHOLDS)
    assert o.status == "fail" and o.message.startswith(
        "world 2 vs 1: end: final val 2.50000 vs single 2.00000"
    )
    assert g.draw(tree.artifacts(), THRESHOLDS).caption.startswith(
        "Relative difference of the training loss (dots) and eval loss (squares) per step over every step"
    )
    assert unit_text(LAUNCHER_PARITY) in recorded


# -- the pictures -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "span"), [("cpu", "every step"), ("cuda", "the first 2 steps"), ("xla", "every step")]
)
def test_the_loss_match_picture_draws_the_tiers_prefix(tree: Tree, device: str, span: str) -> None:
    thread = record("thread", 2, device=device)
    thread["train_loss"][1] *= 1.01
    write(tree, single=record(device=device), thread=thread)
    pic = loss_match_picture(read_loss_match(tree.artifacts(), "thread"), THRESHOLDS)
    assert f"thread (world 2) vs single device: relative loss difference, {span}" in pic.html
    assert pic.caption == (
        f"Relative difference of the training loss (dots) and eval loss (squares) per step over {span} "
        "(the gate's prefix), log scale, dimensionless; exact agreement is drawn at 1e-12. Pass: every point "
        "below the dashed line (max rel 0.001); the gate also checks the samples, step 0 and the final val "
        "loss (its message). First step over the line: 1."
    )


def test_the_loss_match_picture_of_an_agreeing_run_names_no_step(tree: Tree) -> None:
    proc = record("proc", 2, device="cuda")
    proc["train_loss"][3] *= 1.01  # past the cuda tier's 2-step prefix: not drawn
    write(tree, single=record(device="cuda"), proc=proc)
    pic = loss_match_picture(read_loss_match(tree.artifacts(), "proc"), THRESHOLDS)
    assert pic.caption.endswith("the final val loss (its message).")
    assert "max rel 0.001" in pic.html and "first over" not in pic.html
    assert ">|proc − single| / |single|<" in pic.html


@pytest.mark.parametrize(
    ("device", "span", "bad"),
    [
        ("cpu", "every step", 3),
        ("cuda", "the first 2 steps (the tier's prefix)", None),
        ("xla", "every step", 3),
    ],
)
def test_the_parity_picture_marks_the_judged_steps(tree: Tree, device: str, span: str, bad) -> None:
    proc = record("proc", 2, device=device)
    proc["train_loss"][3] *= 1 + 7e-4  # over launcher_parity's 5e-4, under loss_match's 1e-3
    write(tree, thread=record("thread", 2, device=device), proc=proc)
    pic = launcher_parity_picture(read_launcher_parity(tree.artifacts()), THRESHOLDS)
    where = f" First step over: {bad}." if bad is not None else ""
    assert pic.caption == (
        "Top: both trajectories (loss in nats per token), judged steps over the limit marked ×. Bottom: "
        f"their relative difference over {span} (log scale; 0 drawn at 1e-12). Pass: every point below the "
        "dashed line (max rel 0.0005); the gate also checks samples, dropout masks, step 0 and the final val "
        f"loss exactly as loss_match does (its message).{where}"
    )
    assert "torchrun (proc) vs thread-per-rank training loss, world 2" in pic.html
    assert ("differs" in pic.html) is (bad is not None)
    assert "max rel 0.0005" in pic.html and ">train loss (nats/token)<" in pic.html
    # the overlay's legend and the difference panel's axis name both runs
    assert (
        ">thread<" in pic.html
        and ">proc (torchrun)<" in pic.html
        and ">|proc − thread| / |thread|<" in pic.html
    )
