"""gates/judges/ddp.py under mutation (docs/judge-mutation.md): the DDP equivalence checks as pure functions.

loss_match and launcher_parity judge two metrics dicts; the gate tree (tests/pipeline/test_gates.py) runs them
on real runs. Here each check gets hand-made records that differ in exactly one way, and its verdict
and one-line explanation are pinned: which step, which numbers, which hint.
"""

from __future__ import annotations

import copy
import math

import pytest

from gates.judges.ddp import (
    Tier,
    _near_integer_ratio,
    check_dropout,
    check_end,
    check_first_step,
    check_prefix,
    check_samples,
    describe_tiers,
    equivalence,
    shape_problem,
    tier_for,
)
from gates.judges.tolerance import Approx

LOSS_MATCH = {
    "max_rel": 1e-3,
    "cpu": {"first_step_rtol": 1e-5, "prefix_steps": None, "final_val_atol": 0.01},
    "cuda": {"first_step_rtol": 1e-4, "prefix_steps": 3, "final_val_atol": 0.08},
}


def run(steps: int = 4, world: int = 1, **changes) -> dict:
    m = {
        "config_hash": "h1",
        "config": {"train": {"lr": 0.1}},
        "steps": steps,
        "world": world,
        "device": "cpu",
        "precision": "fp32",
        "tokens_per_step": 256,
        "n_params": 1234,
        "param_shapes_digest": "5" * 64,
        "init_param_digest": "a" * 64,
        "train_loss": [4.0 - 0.5 * i for i in range(steps)],
        "grad_norm": [2.0 + i for i in range(steps)],
        "lr": [1e-3 * (i + 1) for i in range(steps)],
        "samples": {
            "count": [8] * steps,
            "hash_sum": [100 + i for i in range(steps)],
            "dropout_hash_sum": [7 + i for i in range(steps)],
        },
        "eval": [{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.5}, {"step": steps, "loss": 2.0}],
        "final_val_loss": 2.0,
        "eval_mode_steps": [],
    }
    m.update(changes)
    return m


def twin(m: dict, **changes) -> dict:
    d = copy.deepcopy(m)
    d["world"] = 2
    d.update(changes)
    return d


# -- shape_problem ------------------------------------------------------------------------------------


def test_identical_shapes_have_no_problem() -> None:
    assert shape_problem(run(), twin(run()), "thread") is None


def test_another_config_alone_is_no_shape_problem() -> None:
    """The configs' text is check_observed's information, never a refusal (issue 54 item 1)."""
    s = run()
    d = twin(s, config_hash="h2", config={"train": {"lr": 0.2, "out_dir": "out-thread"}})
    assert shape_problem(s, d, "thread") is None


def test_another_length_is_refused_naming_the_config_keys() -> None:
    s = run(steps=4)
    d = twin(run(steps=6), config_hash="h2", config={"train": {"lr": 0.1, "steps": 6}})
    assert shape_problem(s, d, "thread") == (
        "runs/thread trained 6 steps, runs/single 4 (config: train.steps 6 vs '<absent>'): train both as long"
    )
    assert shape_problem(s, twin(run(steps=6)), "thread") == (
        "runs/thread trained 6 steps, runs/single 4: train both as long"
    )


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("train_loss", ("train_loss",)),
        ("grad_norm", ("grad_norm",)),
        ("lr", ("lr",)),
        ("samples.count", ("samples", "count")),
        ("samples.hash_sum", ("samples", "hash_sum")),
        ("samples.dropout_hash_sum", ("samples", "dropout_hash_sum")),
    ],
)
@pytest.mark.parametrize("which", ["single", "thread"])
def test_a_series_shorter_than_its_steps_is_named(key: str, path: tuple, which: str) -> None:
    s = run()
    d = twin(s)
    m = s if which == "single" else d
    target = m
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = target[path[-1]][:3]
    assert shape_problem(s, d, "thread") == (
        f"runs/{which}/metrics.json: {key} has 3 entries for 4 steps (a resumed old run?)"
    )


@pytest.mark.parametrize(("field", "value"), [("device", "cuda"), ("precision", "bf16")])
def test_another_device_or_precision_is_named(field: str, value: str) -> None:
    s = run()
    d = twin(s, **{field: value})
    want = {"device": "cpu", "precision": "fp32", field: value}
    assert shape_problem(s, d, "thread") == (
        f"runs/thread ran on {want['device']}/{want['precision']}, runs/single on cpu/fp32"
    )


