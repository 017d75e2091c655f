"""Real trainers where they are, judged in their own words (issue #54 items 3 and 5), in process.

Evals at any steps: a loop of its own (runrecord) is held to nothing but evals inside its run, in
order, each once; our own trainer's records still to its cadence (params/cadence.py). loss_match
compares evals at the steps both runs have, says how many, and names two runs without a common step.
A loss or grad norm a whole multiple of the reference's names loss scaling under accumulation. What a
user's project is told holds no word of ours (contracts/plain_words.py internal_words), which the
negative controls show catching what our own trainer's messages still say.
"""

from __future__ import annotations

import copy

import pytest

from contracts.plain_words import INTERNAL, internal_words
from gates.judges import ddp
from gates.judges.tolerance import Approx
from gates.judges.training import TRAIN_MODE_NEXT_YOURS, train_mode_problem, with_train_mode
from gates.reading import expect
from gates.reading.goldens import coverage_problems
from params.identity import config_identity

LOSS_MATCH = {"max_rel": 1e-3, "cpu": {"first_step_rtol": 1e-5, "prefix_steps": 64, "final_val_atol": 0.01}}
STEPS = 6
RUNRECORD = "runrecord 1.4"


def record(
    recorder: str | None = RUNRECORD,
    evals: tuple[int, ...] = (0, 3, 6),
    world: int = 1,
    every: int | None = 3,
) -> dict:
    """A record consistent with itself (the fields the shape checks and loss_match read)."""
    train = {"steps": STEPS} | ({} if every is None else {"eval_every": every})
    config = {"seed": 0, "model": {}, "train": train}
    ev = [{"step": s, "loss": 5.0 - 0.1 * s} for s in evals]
    ranks = [{"rank": r, "max_abs_diff": 0.0, "param_sum": 1.0} for r in range(world)]
    m = {
        "launcher": "single" if world == 1 else "proc",
        "config_hash": config_identity(config),
        "config": config,
        "steps": STEPS,
        "world": world,
        "device": "cpu",
        "precision": "fp32",
        "train_loss": [5.0 - 0.1 * i for i in range(STEPS)],
        "grad_norm": [1.0 + 0.01 * i for i in range(STEPS)],
        "lr": [0.1] * STEPS,
        "eval": ev,
        "final_val_loss": ev[-1]["loss"] if ev else None,
        "samples": {"count": [8] * STEPS, "hash_sum": [123] * STEPS, "dropout_hash_sum": [0] * STEPS},
        "cross_rank": {"max_abs_diff": 0.0, "per_rank": ranks},
        "determinism": {"recorder": recorder} if recorder else {},
        "eval_mode_steps": [],
    }
    return m


def judge(single: dict, got: dict):
    return with_train_mode(
        ddp.equivalence(single, got, "proc", LOSS_MATCH), [("single", single), ("proc", got)]
    )


# ---- the regex: internal shorthand and this repository's paths --------------------------------------


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Next: see docs/ddp-gate.md; compare", ["docs/ddp-gate.md"]),
        ("fixed in #54 (and #36)", ["#54", "#36"]),
        ("issue 36 item 5", ["issue 36"]),
        ("dropout silently off: the seed's T21", ["the seed's", "T21"]),
        ("the seed design found it", ["seed design"]),
        ("(xtrain/core/train.py evaluate restores it)", ["xtrain/core/train.py"]),
        ("copy gates/byo_template/ by hand", ["gates/byo_template"]),
        ("run python -m pipeline.repro", ["pipeline.repro"]),
        ("params/identity.py, params.identity", ["params/identity.py", "params.identity"]),
        ("see examples/nanogpt/README.md and tests/unit", ["examples/nanogpt/README.md", "tests/unit"]),
        ("contracts/errors.py: one line", ["contracts/errors.py"]),
        ("runrecord/recorder.py", ["runrecord/recorder.py"]),
        ("ci/test.sh, bench/x.py", ["ci/test.sh", "bench/x.py"]),
    ],
)
def test_internal_words_are_found(text: str, found: list[str]) -> None:
    assert internal_words(text) == found


