"""gates/judges/ddp.py check_observed under mutation (docs/judge-mutation.md): what the runs did, not
what their configs say (issue 54 item 1).

Hand-built records in the shape runrecord writes for nanoGPT: its config dict as it is (out_dir per
launcher; gradient_accumulation_steps divided by the world size under DDP), and what the runs did
(rows per step, tokens per step, the lr per step, the parameters' count, shapes and initial digest).
A config difference that changes none of them is information in the pass message; one that does is
named with the quantity it changed; a changed quantity with the same config (or cosmetic keys only)
is the code's.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from gates.judges import ddp
from gates.judges.ddp import check_observed, equivalence, observed, observed_difference, shape_problem

LOSS_MATCH = {
    "max_rel": 1e-3,
    "cpu": {"first_step_rtol": 1e-5, "prefix_steps": None, "final_val_atol": 0.01},
}
SAME = (
    "the same rows per step, tokens per step, lr per step, parameter count, parameter shapes, initial "
    "parameters as single"
)
ROWS_HINT = (
    "each rank reads its share of the step's global batch: divide the gradient accumulation (or the "
    "batch) by the world size"
)
LR_HINT = "the lr schedule must follow the optimizer step, stepped once per step"
INIT_HINT = (
    "other weights before the first step: the seed or the init differs (under DDP, rank 0's weights are "
    "broadcast at the wrap)"
)


def nanogpt(launcher: str = "single", world: int = 1, accum: int = 4, **changes) -> dict:
    """runs/<launcher>/metrics.json of nanoGPT recorded with its config dict as it is: 4 steps of
    batch 8 x accumulation 4 = 32 rows per step, whatever the world."""
    m = {
        "config_hash": f"h-{launcher}-{accum}",
        "config": {
            "seed": 1337,
            "model": {"n_layer": 2},
            "train": {"steps": 4, "eval_every": 2},
            "out_dir": f"out-{launcher}",
            "gradient_accumulation_steps": accum,
            "batch_size": 8,
        },
        "steps": 4,
        "world": world,
        "device": "cpu",
        "precision": "fp32",
        "tokens_per_step": 32 * 64,
        "n_params": 1234,
        "param_shapes_digest": "5" * 64,
        "init_param_digest": "a" * 64,
        "train_loss": [4.0, 3.5, 3.0, 2.5],
        "grad_norm": [2.0, 3.0, 4.0, 5.0],
        "lr": [6e-4, 5e-4, 4e-4, 3e-4],
        "samples": {
            "count": [32] * 4,
            "hash_sum": [100, 101, 102, 103],
            "dropout_hash_sum": [0] * 4,
        },
        "eval": [{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.5}, {"step": 4, "loss": 2.0}],
        "final_val_loss": 2.0,
        "eval_mode_steps": [],
    }
    m.update(changes)
    return m


def proc(**changes) -> dict:
    """The torchrun run at world 2: nanoGPT divides the accumulation, the global batch is unchanged."""
    return nanogpt("proc", 2, accum=2, **changes)


# -- the verdict: what changed, named ------------------------------------------------------------------------


def test_out_dir_alone_passes_with_the_difference_as_information() -> None:
    s, d = nanogpt(), nanogpt("proc", 2)
    o = equivalence(s, d, "proc", LOSS_MATCH)
    assert o.status == "pass", o.message
    assert o.message.endswith(
        f"{SAME}; config keys differ, no observed quantity does: out_dir 'out-proc' vs 'out-single'"
    )


def test_nanogpts_accumulation_arithmetic_passes() -> None:
    """gradient_accumulation_steps 4 on one device, 2 per rank at world 2: the same 32 rows per step."""
    o = equivalence(nanogpt(), proc(), "proc", LOSS_MATCH)
    assert o.status == "pass", o.message
    assert o.message.endswith(
        f"{SAME}; config keys differ, no observed quantity does: gradient_accumulation_steps 2 vs 4, "
        "out_dir 'out-proc' vs 'out-single'"
    )


def test_accumulation_not_divided_fails_naming_rows_per_step() -> None:
    """Each rank kept the single run's accumulation: 64 rows per step, named with the config key."""
    d = nanogpt("proc", 2, accum=4)
    d["samples"]["count"] = [64] * 4
    c = check_observed(nanogpt(), d, "proc")
    assert (c.name, c.ok) == ("observed", False)
    assert c.detail == (
        "proc vs single: rows per step: 64 vs 32 at step 0 (and 3 more steps) (only cosmetic keys differ: "
        f"out_dir 'out-proc' vs 'out-single'): {ROWS_HINT}"
    )
    o = equivalence(nanogpt(), d, "proc", LOSS_MATCH)
    assert o.status == "fail" and f"observed: {c.detail}" in o.message
    # recorded after the division, the key itself differs: named as the cause
    d["config"]["gradient_accumulation_steps"] = 8
    assert check_observed(nanogpt(), d, "proc") == ddp.Check(
        "observed",
        False,
        "proc vs single: gradient_accumulation_steps 8 vs 4 changed rows per step: 64 vs 32 at step 0 (and 3 "
        f"more steps): {ROWS_HINT}",
    )