def test_parity_needs_one_world_but_single_vs_ddp_does_not() -> None:
    thread = run(world=2)
    proc = twin(thread, world=4)
    assert shape_problem(thread, proc, "proc", ref="thread") == (
        "runs/proc ran at world 4, runs/thread at world 2: set one world"
    )
    assert shape_problem(run(), proc, "proc") is None
    assert shape_problem(thread, twin(thread), "proc", ref="thread") is None


# -- samples and dropout masks --------------------------------------------------------------------------


def test_samples_equal_say_how_many_steps() -> None:
    c = check_samples(run(), twin(run()))
    assert (c.name, c.ok, c.detail) == ("samples", True, "4 steps consumed exactly the single rows")
    assert (
        check_samples(run(), twin(run()), ref="thread").detail == "4 steps consumed exactly the thread rows"
    )


def test_missing_rows_name_the_first_step_and_counts() -> None:
    d = twin(run())
    d["samples"]["count"][3] = 7
    d["samples"]["count"][1] = 6
    c = check_samples(run(), d)
    assert (c.name, c.ok) == ("samples", False)
    assert c.detail == (
        "samples differ at 2 of 4 steps, first step 1: the ranks consumed 6 rows, single 8: rows missing or "
        "duplicated (xtrain/core/data.py shard_rows, step_batch)"
    )


def test_other_rows_name_the_hash_sums() -> None:
    d = twin(run())
    d["samples"]["hash_sum"][2] = 999
    d["samples"]["count"][3] = 9
    c = check_samples(run(), d, ref="thread")
    assert c.detail == (
        "samples differ at 2 of 4 steps, first step 2: 8 rows but other samples (hash sum 999 vs 102): the "
        "ranks' shards overlap or miss rows (xtrain/core/data.py shard_rows, step_batch)"
    )


def test_dropout_masks_equal_or_absent() -> None:
    c = check_dropout(run(), twin(run()))
    assert (c.name, c.ok, c.detail) == ("dropout masks", True, "4 steps drew the same masks as single")
    none = run()
    none["samples"]["dropout_hash_sum"] = [0, 0, 0, 0]
    assert (
        check_dropout(none, twin(none), ref="thread").detail
        == "4 steps drew no masks (no dropout), like thread"
    )


@pytest.mark.parametrize(("value", "what"), [(0, "none"), (5, "other masks")])
def test_other_dropout_masks_name_the_step(value: int, what: str) -> None:
    d = twin(run())
    d["samples"]["dropout_hash_sum"][1] = value
    d["samples"]["dropout_hash_sum"][3] = value
    c = check_dropout(run(), d)
    assert (c.name, c.ok) == ("dropout masks", False)
    assert c.detail == (
        f"dropout differs at 2 of 4 steps, first step 1: the ranks drew {what} (hash sum {value} vs 8): a "
        "rank's dropout seed or global row index is out of sync, or a rank trained with dropout off "
        "(xtrain/core/model.py Dropout, xtrain/core/train.py)"
    )


# -- the first step ---------------------------------------------------------------------------------------


def test_the_first_step_within_summation_order() -> None:
    d = twin(run())
    d["train_loss"][0] = 4.0 * (1 + 5e-6)
    c = check_first_step(run(), d, Approx.relative(1e-5))
    assert (c.name, c.ok) == ("first step", True)
    assert c.detail == "loss[0] rel 5e-06, grad_norm[0] rel 0, val_loss@0 rel 0"


def test_the_first_step_without_an_eval_at_step_0_on_either_side() -> None:
    s = run(eval=[{"step": 2, "loss": 3.5}])
    assert check_first_step(s, twin(s), Approx.relative(1e-5)).detail == "loss[0] rel 0, grad_norm[0] rel 0"
    d = twin(run(), eval=[{"step": 2, "loss": 3.5}])
    assert check_first_step(run(), d, Approx.relative(1e-5)).detail == "loss[0] rel 0, grad_norm[0] rel 0"