@pytest.mark.parametrize(
    "text",
    [
        "compare runs/single/loss.csv with runs/proc/loss.csv",
        "python -m gates explain loss_match.proc",
        "params.yaml gates.loss_match.cpu.final_val_atol; dvc.yaml; reports/gates.json",
        "registry/index.json; python3 -m registry bless --golden",
        "from runrecord.hf import RecordingCallback; runrecord: RunRecorder: dropout: ...",
        "train.py, model.py, my-docs/notes.md, a/docs/x, fill #1565c0, #9e9e9e, color:#212121;",
        "an NVIDIA T4, step 21, xtrain-metrics/1, T2 (tier two)",
    ],
)
def test_the_users_own_words_and_files_pass(text: str) -> None:
    assert internal_words(text) == []


def test_negative_control_a_planted_message_is_caught() -> None:
    planted = "loss_match.proc: fail: samples differ. Next: see docs/ddp-gate.md (#54)"
    assert internal_words(planted) == ["docs/ddp-gate.md", "#54"]
    assert INTERNAL.search(planted.replace("docs/ddp-gate.md (#54)", "python -m gates explain x")) is None


# ---- a record of a loop of its own: evals at any steps ---------------------------------------------


def test_a_loops_evals_at_any_steps_agree_with_its_record() -> None:
    for evals in [(0, 3, 6), (0, 5), (1, 2, 4), (6,), ()]:
        assert expect.run_problems(None, "single", record(evals=evals)) == [], evals
    assert expect.run_problems(None, "single", record(evals=(0, 4), every=None)) == []


@pytest.mark.parametrize(
    ("evals", "says"),
    [
        ((0, 7), "runs/single/metrics.json: eval at step 7, past the run's 6 steps"),
        ((3, 0, 6), "runs/single/metrics.json: eval steps [3, 0, 6] are not in increasing order, each once"),
        ((0, 3, 3), "runs/single/metrics.json: eval steps [0, 3, 3] are not in increasing order, each once"),
    ],
)
def test_a_loops_evals_outside_its_run_or_out_of_order_are_named(evals: tuple, says: str) -> None:
    assert expect.run_problems(None, "single", record(evals=evals)) == [says]


def test_negative_control_our_trainers_record_is_still_held_to_its_cadence() -> None:
    ours = record(recorder=None, evals=(0, 5))
    assert expect.run_problems(None, "single", ours) == [
        "runs/single/metrics.json: eval steps [0, 5], its config implies [0, 3, 6] (config.train.eval_every 3: "
        "step 0, every eval_every steps and the last)"
    ]
    assert expect.run_problems(None, "single", record(recorder=None)) == []
    absent = record(recorder=None, every=None)
    assert "config.train.eval_every: '<absent>' is not an eval cadence" in "; ".join(
        expect.run_problems(None, "single", absent)
    )


def test_a_loops_eval_every_if_given_is_still_a_cadence() -> None:
    bad = record(every=None)
    bad["config"]["train"]["eval_every"] = -1
    bad["config_hash"] = config_identity(bad["config"])
    assert "config.train.eval_every: -1 is not an eval cadence" in "; ".join(
        expect.run_problems(None, "x", bad)
    )


def test_foreign_recorder_names_the_recorder() -> None:
    assert expect.foreign_recorder(record()) == RUNRECORD
    for m in ({}, {"determinism": {}}, {"determinism": {"recorder": ""}}, {"determinism": None}):
        assert expect.foreign_recorder(m) is None


# ---- loss_match at the steps both runs have ------------------------------------------------------


def test_common_evals_pair_by_step() -> None:
    a, b = record(evals=(0, 2, 5, 6)), record(evals=(0, 3, 5))
    assert ddp.common_evals(a, b) == {0: (5.0, 5.0), 5: (4.5, 4.5)}
    assert ddp.common_evals(b, a) == {0: (5.0, 5.0), 5: (4.5, 4.5)}
    assert ddp.common_evals(record(evals=(1,)), record(evals=(2,))) == {}


def test_the_end_is_judged_at_the_last_step_both_runs_have() -> None:
    single, got = record(evals=(0, 3, 6)), record(evals=(0, 3, 5), world=2)
    got["eval"][1]["loss"] = 4.705  # step 3: within 0.01 of single's 4.7
    c = ddp.check_end(single, got, Approx.absolute(0.01))
    assert c.ok, c.detail
    assert c.detail == (
        "val at step 3 (the last of 2 eval steps both runs have) 4.70500 vs single 4.70000 (diff +5.00e-03, "
        "tolerance 0.01)"
    )
    got["eval"][1]["loss"] = 4.8
    assert not ddp.check_end(single, got, Approx.absolute(0.01)).ok
    # negative control: the final val losses of other steps (6 vs 5) would differ by 0.1 and fail
    assert not Approx.absolute(0.01).within(got["final_val_loss"], single["final_val_loss"])


