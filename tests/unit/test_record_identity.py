"""Shape and identity from the run record itself (issue #25 item 5): gates/reading/expect.py.

A record is held to its own config (config_hash its identity, length and every per-step series its
config.train.steps, evals the steps its config's eval_every implies, world its per-rank lists), and,
where the judging params.yaml describes runs, to params.yaml too. Property tests over synthetic
records: a consistent record passes; every way of breaking it is refused naming the file and key.
The gate-level controls on real runs are in tests/pipeline/test_record_gates.py.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import PARAMS
from gates.judges import ddp
from gates.reading import expect
from params.cadence import eval_steps
from params.config import load_params
from params.identity import config_identity

LAUNCHER_WORLD = st.sampled_from([("single", 1), ("thread", 2), ("proc", 2), ("proc", 4), ("thread", 1)])


def record(config: dict[str, Any], launcher: str, world: int) -> dict[str, Any]:
    """The fields the shape checks read, consistent with `config` (what runrecord or xtrain writes)."""
    steps = config["train"]["steps"]
    ranks = [{"rank": r, "max_abs_diff": 0.0, "param_sum": 1.0} for r in range(world)]
    return {
        "launcher": launcher,
        "world": world,
        "config": config,
        "config_hash": config_identity(config),
        "steps": steps,
        "train_loss": [1.0] * steps,
        "grad_norm": [0.5] * steps,
        "lr": [1e-3] * steps,
        "samples": {k: [8] * steps for k in expect.SAMPLE_SERIES},
        "eval": [{"step": s, "loss": 2.0} for s in eval_steps(config["train"])],
        "cross_rank": {"max_abs_diff": 0.0, "per_rank": ranks},
        "perf": {"peak_memory": {"per_rank": [{"rank": r, "bytes": 1} for r in range(world)]}},
    }


configs = st.builds(
    lambda seed, steps, every, lr, extra: {
        "seed": seed,
        "model": {"kind": "TinyLM", "dim": 32, "vocab_size": 300},
        "train": {"steps": steps, "eval_every": every, "lr": lr, "log_every": extra},
    },
    seed=st.integers(0, 2**31),
    steps=st.integers(1, 40),
    every=st.integers(0, 12),
    lr=st.floats(1e-5, 1.0),
    extra=st.integers(1, 100),
)


@given(config=configs, lw=LAUNCHER_WORLD)
def test_a_consistent_record_passes_and_each_break_is_named(config: dict, lw: tuple[str, int]) -> None:
    launcher, world = lw
    m = record(config, launcher, world)
    assert expect.run_problems(None, launcher, m) == []
    where = f"runs/{launcher}/metrics.json"
    steps = config["train"]["steps"]

    def problems(change) -> str:
        bad = copy.deepcopy(m)
        change(bad)
        found = expect.run_problems(None, launcher, bad)
        assert found and all(p.startswith(where + ": ") for p in found), found
        return "; ".join(found)

    # a hand-edited config_hash, and a config edited under its hash (mislabelled): the key is named
    assert "config_hash: 0123456789abcdef is not the identity" in problems(
        lambda b: b.update(config_hash="0123456789abcdef")
    )
    assert "config_hash:" in problems(
        lambda b: b["config"]["train"].update(lr=b["config"]["train"]["lr"] * 2)
    )
    # the length and every per-step series against the record's own config.train.steps
    assert f"steps {steps + 1}, config.train.steps is {steps}" in problems(
        lambda b: b.update(steps=steps + 1)
    )
    for series in expect.SERIES:
        assert f"{series} has {steps - 1} values" in problems(lambda b, s=series: b[s].pop())
    for series in expect.SAMPLE_SERIES:
        assert f"samples.{series} has {steps + 1} values" in problems(
            lambda b, s=series: b["samples"][s].append(8)
        )
    # the eval steps against params/cadence.py of its own config
    want = eval_steps(config["train"])
    if want:  # eval_every 0: no evals, an empty list is right
        assert f"eval steps [], its config implies {want}" in problems(lambda b: b.update(eval=[]))
    assert "eval steps" in problems(lambda b: b["eval"].append({"step": steps + 1, "loss": 1.0}))
    # the world against the per-rank lists
    assert f"cross_rank lists ranks [0, 1, 2, 3, 4] for world {world}" in problems(
        lambda b: b["cross_rank"].update(per_rank=[{"rank": r} for r in range(5)])
    )
    assert "perf.peak_memory lists ranks" in problems(lambda b: b["perf"]["peak_memory"]["per_rank"].pop())
    if launcher == "single":
        assert "world 2: a single-device run has world 1" in problems(
            lambda b: b.update(world=2, cross_rank={"per_rank": [{"rank": 0}, {"rank": 1}]})
        )


@pytest.mark.parametrize("key", ["steps", "eval_every"])
def test_a_record_without_its_shape_in_the_config_is_refused_naming_the_key(key: str) -> None:
    config = {"seed": 0, "model": {}, "train": {"steps": 4, "eval_every": 2}}
    m = record(config, "single", 1)
    del m["config"]["train"][key]
    m["config_hash"] = config_identity(m["config"])
    found = "; ".join(expect.run_problems(None, "single", m))
    assert f"runs/single/metrics.json: config.train.{key}: '<absent>' is not" in found


def test_bookkeeping_in_the_config_is_not_identity() -> None:
    """A run that logged or checkpointed otherwise is the same configuration (params/identity.py)."""
    config = {"seed": 0, "model": {}, "train": {"steps": 4, "eval_every": 2, "log_every": 1}}
    m = record(config, "single", 1)
    m["config"]["train"]["log_every"] = 4
    assert expect.run_problems(None, "single", m) == []


# ---- our pipeline: params.yaml describes runs, and runs must also agree with it -------------------


def pipeline_record(params_overrides: list[str], launcher: str = "single") -> dict[str, Any]:
    run = load_params(PARAMS, params_overrides).run_config(2048)
    world = 1 if launcher == "single" else 2
    return record(run.to_dict(), launcher, world)


def test_a_run_trained_before_a_params_edit_is_refused_naming_the_key() -> None:
    params = load_params(PARAMS)
    assert params.describes_runs
    m = pipeline_record([])
    assert expect.run_problems(params, "single", m) == []
    stale = pipeline_record(["train.lr=0.002"])  # consistent with itself, not with params.yaml
    assert expect.run_problems(None, "single", stale) == []
    found = "; ".join(expect.run_problems(params, "single", stale))
    assert "params.yaml gives" in found and "differing keys: train.lr 0.002 vs 0.003" in found
    # bookkeeping edited in params.yaml: the same configuration, not stale
    assert expect.run_problems(load_params(PARAMS, ["train.log_every=3"]), "single", m) == []
    # the world params.yaml gives a launcher
    assert "world 2, params.yaml says 1" in "; ".join(
        expect.run_problems(
            load_params(PARAMS, ["launchers.thread.world=1"]), "thread", pipeline_record([], "thread")
        )
    )


def test_a_hand_edited_hash_on_a_params_run_names_both() -> None:
    params = load_params(PARAMS)
    m = pipeline_record([])
    m["config_hash"] = "0" * 16
    found = "; ".join(expect.run_problems(params, "single", m))
    assert "config_hash: 0000000000000000 is not the identity of the record's own config" in found
    assert "params.yaml gives" in found and "the configs are equal: a hash was edited" in found


# ---- runs referenced against each other -----------------------------------------------------------


def test_a_thread_run_of_another_config_is_judged_by_what_it_did() -> None:
    """Without params.yaml describing runs the records are the truth: two runs of different identity
    are compared by what they did (gates/judges/ddp.py check_observed); the config keys are named as
    the cause where an observed quantity differs, and as information where none does."""
    base = {"seed": 0, "model": {"dim": 32}, "train": {"steps": 6, "eval_every": 3, "grad_accum": 2}}
    single = record(base, "single", 1)
    other = copy.deepcopy(base)
    other["train"]["grad_accum"] = 1  # per rank at world 2: the global batch unchanged
    thread = record(other, "thread", 2)
    assert expect.run_problems(None, "thread", thread) == []  # each record is consistent with itself
    lm = {"max_rel": 1e-3, "cpu": {"first_step_rtol": 1e-5, "prefix_steps": None, "final_val_atol": 0.01}}
    for m in (single, thread):
        m.update(device="cpu", precision="fp32", final_val_loss=2.0, tokens_per_step=64, n_params=9)
    outcome = ddp.equivalence(single, thread, "thread", lm)
    assert outcome.status == "pass", outcome.message
    assert "config keys differ, no observed quantity does: train.grad_accum 1 vs 2" in outcome.message
    thread["samples"]["count"] = [4] * 6  # the accumulation divided twice: half the rows
    outcome = ddp.equivalence(single, thread, "thread", lm)
    assert outcome.status == "fail"
    assert (
        "train.grad_accum 1 vs 2 changed rows per step: 4 vs 8 at step 0 (and 5 more steps)"
        in outcome.message
    )