def test_a_summed_gradient_is_named_as_a_whole_multiple() -> None:
    d = twin(run())
    d["grad_norm"][0] = 4.0  # twice single's 2.0
    c = check_first_step(run(), d, Approx.relative(1e-5), ref="thread")
    assert (c.name, c.ok) == ("first step", False)
    assert c.detail == (
        "step 0 differs beyond summation order (rel <= 1e-05): grad_norm[0] 4 vs thread 2; loss[0] rel 0, "
        "grad_norm[0] rel 1, val_loss@0 rel 0. a whole multiple: gradients summed instead of averaged? "
        "(summed over ranks, or the loss not divided by the accumulation steps before backward)"
    )


@pytest.mark.parametrize(
    ("field", "value", "worst"),
    [("grad_norm", 5.0, "grad_norm[0] 5 vs single 2"), ("train_loss", 4.4, "loss[0] 4.4 vs single 4")],
)
def test_any_other_first_step_difference_points_at_the_reduction(
    field: str, value: float, worst: str
) -> None:
    d = twin(run())
    d[field][0] = value
    c = check_first_step(run(), d, Approx.relative(1e-5))
    assert not c.ok and c.detail.startswith(
        f"step 0 differs beyond summation order (rel <= 1e-05): {worst}; "
    )
    hint = (
        ". the gradient reduction, the sharding or dropout changed"  # main after a32e5d3 names no hint here
    )
    low = c.detail.lower()
    assert c.detail.endswith(hint) or ("gradient reduction" not in low and "whole multiple" not in low)
    assert "val_loss@0 rel 0" in c.detail


def test_a_zero_reference_grad_norm_is_no_multiple() -> None:
    s = run()
    s["grad_norm"][0] = 0.0
    d = twin(s)
    d["grad_norm"][0] = 2.0
    detail = check_first_step(s, d, Approx.relative(1e-5)).detail
    assert "whole multiple" not in detail and "grad_norm[0] 2 vs single 0" in detail


def test_a_val_loss_at_step_0_alone_fails_the_first_step() -> None:
    d = twin(run(), eval=[{"step": 0, "loss": 4.6}, {"step": 2, "loss": 3.5}])
    c = check_first_step(run(), d, Approx.relative(1e-5))
    assert not c.ok and "val_loss@0 4.6 vs single 4.5" in c.detail


@pytest.mark.parametrize(
    ("ratio", "near"),
    [(2.0, True), (2.009, True), (3.991, True), (2.011, False), (1.5, False), (1.0, False), (1.51, False),
     (math.inf, False), (math.nan, False), (-2.0, False)],
)  # fmt: skip
def test_near_integer_ratio(ratio: float, near: bool) -> None:
    assert _near_integer_ratio(ratio) is near


# -- the prefix and the end -----------------------------------------------------------------------------


def test_the_prefix_passes_naming_its_worst_step_and_scope() -> None:
    d = twin(run())
    d["train_loss"][2] = 3.0 * (1 + 4e-4)
    d["train_loss"][1] = 3.5 * (1 + 1e-4)
    c, worst = check_prefix(run(), d, None, Approx.relative(1e-3), "thread")
    assert (c.name, c.ok) == ("prefix", True) and worst == pytest.approx(4e-4)
    assert c.detail == "max rel 0.0004 at step 2 over 4 of 4 steps and 3 evals"


def test_the_prefix_judges_only_its_steps_and_the_evals_inside_them() -> None:
    d = twin(run())
    d["train_loss"][3] = 9.0  # after the prefix
    d["eval"][2] = {"step": 4, "loss": 9.0}  # the final eval, after it too
    c, worst = check_prefix(run(), d, 2, Approx.relative(1e-3), "thread")
    assert c.ok and worst == 0.0
    assert c.detail == "max rel 0 at step 0 over 2 of 4 steps and 2 evals"
    c, _ = check_prefix(run(), d, 10, Approx.relative(1e-3), "thread")
    assert not c.ok and "over 4 of 4 steps and 3 evals" in c.detail


def test_the_prefix_names_the_first_train_step_over_the_bound() -> None:
    d = twin(run())
    d["train_loss"][3] = 2.5 * 1.01
    d["train_loss"][1] = 3.5 * 1.02
    c, worst = check_prefix(run(), d, None, Approx.relative(1e-3), "proc", ref="thread")
    assert (c.ok, worst) == (False, pytest.approx(0.02))
    assert c.detail == (
        "first step over 0.001: step 1 (thread 3.5, proc 3.57, rel 0.02); max rel 0.02 over 4 of 4 steps "
        "and 3 evals"
    )