def test_runs_without_a_common_eval_step_are_named_not_a_crash() -> None:
    single, got = record(evals=(0, 3, 6)), record(evals=(1, 5), world=2)
    c = ddp.check_end(single, got, Approx.absolute(0.01), ref="thread")
    assert (c.ok, c.applied) == (False, True)
    assert c.detail == (
        "no common eval step: thread evaluated at steps [0, 3, 6], the other at [1, 5]: the end of the run "
        "is unchecked"
    )
    o = judge(single, got)
    assert o.status == "fail" and "end: no common eval step" in o.message, o.message
    assert o.message.endswith(
        ". Next: evaluate both runs after one optimizer step (the last, say), then rerun them; see "
        "runs/single/eval.csv and runs/proc/eval.csv"
    )
    ours = ddp.next_step(
        record(None),
        record(None),
        [ddp.check_end(single, got, Approx.absolute(0.01))],
        ddp.tier_for(LOSS_MATCH, "cpu"),
        "proc",
        "single",
    )
    assert ours == "set train.eval_every > 0 and rerun both"
    long = record(evals=tuple(range(STEPS + 1)))
    long["eval"] += [{"step": s, "loss": 1.0} for s in (7, 8)]  # a long list is cut (not a real record)
    c = ddp.check_end(long, record(evals=(), world=2) | {"final_val_loss": 1.0}, Approx.absolute(0.01))
    assert "single evaluated at steps [0, 1, 2, ..., 7, 8] (9 evals), the other at []" in c.detail
    c = ddp.check_end(
        record(evals=(0, 1, 2, 3, 4, 5, 6, 7)),
        record(evals=(), world=2) | {"final_val_loss": 1.0},
        Approx.absolute(0.01),
    )
    assert "single evaluated at steps [0, 1, 2, 3, 4, 5, 6, 7], the other" in c.detail  # 8: whole


def test_no_eval_at_all_says_so_in_each_recorders_words() -> None:
    for recorder, why in ((RUNRECORD, "(no rec.eval() recorded)"), (None, "(train.eval_every: 0)")):
        single, got = record(recorder, evals=()), record(recorder, evals=(), world=2)
        c = ddp.check_end(single, got, Approx.absolute(0.01))
        assert c.detail == f"no final validation loss {why}: the end of the run is unchecked"


def test_the_prefix_and_step_0_compare_the_common_steps() -> None:
    single, got = record(evals=(0, 2, 6)), record(evals=(0, 3, 6), world=2)
    o = judge(single, got)
    assert o.status == "pass" and "and 2 evals" in o.message and "val_loss@0 rel 0" in o.message, o.message
    got = record(evals=(2, 6), world=2)
    assert "val_loss@0" not in ddp.check_first_step(single, got, Approx.relative(1e-5)).detail


def test_a_whole_multiple_of_the_loss_names_loss_scaling_under_accumulation() -> None:
    single, got = record(), record(world=2)
    got["train_loss"][0] *= 2
    c = ddp.check_first_step(single, got, Approx.relative(1e-5))
    assert not c.ok and c.detail.endswith(
        ". a whole multiple: the loss must be divided by the accumulation steps before backward, and the "
        "logged loss is the mean over micro-batches and ranks (not their sum, not one rank's times the "
        "accumulation steps)"
    )
    got["train_loss"][0] = single["train_loss"][0] * 1.5  # negative control: no whole multiple
    assert "whole multiple" not in ddp.check_first_step(single, got, Approx.relative(1e-5)).detail
    got = record(world=2)
    got["grad_norm"][0] *= 3
    detail = ddp.check_first_step(single, got, Approx.relative(1e-5)).detail
    assert (
        "gradients summed instead of averaged? (summed over ranks, or the loss not divided by the " in detail
    )


# ---- the user's language: every message a loop of its own gets --------------------------------------


