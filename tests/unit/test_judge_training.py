"""gates/judges/training.py and gates/reading/expect.py under mutation (docs/judge-mutation.md).

What a run's record must be before any gate compares it (expect: identity, shape, evals, world, and
params.yaml where it describes runs), the train-mode rule (T21), and the cross_rank and finite
verdicts, on hand-made records: the judges take the records gates/reading/runs.py reads (built here
by hand, no tree; the reading itself is tested on the gate tree, test_judge_training_entry.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest

from conftest import PARAMS
from gates.judges import training
from gates.judges.outcome import Outcome, passed
from gates.judges.training import (
    cross_rank,
    finite,
    foreign_recorder,
    refusal,
    step_ranges,
    train_mode_problem,
    with_train_mode,
)
from gates.reading import expect
from gates.reading.artifacts import NonFinite, StageNotRun
from gates.reading.runs import Checked, FiniteRecords, Run, Runs
from params.config import load_params
from params.identity import config_identity

CONFIG = {
    "seed": 1,
    "model": {"vocab_size": 300, "dim": 8},
    "train": {"steps": 4, "eval_every": 2, "lr": 0.1},
}


def record(world: int = 2, launcher: str = "thread", **changes) -> dict:
    m = {
        "launcher": launcher,
        "world": world,
        "config": copy.deepcopy(CONFIG),
        "config_hash": config_identity(CONFIG),
        "steps": 4,
        "train_loss": [4.0, 3.5, 3.0, 2.5],
        "grad_norm": [1.0] * 4,
        "lr": [0.1] * 4,
        "samples": {"count": [8] * 4, "hash_sum": [1] * 4, "dropout_hash_sum": [0] * 4},
        "eval": [{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.5}, {"step": 4, "loss": 2.0}],
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


@dataclass
class FakeParams:
    describes_runs: bool


@dataclass
class Tree:
    """What cross_rank and finite read of the Artifacts besides the records: the params."""

    params: FakeParams | None = None


# -- step_ranges, recorders and train mode -------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "text"),
    [([], ""), ([3], "3"), ([3, 40, 41, 42], "3, 40..42"), ([42, 3, 41, 40], "3, 40..42"),
     ([1, 2, 4, 5, 7], "1..2, 4..5, 7"), ([0, 1, 2], "0..2"), ([10, 12], "10, 12")],
)  # fmt: skip
def test_step_ranges(steps: list[int], text: str) -> None:
    assert step_ranges(steps) == text


def test_a_foreign_recorder_names_itself() -> None:
    assert foreign_recorder({"determinism": {"recorder": "runrecord/1"}}) == "runrecord/1"
    for m in ({}, {"determinism": None}, {"determinism": {"recorder": ""}}, {"determinism": {"recorder": 3}}):
        assert foreign_recorder(m) is None


def test_train_mode_problems() -> None:
    assert train_mode_problem(record(), "w", "thread") is None
    assert train_mode_problem(record(eval_mode_steps=[5, 6, 7, 9]), "w", "proc") == (
        "model in eval mode at training steps 5..7, 9 on proc (dropout would be silently off: the seed's T21)"
    )
    old = record()
    del old["eval_mode_steps"]
    assert train_mode_problem(old, "runs/thread/metrics.json", "thread") == (
        "runs/thread/metrics.json: eval_mode_steps missing: xtrain's trainer records the steps it trained in "
        "eval mode; a run without them was written by an older trainer: rerun it"
    )
    old["determinism"] = {"recorder": "runrecord/1"}
    assert train_mode_problem(old, "w", "thread") is None


def test_with_train_mode_fails_first_and_keeps_the_comparison() -> None:
    o = passed(0.5, 1e-3, "all equal")
    assert with_train_mode(o, [("single", record(1, "single")), ("thread", record())]) is o
    bad = record(eval_mode_steps=[2])
    got = with_train_mode(o, [("single", record(1, "single")), ("thread", bad), ("proc", bad)])
    assert (got.status, got.measured, got.threshold) == ("fail", 0.5, 1e-3)
    assert got.message == (
        "model in eval mode at training steps 2 on thread (dropout would be silently off: the seed's T21); "
        "model in eval mode at training steps 2 on proc (dropout would be silently off: the seed's T21). "
        f"{training.TRAIN_MODE_NEXT}. The comparison itself: pass: all equal"
    )


# -- refuse ---------------------------------------------------------------------------------------------


def refuse(a, runs, threshold):
    """What a reader finds (expect.run_problems per run) and the judge says of it (refusal)."""
    problems = [p for run, m in runs for p in expect.run_problems(a.params, run, m)]
    return refusal(problems, a.params is not None and a.params.describes_runs, threshold)


def test_refuse_names_every_problem_and_whose_truth_it_is(monkeypatch) -> None:
    assert refuse(Tree(), [("thread", record())], 1e-6) is None
    edited = record(config_hash="0" * 16)
    o = refuse(Tree(), [("thread", edited), ("proc", edited)], 1e-6)
    assert (o.status, o.measured, o.threshold) == ("fail", None, 1e-6)
    assert o.message.endswith(
        ". Refusing to judge runs whose records contradict themselves: rerun them (dvc repro)"
    )
    assert o.message.count("is not the identity of the record's own config") == 2
    monkeypatch.setattr(expect, "run_problems", lambda params, run, m: [f"{run} bad"])
    o = refuse(Tree(FakeParams(True)), [("thread", record())], 1e-6)
    assert o.message == (
        "thread bad. Refusing to compare runs that are not what params.yaml describes: rerun them (dvc repro) "
        "with this params.yaml"
    )
    assert refuse(Tree(FakeParams(False)), [("thread", record())], 1e-6).message.startswith(
        "thread bad. Refusing to judge"
    )


def test_refuse_holds_the_runs_to_the_params_it_reads() -> None:
    params = load_params(str(PARAMS), ["profile=cpu"])
    other = pipeline_record(params, "thread")  # true to itself, of another learning rate
    other["config"]["train"]["lr"] = 1.0
    other["config_hash"] = config_identity(other["config"])
    assert refuse(Tree(), [("thread", other)], 1e-6) is None
    o = refuse(Tree(params), [("thread", other)], 1e-6)
    assert o.message.startswith(
        f"runs/thread/metrics.json: config_hash {other['config_hash']}, params.yaml gives"
    )


# -- cross_rank -------------------------------------------------------------------------------------------


@pytest.fixture()
def judged():
    """cross_rank on this record, read with these problems (no tree)."""

    def judge(m: dict, max_abs: float = 1e-6, params: FakeParams | None = None, problems=()) -> Outcome:
        described = params is not None and params.describes_runs
        return cross_rank(Runs((Run(m["launcher"], m, tuple(problems)),), described), max_abs)

    return judge


def test_ranks_that_agree_pass(judged) -> None:
    o = judged(record(world=3))
    assert (o.status, o.measured, o.threshold) == ("pass", 0.0, 1e-6)
    assert o.message == "3 ranks agree: max |p_r - p_0| 0 over 1,000 parameters"
    m = record(world=2)
    m["cross_rank"]["per_rank"][1]["max_abs_diff"] = 1e-6
    m["cross_rank"]["max_abs_diff"] = 1e-6
    assert judged(m).status == "pass"  # the bound is inclusive


def test_a_refused_record_is_the_verdict(judged) -> None:
    m = record(world=3)
    m["cross_rank"]["per_rank"][2]["max_abs_diff"] = 1.0  # refused before any rank is judged
    o = judged(m, problems=["a", "b"])
    assert (o.status, o.measured, o.threshold) == ("fail", None, 1e-6)
    assert (
        o.message
        == "a; b. Refusing to judge runs whose records contradict themselves: rerun them (dvc repro)"
    )
    o = judged(m, params=FakeParams(True), problems=["a"])
    assert o.message == (
        "a. Refusing to compare runs that are not what params.yaml describes: rerun them (dvc repro) with "
        "this params.yaml"
    )


def test_a_rank_beyond_the_bound_fails_naming_it_and_every_sum(judged) -> None:
    m = record(world=3)
    m["cross_rank"]["per_rank"][2].update(max_abs_diff=3e-6, param_sum=12.5000001)
    m["cross_rank"]["max_abs_diff"] = 3e-6
    o = judged(m)
    assert (o.status, o.measured, o.threshold) == ("fail", 3e-6, 1e-6)
    assert o.message == (
        "rank 2 differs from rank 0 by 3e-06 (parameter sums rank 0: 12.5, rank 1: 12.5, rank 2: 12.5000001). "
        "The ranks did not apply identical updates: check that every rank sees the same averaged gradients "
        "(all-reduce), the same optimizer state and the same initialisation"
    )


def test_a_claimed_maximum_that_is_not_the_ranks_is_inconsistent(judged) -> None:
    m = record(world=2)
    m["cross_rank"]["per_rank"][1]["max_abs_diff"] = 2e-7
    o = judged(m)
    assert (o.status, o.measured) == ("fail", 2e-7)
    assert o.message == (
        "runs/thread/metrics.json is inconsistent: max_abs_diff 0.0 but rank 1 reports 2e-07 (and rank 0 0.0 "
        "against itself)"
    )
    m = record(world=2)
    m["cross_rank"]["per_rank"][0]["max_abs_diff"] = 1e-9
    m["cross_rank"]["max_abs_diff"] = 1e-9
    assert "(and rank 0 1e-09 against itself)" in judged(m).message


def test_a_parameter_sum_its_difference_cannot_explain_is_inconsistent(judged) -> None:
    m = record(world=2)
    m["cross_rank"]["per_rank"][1]["param_sum"] = 12.6
    o = judged(m)
    assert (o.status, o.measured) == ("fail", pytest.approx(0.1))
    assert o.message == (
        "runs/thread/metrics.json is inconsistent: rank 1's parameter sum 12.6 differs from rank 0's 12.5 by "
        "0.1, more than its max_abs_diff 0.0 over 1,000 parameters allows"
    )
    # within n_params * (max_abs_diff + 2**-52 * max(1, |s0|)): summation noise of equal replicas
    m["cross_rank"]["per_rank"][1]["param_sum"] = 12.5 + 1000 * 2.0**-52 * 12.5 * 0.9
    assert judged(m).status == "pass"
    m["cross_rank"]["per_rank"][1].update(max_abs_diff=1e-7, param_sum=12.5 + 1000 * 1e-7 * 0.9)
    m["cross_rank"]["max_abs_diff"] = 1e-7
    assert judged(m).status == "pass"
    for r in m["cross_rank"]["per_rank"]:
        r["param_sum"] = 0.25
    m["cross_rank"]["per_rank"][1]["param_sum"] = 0.25 + 1000 * (1e-7 + 2.0**-52) * 1.1
    assert judged(m).status == "fail"  # max(1.0, |s0|): a small sum is held to 1.0's noise


@pytest.mark.parametrize(("params", "why"), [(None, ""), (FakeParams(True), " (as params.yaml says)")])
def test_one_rank_is_a_skip(judged, params, why: str) -> None:
    o = judged(record(world=1, launcher="single"), params=params)
    assert (o.status, o.measured, o.threshold) == ("skip", 0.0, 1e-6)
    assert o.message == f"runs/single ran with world 1{why}: no other rank to compare"


# -- finite -------------------------------------------------------------------------------------------------


def finite_of(monkeypatch, outcomes: dict, params: FakeParams | None = None, problems=None) -> Outcome:
    """finite on the records read_finite makes of these reading outcomes (a record, or what reading raised)."""
    checked, not_run = [], {}
    for run, got in outcomes.items():
        if isinstance(got, StageNotRun):
            not_run[run] = str(got)
        elif isinstance(got, NonFinite):
            checked.append(Checked(run, str(got)))
        else:
            checked.append(Checked(run, None, tuple((problems or {}).get(run, []))))
    return finite(FiniteRecords(tuple(checked), not_run, params is not None and params.describes_runs))


def test_finite_passes_naming_the_runs_it_checked(monkeypatch) -> None:
    o = finite_of(monkeypatch, {"single": record(), "thread": StageNotRun("x"), "proc": record()})
    assert (o.status, o.measured, o.threshold) == ("pass", 0, 0)
    assert o.message == "every number is finite in runs single, proc, shaped as their own configs say"
    o = finite_of(monkeypatch, {"single": record(), "thread": record(), "proc": record()}, FakeParams(True))
    assert o.message == "every number is finite in runs single, thread, proc, shaped as params.yaml says"


def test_finite_without_runs_is_a_skip(monkeypatch) -> None:
    o = finite_of(monkeypatch, dict.fromkeys(("single", "thread", "proc"), StageNotRun("x")))
    assert (o.status, o.measured, o.threshold, o.message) == ("skip", None, None, "no training stage has run")


def test_a_nan_or_a_misshapen_run_fails_finite(monkeypatch) -> None:
    runs = {
        "single": NonFinite("runs/single/metrics.json: train_loss[3] = nan"),
        "thread": record(),
        "proc": record(),
    }
    o = finite_of(monkeypatch, runs, problems={"proc": ["proc short"]})
    assert (o.status, o.measured, o.threshold) == ("fail", 2, 0)
    assert o.message == (
        "runs/single/metrics.json: train_loss[3] = nan; proc short. Next: the first non-finite step (lower the "
        "learning rate, check the data and precision), or rerun a run that does not match its own record"
    )
    o = finite_of(monkeypatch, runs, FakeParams(True))
    assert o.measured == 1 and o.message.endswith("or rerun a run that does not match params.yaml")


# -- expect: the record against itself and params.yaml ---------------------------------------------------


def test_a_record_that_is_its_own_config_has_no_problem() -> None:
    assert expect.run_problems(None, "thread", record()) == []
    assert expect.run_problems(FakeParams(False), "thread", record()) == []


def test_a_hash_that_is_not_the_configs_identity_is_named() -> None:
    m = record(config_hash="0" * 16)
    assert expect.identity_problems("thread", m) == [
        f"runs/thread/metrics.json: config_hash: {'0' * 16} is not the identity of the record's own config "
        f"({config_identity(CONFIG)}): a hand-edited or mislabelled record"
    ]


@pytest.mark.parametrize(
    ("train", "problems"),
    [
        ([1], ["runs/x/metrics.json: config.train: [1] is not a mapping"]),
        ({"eval_every": 0}, ["runs/x/metrics.json: config.train.steps: '<absent>' is not a step count (>= 1): the gates take the run's shape from it"]),
        ({"steps": 0, "eval_every": 0}, ["runs/x/metrics.json: config.train.steps: 0 is not a step count (>= 1): the gates take the run's shape from it"]),
        ({"steps": True, "eval_every": -1}, [
            "runs/x/metrics.json: config.train.steps: True is not a step count (>= 1): the gates take the run's shape from it",
            "runs/x/metrics.json: config.train.eval_every: -1 is not an eval cadence (>= 0): the gates take the run's shape from it",
        ]),
        ({"steps": 1, "eval_every": 2.0}, ["runs/x/metrics.json: config.train.eval_every: 2.0 is not an eval cadence (>= 0): the gates take the run's shape from it"]),
    ],
)  # fmt: skip
def test_a_config_train_that_gives_no_shape_is_named(train, problems: list[str]) -> None:
    m = record()
    m["config"]["train"] = train
    assert expect.train_of("x", m) == (None, problems)


def test_train_of_gives_a_copy_of_a_good_train() -> None:
    train, bad = expect.train_of("x", record())
    assert (train, bad) == (CONFIG["train"], []) and train is not record()["config"]["train"]
    assert expect.train_of("x", record(config={**CONFIG, "train": {"steps": 1, "eval_every": 0}}))[0] == {
        "steps": 1,
        "eval_every": 0,
    }


def test_every_series_and_the_evals_are_held_to_the_steps() -> None:
    m = record(steps=5, lr=[0.1] * 3)
    m["samples"]["dropout_hash_sum"] = [0] * 5
    m["eval"] = m["eval"][:2]
    assert expect.shape_problems("x", m, CONFIG["train"], from_params=False) == [
        "runs/x/metrics.json: steps 5, config.train.steps is 4",
        "runs/x/metrics.json: lr has 3 values for 4 steps",
        "runs/x/metrics.json: samples.dropout_hash_sum has 5 values for 4 steps",
        "runs/x/metrics.json: eval steps [0, 2], its config implies [0, 2, 4] (config.train.eval_every 2: step 0, "
        "every eval_every steps and the last)",
    ]
    assert expect.shape_problems("x", m, CONFIG["train"], from_params=True)[::3] == [
        "runs/x/metrics.json: steps 5, params.yaml train.steps is 4",
        "runs/x/metrics.json: eval steps [0, 2], params.yaml implies [0, 2, 4] (params.yaml train.eval_every 2: "
        "step 0, every eval_every steps and the last)",
    ]
    for key in ("train_loss", "grad_norm"):
        assert expect.shape_problems("x", record(**{key: [1.0]}), CONFIG["train"], False) == [
            f"runs/x/metrics.json: {key} has 1 values for 4 steps"
        ]
    for key in ("count", "hash_sum"):
        m = record()
        m["samples"][key] = []
        assert expect.shape_problems("x", m, CONFIG["train"], False) == [
            f"runs/x/metrics.json: samples.{key} has 0 values for 4 steps"
        ]


def test_the_world_is_what_the_per_rank_lists_hold() -> None:
    assert expect.world_problems("x", record(world=1, launcher="single")) == []
    assert expect.world_problems("x", record(world=2, launcher="single")) == [
        "runs/x/metrics.json: world 2: a single-device run has world 1"
    ]
    m = record(world=3)
    m["cross_rank"]["per_rank"] = m["cross_rank"]["per_rank"][:2]
    assert expect.world_problems("x", m) == ["runs/x/metrics.json: cross_rank lists ranks [0, 1] for world 3"]
    m = record(world=2, perf={"peak_memory": {"per_rank": [{"rank": 0}]}})
    assert expect.world_problems("x", m) == [
        "runs/x/metrics.json: perf.peak_memory lists ranks [0] for world 2"
    ]
    ok = record(world=2, perf={"peak_memory": {"per_rank": [{"rank": 0}, {"rank": 1}]}})
    assert expect.world_problems("x", ok) == []
    assert expect.world_problems("x", record(world=2, perf={"peak_memory": None})) == []
    assert expect.world_problems("x", record(world=2, perf=None)) == []


def pipeline_record(params, run: str) -> dict:
    """A record of exactly what params.yaml gives for `run`."""
    config = params.run_config(300).to_dict()
    world = params.world(run)
    m = record(world=world, launcher=run, config=config, config_hash=config_identity(config))
    train = config["train"]
    steps = train["steps"]
    m.update(steps=steps, train_loss=[1.0] * steps, grad_norm=[1.0] * steps, lr=[0.1] * steps)
    m["samples"] = {k: [0] * steps for k in expect.SAMPLE_SERIES}
    from params.cadence import eval_steps

    m["eval"] = [{"step": s, "loss": 1.0} for s in eval_steps(train)]
    return m


def test_a_run_of_this_params_yaml_has_no_problem_and_others_are_named() -> None:
    params = load_params(str(PARAMS), ["profile=cpu"])
    assert params.describes_runs
    m = pipeline_record(params, "thread")
    assert expect.run_problems(params, "thread", m) == []
    other = copy.deepcopy(m)
    other["config"]["train"]["lr"] = 1.0
    other["config_hash"] = config_identity(other["config"])
    want = params.run_config(300).to_dict()
    problems = expect.params_problems(params, "thread", other)
    assert problems == [
        f"runs/thread/metrics.json: config_hash {other['config_hash']}, params.yaml gives "
        f"{config_identity(want)} (differing keys: train.lr 1.0 vs {want['train']['lr']!r})"
    ]
    # a record that disagrees with params.yaml is measured against its own config in the shape check
    assert expect.run_problems(params, "thread", other)[0] == problems[0]
    wrong_world = pipeline_record(params, "thread")
    wrong_world["world"] = params.world("thread") + 1
    assert f"world {params.world('thread') + 1}, params.yaml says {params.world('thread')}" in " ".join(
        expect.params_problems(params, "thread", wrong_world)
    )


@pytest.mark.parametrize("vocab", [None, 0, True, "300"])
def test_a_record_without_a_vocabulary_size_is_named(vocab) -> None:
    params = load_params(str(PARAMS), ["profile=cpu"])
    m = pipeline_record(params, "thread")
    m["config"]["model"]["vocab_size"] = vocab
    assert expect.params_problems(params, "thread", m)[0] == (
        f"runs/thread/metrics.json: config.model.vocab_size {vocab!r} is not a vocabulary size"
    )
    m["config"]["model"] = [1]
    assert expect.params_problems(params, "thread", m)[0].endswith(
        "config.model.vocab_size None is not a vocabulary size"
    )


def test_the_shape_check_names_params_yaml_only_for_a_record_of_it() -> None:
    params = load_params(str(PARAMS), ["profile=cpu"])
    m = pipeline_record(params, "thread")
    m["steps"] += 1
    assert expect.run_problems(params, "thread", m) == [
        f"runs/thread/metrics.json: steps {m['steps']}, params.yaml train.steps is {m['steps'] - 1}"
    ]
    assert expect.run_problems(None, "thread", m) == [
        f"runs/thread/metrics.json: steps {m['steps']}, config.train.steps is {m['steps'] - 1}"
    ]