def test_the_prefix_names_the_first_eval_over_the_bound() -> None:
    d = twin(run())
    d["eval"][1] = {"step": 2, "loss": 3.5 * 1.05}
    d["eval"].append({"step": 7, "loss": 1.0})  # an eval single did not run is not compared
    c, worst = check_prefix(run(), d, None, Approx.relative(1e-3), "thread")
    assert (c.ok, worst) == (False, pytest.approx(0.05))
    assert c.detail == "first eval over 0.001: step 2 (rel 0.05); max rel 0.05 over 4 of 4 steps and 3 evals"


def test_the_end_within_or_beyond_its_bound() -> None:
    c = check_end(run(), twin(run(), final_val_loss=2.005), Approx.absolute(0.01))
    assert (c.name, c.ok) == ("end", True)
    assert c.detail == "final val 2.00500 vs single 2.00000 (diff +5.00e-03, tolerance 0.01)"
    c = check_end(run(), twin(run(), final_val_loss=1.98), Approx.absolute(0.01), ref="thread")
    assert not c.ok and c.detail == "final val 1.98000 vs thread 2.00000 (diff -2.00e-02, tolerance 0.01)"
    c = check_end(run(), twin(run(), final_val_loss=math.nan), Approx.absolute(0.01))
    assert not c.ok and "(diff +inf, tolerance 0.01)" in c.detail


@pytest.mark.parametrize("side", ["single", "ddp"])
def test_no_final_val_loss_leaves_the_end_unchecked_and_fails(side: str) -> None:
    s, d = run(), twin(run())
    (s if side == "single" else d)["final_val_loss"] = None
    c = check_end(s, d, Approx.absolute(0.01))
    assert (c.name, c.ok) == ("end", False)
    assert c.detail == "no final validation loss (train.eval_every: 0): the end of the run is unchecked"


# -- the verdict --------------------------------------------------------------------------------------


def test_tiers_come_from_params_per_device() -> None:
    assert tier_for(LOSS_MATCH, "cpu") == Tier(
        "cpu", Approx.relative(1e-5), None, Approx.relative(1e-3), Approx.absolute(0.01)
    )
    assert tier_for(LOSS_MATCH, "cuda").prefix_steps == 3 and tier_for(LOSS_MATCH, "mps") is None
    assert tier_for(LOSS_MATCH, "cpu").describe(4) == (
        "samples exact; step 0 rel <= 1e-05; max rel <= 0.001 over 4 of 4 steps; |final val diff| <= 0.01 "
        "(cpu tier)"
    )
    assert tier_for(LOSS_MATCH, "cuda").describe(12) == (
        "samples exact; step 0 rel <= 0.0001; max rel <= 0.001 over 3 of 12 steps; |final val diff| <= 0.08 "
        "(cuda tier)"
    )
    assert (
        tier_for(LOSS_MATCH, "cuda")
        .describe(2)
        .endswith("over 2 of 2 steps; |final val diff| <= 0.08 (cuda tier)")
    )


def test_describe_tiers_lists_every_configured_tier() -> None:
    assert describe_tiers(LOSS_MATCH) == (
        "samples and dropout masks exact; cpu: step 0 rel <= 1e-05, max rel <= 0.001 over every step, final "
        "val +- 0.01; cuda: step 0 rel <= 0.0001, max rel <= 0.001 over 3 steps, final val +- 0.08"
    )
    assert describe_tiers({"max_rel": 1e-3}) == "samples and dropout masks exact; no tier configured"


def test_equivalent_runs_pass_with_every_check_in_the_message() -> None:
    s = run()
    o = equivalence(s, twin(s), "thread", LOSS_MATCH)
    assert (o.status, o.measured) == ("pass", 0.0)
    assert o.threshold == tier_for(LOSS_MATCH, "cpu").describe(4)
    assert o.message == (
        "world 2 vs 1: 4 steps consumed exactly the single rows; 4 steps drew the same masks as single; "
        "loss[0] rel 0, grad_norm[0] rel 0, val_loss@0 rel 0; max rel 0 at step 0 over 4 of 4 steps and 3 "
        "evals; final val 2.00000 vs single 2.00000 (diff +0.00e+00, tolerance 0.01); the same rows per step, tokens per step, lr per step, parameter count, parameter shapes, initial parameters as single"
    )