def failures() -> dict[str, tuple[dict, dict]]:
    """One of each way a comparison fails, on records of a loop of its own."""
    s = record()
    cases = {}
    s["dropout"] = {"masks": "seeded", "modules": 1, "p": [0.1]}  # runrecord saw the model
    s["samples"]["dropout_hash_sum"] = [11] * STEPS
    s["init_param_digest"] = "a" * 64
    for name, edit in {
        "samples": lambda d: d["samples"]["count"].__setitem__(0, 7),
        "hash": lambda d: d["samples"]["hash_sum"].__setitem__(2, 9),
        "masks": lambda d: d["samples"]["dropout_hash_sum"].__setitem__(1, 5),
        "grad": lambda d: d["grad_norm"].__setitem__(0, 2.0),
        "loss": lambda d: d["train_loss"].__setitem__(2, 9.0),
        "eval": lambda d: d["eval"][1].__setitem__("loss", 9.0),
        "end": lambda d: d.update(final_val_loss=9.0),
        "disjoint": lambda d: d.update(eval=[{"step": 1, "loss": 4.9}], final_val_loss=4.9),
        "train_mode": lambda d: d.update(eval_mode_steps=[2, 3]),
        # a config change the runs show (observed quantities, not config text, are judged)
        "config": lambda d: d.update(
            config_hash="other", config={**d["config"], "seed": 1}, init_param_digest="b" * 64
        ),
    }.items():
        d = copy.deepcopy(s) | {"world": 2}
        edit(d)
        cases[name] = (s, d)
    return cases


@pytest.mark.parametrize("case", list(failures()))
def test_a_loop_of_its_own_is_told_nothing_of_ours(case: str) -> None:
    single, got = failures()[case]
    o = judge(single, got)
    assert o.status == "fail", o.message
    assert internal_words(o.message) == [], o.message
    if "Next: " in o.message and case != "config":
        nxt = o.message.split("Next: ", 1)[1]
        assert "python -m gates explain" in nxt or "runs/" in nxt or "your " in nxt, nxt


@pytest.mark.parametrize("case", ["samples", "masks", "end", "train_mode", "grad"])
def test_negative_control_our_trainers_messages_still_name_our_files(case: str) -> None:
    single, got = failures()[case]
    for m in (single, got):
        m["determinism"] = {}
    o = judge(single, got)
    assert o.status == "fail" and internal_words(o.message), o.message


def test_the_next_step_points_at_explain_and_the_users_files() -> None:
    s = record()
    tier = ddp.tier_for(LOSS_MATCH, "cpu")

    def failed(*names: str) -> list[ddp.Check]:
        return [ddp.Check(n, False, "differs") for n in names]

    nxt = ddp.next_step(s, s, failed("samples"), tier, "proc", "single")
    assert (
        nxt == "python -m gates explain loss_match.proc; compare runs/single/loss.csv with runs/proc/loss.csv"
    )
    assert ddp.next_step(s, s, failed("dropout masks"), tier, "proc", "thread").startswith(
        "python -m gates explain launcher_parity; "
    )
    assert ddp.next_step(s, s, failed("end"), tier, "proc", "single") == (
        "a late divergence only (the exact checks passed): rerun with another seed; a real bug, or "
        "gates.loss_match.cpu.final_val_atol too tight for your runs (python -m gates explain loss_match.proc)"
    )
    ours = record(None)
    assert "docs/ddp-gate.md" in ddp.next_step(ours, ours, failed("samples"), tier, "proc", "single")
    assert "docs/ddp-gate.md" in ddp.next_step(ours, ours, failed("end"), tier, "proc", "single")


def test_train_mode_in_the_users_words() -> None:
    m = record() | {"eval_mode_steps": [1, 2]}
    assert train_mode_problem(m, "runs/proc/metrics.json", "proc") == (
        "model in eval mode at training steps 1..2 on proc (dropout would be silently off)"
    )
    o = judge(record(), m)
    nxt = TRAIN_MODE_NEXT_YOURS.format(files="runs/proc/metrics.json")
    assert f"(dropout would be silently off). {nxt}. The comparison itself: pass" in o.message
    assert internal_words(o.message) == []
    ours = record(None) | {"eval_mode_steps": [1, 2]}
    assert "the seed's T21" in train_mode_problem(ours, "x", "proc")  # the control: our words, our trainer


# ---- fresh_train's golden against a loop's own eval steps -------------------------------------------


def golden(evals: list[int]) -> dict:
    return {
        "env_id": "cpu-x",
        "version": 2,
        "metrics": {
            "train_loss": {"values": {str(s): 1.0 for s in range(STEPS)}},
            "val_loss": {"values": {str(s): 1.0 for s in evals}},
        },
    }