def test_an_lr_at_one_step_fails_naming_the_step_and_both_lrs() -> None:
    d = proc()
    d["lr"][2] = 5e-4  # the schedule one step behind at step 2 only
    c = check_observed(nanogpt(), d, "proc")
    assert c.detail == (
        "proc vs single: gradient_accumulation_steps 2 vs 4 changed lr per step: 0.0005 vs 0.0004 at step 2: "
        f"{LR_HINT}"
    )  # the judge cannot tell which key caused it: every non-cosmetic key that differs is named
    assert not c.ok
    o = equivalence(nanogpt(), d, "proc", LOSS_MATCH)
    assert o.status == "fail" and f"observed: {c.detail}. Next: see docs/ddp-gate.md; compare " in o.message


def test_a_differing_lr_with_the_same_config_is_the_codes() -> None:
    s = nanogpt()
    d = copy.deepcopy(s)
    d["lr"][1:] = [4e-4, 3e-4, 2e-4]
    assert check_observed(s, d, "thread", ref="single").detail == (
        f"thread vs single: lr per step: 0.0004 vs 0.0005 at step 1 (and 2 more steps) (the same config): {LR_HINT}"
    )


def test_other_initial_weights_fail_naming_init() -> None:
    d = proc(init_param_digest="b" * 64)
    c = check_observed(nanogpt(), d, "proc", cosmetic=("gradient_accumulation_steps",))
    assert not c.ok
    assert c.detail == (
        "proc vs single: initial parameters: bbbbbbbb vs aaaaaaaa (only cosmetic keys differ: "
        f"gradient_accumulation_steps 2 vs 4, out_dir 'out-proc' vs 'out-single'): {INIT_HINT}"
    )
    d["config"]["seed"] = 1338
    assert check_observed(nanogpt(), d, "proc", cosmetic=("gradient_accumulation_steps",)).detail == (
        f"proc vs single: seed 1338 vs 1337 changed initial parameters: bbbbbbbb vs aaaaaaaa: {INIT_HINT}"
    )


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("tokens_per_step", 4096, "tokens per step: 4096 vs 2048 (the same config): the tokens one optimizer "
         "step trains over all ranks"),
        ("n_params", 1235, "parameter count: 1235 vs 1234 (the same config): another model"),
        ("param_shapes_digest", "6" * 64, "parameter shapes: 66666666 vs 55555555 (the same config): another "
         "model: names or shapes differ"),
    ],
)  # fmt: skip
def test_each_other_quantity_is_named_with_its_hint(key: str, value, said: str) -> None:
    s = nanogpt()
    d = dict(copy.deepcopy(s), **{key: value})
    c = check_observed(s, d, "thread")
    assert (c.ok, c.detail) == (False, f"thread vs single: {said}")


def test_several_quantities_are_named_once_each_with_one_hint_per_cause() -> None:
    s = nanogpt()
    d = copy.deepcopy(s)
    d["n_params"], d["param_shapes_digest"] = 99, "7" * 64
    d["config"]["model"]["n_layer"] = 1
    assert check_observed(s, d, "proc").detail == (
        "proc vs single: model.n_layer 1 vs 2 changed parameter count: 99 vs 1234; parameter shapes: 77777777 "
        "vs 55555555: another model; another model: names or shapes differ"
    )


def test_a_project_marks_its_own_keys_cosmetic() -> None:
    """gates.loss_match.cosmetic_keys: a marked key is never blamed, unmarked it is."""
    s = nanogpt()
    d = copy.deepcopy(s)
    d["config"]["notes"] = "second try"
    d["lr"][0] = 1.0
    blamed = check_observed(s, d, "proc").detail
    assert blamed.startswith(
        "proc vs single: notes 'second try' vs '<absent>' changed lr per step: 1.0 vs 0.0006"
    )
    marked = check_observed(s, d, "proc", cosmetic=("notes",)).detail
    assert marked.startswith(
        "proc vs single: lr per step: 1.0 vs 0.0006 at step 0 (only cosmetic keys differ: notes"
    )
    o = equivalence(s, d, "proc", {**LOSS_MATCH, "cosmetic_keys": ["notes"]})
    assert "(only cosmetic keys differ: notes 'second try' vs '<absent>')" in o.message