def test_runs_that_cannot_be_compared_fail_with_the_reason() -> None:
    s = run()
    o = equivalence(s, twin(s, device="cuda"), "thread", LOSS_MATCH)
    assert (o.status, o.measured, o.threshold) == ("fail", None, 1e-3)
    assert o.message == "runs/thread ran on cuda/fp32, runs/single on cpu/fp32"


def test_a_device_without_a_tier_fails_naming_the_params_key() -> None:
    s = run(device="mps")
    o = equivalence(s, twin(s), "thread", LOSS_MATCH)
    assert (o.status, o.measured, o.threshold) == ("fail", None, 1e-3)
    assert o.message == "params.yaml gates.loss_match.mps: missing: no tolerance tier for runs on mps"


def test_a_late_divergence_alone_says_so() -> None:
    s = run()
    o = equivalence(s, twin(s, final_val_loss=2.5), "thread", LOSS_MATCH)
    assert o.status == "fail" and o.measured == 0.0
    assert o.message == (
        "world 2 vs 1: end: final val 2.50000 vs single 2.00000 (diff +5.00e-01, tolerance 0.01). Next: a "
        "late divergence only (exact checks passed): rerun with other seeds; a real bug or a tier too tight "
        "for this profile (docs/ddp-gate.md)"
    )


def test_every_failing_check_is_named_with_the_files_to_compare() -> None:
    s = run(world=2)
    d = twin(s, final_val_loss=2.5)
    d["samples"]["count"][0] = 7
    d["train_loss"][1] = 9.0
    o = equivalence(s, d, "proc", LOSS_MATCH, ref="thread")
    assert o.status == "fail" and o.measured == pytest.approx(9.0 / 3.5 - 1)
    assert o.message.startswith("world 2 vs 2: samples: samples differ at 1 of 4 steps, first step 0: ")
    assert "; prefix: first step over 0.001: step 1 (thread 3.5, proc 9, rel 1.57)" in o.message
    assert "; end: final val 2.50000 vs thread 2.00000" in o.message and "first step:" not in o.message
    assert o.message.endswith(
        ". Next: see docs/ddp-gate.md; compare runs/thread/loss.csv with runs/proc/loss.csv"
    )


# -- the gate entries: which records they compare, refusals and train mode first ----------------------


def pair(runs: dict, problems: dict | None = None, describes: bool = False):
    """The records gates/reading/runs.py reads for these runs, in this order (no tree)."""
    from gates.reading.runs import Run, Runs

    return Runs(tuple(Run(k, m, tuple((problems or {}).get(k, ()))) for k, m in runs.items()), describes)


def test_loss_match_compares_the_launcher_with_single() -> None:
    from gates.judges.ddp import loss_match

    s = run()
    o = loss_match(pair({"single": s, "thread": twin(s)}), LOSS_MATCH)
    assert o.status == "pass" and o.message.startswith(
        "world 2 vs 1: 4 steps consumed exactly the single rows"
    )
    assert o.threshold == tier_for(LOSS_MATCH, "cpu").describe(4)
    d = twin(s, eval_mode_steps=[1])
    o = loss_match(pair({"single": s, "thread": d}), LOSS_MATCH)
    assert o.status == "fail" and o.message.startswith("model in eval mode at training steps 1 on thread")
    assert "The comparison itself: pass: world 2 vs 1" in o.message
    d = twin(s)
    d["train_loss"][2] = 3.0 * (1 + 2e-3)
    o = loss_match(pair({"single": s, "proc": d}), LOSS_MATCH)  # the run's name is the records'
    assert o.status == "fail" and "prefix: first step over 0.001: step 2 (single 3, proc 3.006" in o.message


def test_a_refused_pair_is_the_verdict() -> None:
    from gates.judges.ddp import launcher_parity, loss_match

    bad = {"single": ["s bad"], "thread": ["t bad"], "proc": ["p bad"]}
    d = twin(run())
    d["train_loss"][0] = 9.0  # refused before any number is compared
    o = loss_match(pair({"single": run(), "thread": d}, bad), LOSS_MATCH)
    assert (o.status, o.measured, o.threshold) == ("fail", None, 1e-3)
    assert o.message == (
        "s bad; t bad. Refusing to judge runs whose records contradict themselves: rerun them (dvc repro)"
    )
    o = launcher_parity(pair({"thread": run(world=2), "proc": d}, bad, describes=True), LOSS_MATCH, 5e-4)
    assert (o.status, o.measured, o.threshold) == ("fail", None, 5e-4)
    assert o.message == (
        "t bad; p bad. Refusing to compare runs that are not what params.yaml describes: rerun them (dvc "
        "repro) with this params.yaml"
    )