def test_a_golden_covers_the_steps_a_loop_evaluated_at() -> None:
    train = {"steps": STEPS, "eval_every": 3}
    assert coverage_problems(golden([0, 4]), train, [0, 4]) == []
    assert coverage_problems(golden([0, 4, 6]), train, [0, 4]) == []
    assert coverage_problems(golden([0]), {"steps": STEPS}, [0]) == []
    assert coverage_problems(golden([0]), train, [0, 4]) == [
        "golden cpu-x v2 holds val losses at steps ['0'], the run evaluated at [0, 4]"
    ]
    # our trainer's: the cadence, as before (the control)
    assert coverage_problems(golden([0, 4]), train) == [
        "golden cpu-x v2 holds val losses at steps ['0', '4'], the config implies ['0', '3', '6']"
    ]


# ---- what the mutants showed: each branch pinned ----------------------------------------------------


def test_a_whole_multiple_of_the_step_0_val_loss_names_nothing_more() -> None:
    single, got = record(), record(world=2)
    got["eval"][0]["loss"] *= 2  # val_loss@0 alone, twice: no hint of its own
    c = ddp.check_first_step(single, got, Approx.relative(1e-5))
    assert not c.ok and c.detail.endswith("val_loss@0 rel 1"), c.detail
    got = record(world=2)
    got["train_loss"][0] *= 1.5  # no whole multiple: the detail ends with the rel list
    c = ddp.check_first_step(single, got, Approx.relative(1e-5))
    assert not c.ok and c.detail.endswith("val_loss@0 rel 0"), c.detail


@pytest.mark.parametrize("foreign", ["single", "proc"])
def test_either_run_of_a_loop_of_its_own_makes_the_words_the_users(foreign: str) -> None:
    single = record(RUNRECORD if foreign == "single" else None, evals=())
    got = record(RUNRECORD if foreign == "proc" else None, evals=(), world=2)
    assert ddp.check_end(single, got, Approx.absolute(0.01)).detail.startswith(
        "no final validation loss (no rec.eval() recorded)"
    )
    tier = ddp.tier_for(LOSS_MATCH, "cpu")
    nxt = ddp.next_step(single, got, [ddp.Check("samples", False, "x")], tier, "proc", "single")
    assert nxt.startswith("python -m gates explain loss_match.proc; ")


def test_what_was_not_applied_is_kept_on_a_failure() -> None:
    single, got = record(), record(world=2)
    del single["eval_mode_steps"]  # runrecord did not see the model: train mode not recorded here
    got["eval_mode_steps"] = [1]
    got["grad_norm"][0] = 9.0
    o = judge(single, got)
    assert o.status == "fail"
    assert o.not_applied["dropout masks"].startswith("not recorded: runrecord did not see the model")
    assert o.not_applied["train mode"].startswith("not recorded in runs/single (runrecord did not see")
    both = record() | {"eval_mode_steps": [2]}
    o = judge(both, record(world=2) | {"eval_mode_steps": [3]})
    assert "the steps are in runs/single/metrics.json, runs/proc/metrics.json (eval_mode_steps)" in o.message


def test_fresh_train_judges_a_loops_run_against_a_golden_of_its_own_eval_steps() -> None:
    from gates.judges import fresh_train
    from gates.reading.registry_records import Golden, golden_coverage

    values = lambda d: {"values": {str(k): v for k, v in d.items()}}  # noqa: E731
    m = record(evals=(0, 5)) | {"env": {"env_id": "cpu-own"}}  # not train.eval_every 3's [0, 3, 6]
    train = dict(enumerate(m["train_loss"]))

    def judged(val: dict[int, float], recorder: str | None = RUNRECORD):
        g = {
            "env_id": "cpu-own",
            "version": 1,
            "metrics": {"train_loss": values(train), "val_loss": values(val)},
        }
        run = m | {"determinism": {"recorder": recorder} if recorder else {}}
        return fresh_train._judge_against(
            run, Golden(g, 1, "exact", False), golden_coverage(run, g), {}, None
        )

    o = judged({0: 5.0, 5: 4.5})
    assert o.status == "pass" and "2 val losses" in o.message, o.message
    o = judged({0: 5.0})
    assert o.status == "fail"
    assert (
        o.message
        == "golden cpu-own v1 holds val losses at steps ['0'], the run evaluated at [0, 5]: refusing to judge against it"
    )
    o = judged({0: 5.0, 5: 4.5}, recorder=None)  # the control: our trainer's run is held to the cadence
    assert "the config implies ['0', '3', '6']" in o.message