def test_older_records_without_digests_are_judged_by_the_rest() -> None:
    s, d = nanogpt(), proc()
    for m in (s, d):
        del m["init_param_digest"], m["param_shapes_digest"]
    c = check_observed(s, d, "proc")
    assert c.ok and c.detail.startswith(
        "the same rows per step, tokens per step, lr per step, parameter count as single (parameter shapes, "
        "initial parameters: not recorded); config keys differ"
    )
    del s["n_params"]  # one side only: not compared either
    assert check_observed(s, d, "proc").detail.startswith(
        "the same rows per step, tokens per step, lr per step as single (parameter count, parameter shapes, "
        "initial parameters: not recorded); "
    )
    same = nanogpt()
    assert check_observed(same, copy.deepcopy(same), "thread") == ddp.Check("observed", True, SAME)


# -- negative control: the old refusal re-planted is caught ------------------------------------------


def old_shape_problem(single: dict, other: dict, run: str, ref: str = "single") -> str | None:
    """Today's main before issue 54: two config hashes that differ are refused, whatever the runs did."""
    if single["config_hash"] != other["config_hash"]:
        return f"runs/{run} and runs/{ref} trained different configurations: re-run both with one config"
    return shape_problem(single, other, run, ref)


def test_the_old_refusal_replanted_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass cases above fail against the old rule: they can tell it from the new one."""
    monkeypatch.setattr(ddp, "shape_problem", old_shape_problem)
    for s, d in ((nanogpt(), nanogpt("proc", 2)), (nanogpt(), proc())):
        o = equivalence(s, d, "proc", LOSS_MATCH)
        assert o.status == "fail" and "trained different configurations" in o.message


# -- the parts ---------------------------------------------------------------------------------------------


def test_observed_reads_a_path_or_none() -> None:
    m = {"a": {"b": 3}, "c": 5}
    assert observed(m, ("a", "b")) == 3
    assert observed(m, ("c",)) == 5
    assert observed(m, ("a", "x")) is None
    assert observed(m, ("c", "b")) is None  # not a dict on the way
    assert observed(m, ("x", "b")) is None


def test_observed_difference_says_how_or_none() -> None:
    assert observed_difference(None, 1, False) is None
    assert observed_difference(1, None, False) is None
    assert observed_difference([1, 2], [1, 2], True) is None
    assert observed_difference(3, 4, False) == "3 vs 4"
    assert observed_difference("0123456789", "abcdefghij", False) == "01234567 vs abcdefgh"
    assert observed_difference([1, 2, 3], [1, 5, 3], True) == "2 vs 5 at step 1"
    assert observed_difference([0, 2, 3], [1, 5, 3], True) == "0 vs 1 at step 0 (and 1 more steps)"
    assert observed_difference([9, 9, 9], [1, 2, 3], True) == "9 vs 1 at step 0 (and 2 more steps)"
    assert observed_difference([0.5], [0.25], True) == "0.5 vs 0.25 at step 0"


def test_params_yaml_declares_cosmetic_keys_validated() -> None:
    """gates.loss_match.cosmetic_keys: a list of patterns, validated with the rest of `gates:`."""
    from contracts.validate import ValidationError
    from params.config import check_thresholds
    from params.project import HARNESS_PARAMS

    harness_gates = yaml.safe_load(HARNESS_PARAMS.read_text())["gates"]

    gates = copy.deepcopy(harness_gates)
    gates["loss_match"]["cosmetic_keys"] = ["notes", "*_url"]
    assert check_thresholds(gates, "params.yaml") is gates
    for bad in (5, [""], [3]):
        gates["loss_match"]["cosmetic_keys"] = bad
        with pytest.raises(ValidationError) as e:
            check_thresholds(gates, "params.yaml")
        assert "gates.loss_match.cosmetic_keys" in str(e.value), str(e.value)


def test_series_of_other_lengths_are_refused_loudly() -> None:
    """shape_problem refuses runs of other lengths first; a per-step comparison never truncates."""
    with pytest.raises(ValueError):
        observed_difference([1, 2, 3], [1, 5], True)


def test_other_rows_alone_fail_the_samples_check_with_its_next() -> None:
    """The same rows per step but other rows: observed agrees, samples names it, Next says compare."""
    d = proc()
    d["samples"]["hash_sum"][1] = 999
    o = equivalence(nanogpt(), d, "proc", LOSS_MATCH)
    assert o.status == "fail" and "observed" not in o.message
    assert o.message.endswith(
        "Next: see docs/ddp-gate.md; compare runs/single/loss.csv with runs/proc/loss.csv"
    ), o.message