def test_launcher_parity_judges_proc_against_thread_with_its_own_bound() -> None:
    from gates.judges.ddp import launcher_parity

    thread = run(world=2, eval_mode_steps=[])
    proc = twin(thread)
    proc["train_loss"][2] = 3.0 * (1 + 7e-4)
    o = launcher_parity(pair({"thread": thread, "proc": proc}), LOSS_MATCH, 5e-4)
    assert o.status == "fail" and "prefix: first step over 0.0005: step 2 (thread 3, proc 3.0021" in o.message
    assert o.message.startswith("world 2 vs 2: ")
    assert o.threshold == tier_for({**LOSS_MATCH, "max_rel": 5e-4}, "cpu").describe(4)
    assert launcher_parity(pair({"thread": thread, "proc": proc}), LOSS_MATCH, 1e-3).status == "pass"
    # proc against thread, whichever the records list first
    assert launcher_parity(pair({"proc": proc, "thread": thread}), LOSS_MATCH, 5e-4).message == o.message
    proc["eval_mode_steps"] = [0]
    assert launcher_parity(pair({"thread": thread, "proc": proc}), LOSS_MATCH, 1e-3).message.startswith(
        "model in eval mode at training steps 0 on proc"
    )


def test_the_gate_units() -> None:
    from gates.judges.ddp import LAUNCHER_PARITY, loss_match_gate

    g = loss_match_gate("proc")
    assert g.id == "loss_match.proc" and g.takes == ("loss_match",)
    assert g.threshold({"loss_match": LOSS_MATCH}) == describe_tiers(LOSS_MATCH)
    assert "runs/single/loss.csv, runs/proc/loss.csv" in g.investigate
    assert LAUNCHER_PARITY.id == "launcher_parity" and LAUNCHER_PARITY.takes == (
        "loss_match",
        "launcher_parity",
    )
    t = {"loss_match": LOSS_MATCH, "launcher_parity": {"max_rel": 5e-4}}
    assert LAUNCHER_PARITY.threshold(t) == "as loss_match, thread as the reference: " + describe_tiers(
        {**LOSS_MATCH, "max_rel": 5e-4}
    )


def test_parity_names_thread_as_the_reference_everywhere() -> None:
    thread = run(world=2)
    o = equivalence(thread, twin(thread), "proc", LOSS_MATCH, ref="thread")
    assert o.status == "pass" and o.message.startswith(
        "world 2 vs 2: 4 steps consumed exactly the thread rows; 4 steps drew the same masks as thread; "
    )
    assert o.message.endswith(
        "final val 2.00000 vs thread 2.00000 (diff +0.00e+00, tolerance 0.01); the same rows per step, tokens per step, lr per step, parameter count, parameter shapes, initial parameters as thread"
    )
    o = equivalence(thread, twin(thread, world=4), "proc", LOSS_MATCH, ref="thread")
    assert (o.status, o.message) == (
        "fail",
        "runs/proc ran at world 4, runs/thread at world 2: set one world",
    )
    d = twin(thread)
    d["grad_norm"][0] = 9.0
    o = equivalence(thread, d, "proc", LOSS_MATCH, ref="thread")
    assert (
        "first step: step 0 differs beyond summation order (rel <= 1e-05): grad_norm[0] 9 vs thread 2"
        in o.message
    )
    assert o.threshold == tier_for(LOSS_MATCH, "cpu").describe(4)


def test_the_cuda_tier_judges_only_its_prefix() -> None:
    s = run(device="cuda")
    d = twin(s)
    d["train_loss"][3] = 2.5 * 1.01  # after the cuda tier's 3-step prefix
    o = equivalence(s, d, "thread", LOSS_MATCH)
    assert o.status == "pass" and "over 3 of 4 steps and 2 evals" in o.message


def test_the_prefix_names_single_by_default() -> None:
    d = twin(run())
    d["train_loss"][1] = 3.5 * 1.02
    c, _ = check_prefix(run(), d, None, Approx.relative(1e-3), "thread")
    assert c.detail.startswith("first step over 0.001: step 1 (single 3.5, thread 3.57, rel 0.02)")
