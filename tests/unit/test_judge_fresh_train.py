"""gates/judges/fresh_train.py and gates/reading/goldens.py under mutation (docs/judge-mutation.md).

Which golden judges a run and in which tier (own environment: exact; another: approximate, same
device type first, then precision, then env_id), whether the golden covers the config, and each
tier's verdict and message, on a scratch registry of hand-made goldens and hand-made records.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gates.judges.fresh_train import (
    ApproxTier,
    _approx,
    _approx_outs,
    _exact,
    _no_golden,
    approx_threshold,
)
from gates.judges.tolerance import Approx
from gates.reading.goldens import Choice, choose, coverage_problems, golden_env
from gates.reading.registry_records import OwnGolden, choose_golden
from judge_trees import make_golden, make_registry
from registry.store import Entry, Registry

CPU = {"loss_rtol": 1e-4, "max_steps_out": 1, "eval_rtol": 1e-3}
CUDA = {"loss_rtol": 1e-3, "max_steps_out": 0, "eval_rtol": 1e-4, "prefix_steps": 2, "final_val_atol": 0.08}
MD5 = {"model.safetensors": "a" * 32}


@pytest.fixture()
def reg(tmp_path: Path) -> Registry:
    return make_registry(tmp_path / "registry")


def record(steps: int = 4, **changes) -> dict:
    m = {
        "train_loss": [4.0, 3.5, 3.0, 2.5][:steps],
        "eval": [{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.5}, {"step": 4, "loss": 2.0}],
        "env": {"env_id": "cpu-own"},
        "config_hash": "cfg1",
        "device": "cpu",
        "precision": "fp32",
    }
    m.update(changes)
    return m


def golden(reg: Registry, env: str = "cpu-own", **kw) -> Choice:
    path = make_golden(reg, env, **kw)
    entry = next(e for e in Registry(reg.root).goldens(env) if e.path == path)
    return Choice(entry, entry.data["tier"], cross_env=False)


# -- goldens: the choice ------------------------------------------------------------------------------


def test_the_own_environments_golden_of_this_config_is_exact(reg: Registry) -> None:
    make_golden(reg, "cpu-own", config_hash="old")
    make_golden(reg, "cpu-own")
    make_golden(reg, "cpu-other")
    c = choose(Registry(reg.root), "cpu-own", "cfg1", "cpu", "fp32")
    assert (c.tier, c.cross_env, c.name, c.entry.version) == ("exact", False, "cpu-own v2", 2)
    make_golden(reg, "cpu-own", tier="approx")
    assert choose(Registry(reg.root), "cpu-own", "cfg1", "cpu", "fp32").tier == "approx"


def test_without_one_another_environments_golden_of_this_config_is_approximate(reg: Registry) -> None:
    make_golden(reg, "cpu-own", config_hash="old")
    make_golden(reg, "cpu-b", config_hash="cfg1")
    make_golden(reg, "cpu-b", config_hash="cfg1")
    make_golden(reg, "cpu-b", config_hash="other")
    make_golden(reg, "cpu-a", config_hash="other")
    c = choose(Registry(reg.root), "cpu-own", "cfg1", "cpu", "fp32")
    assert (c.tier, c.cross_env, c.name) == ("approx", True, "cpu-b v2")  # its latest of this config
    assert choose(Registry(reg.root), "cpu-own", "nothing", "cpu", "fp32") is None


def test_the_preference_is_device_type_then_precision_then_env_id(reg: Registry) -> None:
    make_golden(reg, "a-cuda-bf16", device_type="cuda", precision="bf16")
    make_golden(reg, "b-cuda-fp32", device_type="cuda", precision="fp32")
    make_golden(reg, "d-cpu-bf16", device_type="cpu", precision="bf16")
    make_golden(reg, "e-cpu-fp32", device_type="cpu", precision="fp32")
    make_golden(reg, "f-cpu-fp32", device_type="cpu", precision="fp32")
    pick = lambda device, precision: choose(Registry(reg.root), "own", "cfg1", device, precision).name  # noqa: E731
    assert pick("cpu", "fp32") == "e-cpu-fp32 v1"
    assert pick("cpu", "bf16") == "d-cpu-bf16 v1"
    assert pick("cuda", "fp32") == "b-cuda-fp32 v1"
    assert pick("cuda", "bf16") == "a-cuda-bf16 v1"
    assert pick("mps", "fp16") == "a-cuda-bf16 v1"


def test_golden_env_falls_back_to_the_env_id_and_fp32(reg: Registry) -> None:
    make_golden(reg, "cuda-x", device_type=None, precision=None)
    make_golden(reg, "cpu-y", device_type="cuda", precision="bf16")
    assert golden_env(Registry(reg.root).golden("cuda-x")) == ("cuda", "fp32")
    assert golden_env(Registry(reg.root).golden("cpu-y")) == ("cuda", "bf16")


def test_coverage_needs_every_step_and_the_evals_the_config_implies() -> None:
    g = {"env_id": "e", "version": 3, "metrics": {"train_loss": {"values": {"0": 1, "1": 1, "2": 1, "3": 1}},
                                                  "val_loss": {"values": {"0": 1, "2": 1, "4": 1}}}}  # fmt: skip
    train = {"steps": 4, "eval_every": 2}
    assert coverage_problems(g, train) == []
    assert coverage_problems(g, {"steps": 5, "eval_every": 2}) == [
        "golden e v3 holds train losses for 4 steps, the config has 5",
        "golden e v3 holds val losses at steps ['0', '2', '4'], the config implies ['0', '2', '4', '5']",
    ]
    g["metrics"]["train_loss"]["values"] = {"0": 1, "1": 1, "3": 1, "2": 1}  # order does not matter
    del g["metrics"]["val_loss"]
    assert coverage_problems(g, train) == [
        "golden e v3 holds val losses at steps [], the config implies ['0', '2', '4']"
    ]


def test_the_gate_chooses_with_the_runs_own_identity(reg: Registry) -> None:
    make_golden(reg, "cpu-a", device_type="cpu", precision="bf16")
    make_golden(reg, "cpu-b", device_type="cpu", precision="fp32")
    m = record(
        env={"env_id": "cpu-own"},
        device="cpu",
        precision="bf16",
        config={"train": {"steps": 4, "eval_every": 2}},
    )
    assert choose_golden(Registry(reg.root), m)[0].golden.name == "cpu-a v1"
    assert choose_golden(Registry(reg.root), {**m, "config_hash": "x"})[0].golden is None


# -- no golden --------------------------------------------------------------------------------------------


def test_no_golden_anywhere_is_unblessed_and_the_policy_decides(reg: Registry) -> None:
    for policy, status in (("skip", "skip"), ("fail", "fail")):
        o = _no_golden(None, "cpu-own", "cfg9", policy)
        assert (o.status, o.measured, o.threshold) == (status, "unblessed", None)
        assert o.message == (
            "unblessed: no golden for environment cpu-own nor for config cfg9 on any other. If this run is "
            "right, bless it: python -m registry bless --golden --reason '...'"
        )


def test_an_own_golden_of_another_config_fails_naming_both_configs(reg: Registry) -> None:
    make_golden(reg, "cpu-own", config_hash="old", tier="approx")
    choice, entry = choose_golden(Registry(reg.root), record(config_hash="cfg9"))
    assert (choice.golden, choice.own, choice.problem, entry) == (
        None,
        OwnGolden(1, "old", "approx"),
        None,
        None,
    )
    o = _no_golden(choice.own, "cpu-own", "cfg9", "skip")
    assert (o.status, o.measured, o.threshold) == ("fail", None, "approx")
    assert o.message == (
        "golden cpu-own v1 was blessed for config old, this run is cfg9, and no other environment has a "
        "golden for it: an intended config change needs a new golden (python -m registry bless --golden "
        "--reason '...')"
    )


# -- the exact tier ---------------------------------------------------------------------------------------


def test_exact_passes_only_bit_identical(reg: Registry) -> None:
    c = golden(reg)
    o = _exact(record(), c.entry.data, dict(MD5), c)
    assert (o.status, o.measured, o.threshold) == ("pass", "bitwise", "exact")
    assert o.message == (
        "exact tier vs golden cpu-own v1: 4 losses, 3 val losses and 1 export files bit-identical"
    )


def test_exact_names_the_first_differing_step_and_every_other_difference(reg: Registry) -> None:
    c = golden(reg)
    m = record()
    m["train_loss"] = [4.0, 3.5 + 1e-12, 3.0, 2.0]
    m["eval"][1]["loss"] = 3.4
    o = _exact(m, c.entry.data, {"model.safetensors": "b" * 32, "extra": "c" * 32}, c)
    assert (o.status, o.threshold) == ("fail", "exact")
    assert o.measured in (
        "2 steps, 2 files differ",
        "2 steps, 2 export files differ",
    )  # main after a32e5d3: the latter
    assert o.message == (
        "exact tier vs golden cpu-own v1: first differing step 1 (golden 3.5, run 3.500000000001), 2 steps "
        "differ, max rel 0.2; val loss differs at steps [2]; export files differ: extra, model.safetensors. "
        "This environment trained bit-identically before: find the change that moved the numbers (git bisect "
        "with `dvc repro train_single`), or if intended bless a new golden with a reason"
    )


@pytest.mark.parametrize(
    ("change", "part"),
    [
        (
            lambda m: m["eval"][2].update(loss=2.1),
            "exact tier vs golden cpu-own v1: val loss differs at steps [4].",
        ),
        (lambda m: None, "exact tier vs golden cpu-own v1: export files differ: model.safetensors."),
    ],
)
def test_exact_fails_on_val_losses_or_files_alone(reg: Registry, change, part: str) -> None:
    c = golden(reg)
    m = record()
    change(m)
    files = dict(MD5) if "val" in part else {"model.safetensors": "b" * 32}
    o = _exact(m, c.entry.data, files, c)
    assert o.status == "fail" and o.message.startswith(part)
    n = 0 if "val" in part else 1
    assert o.measured in (f"0 steps, {n} files differ", f"0 steps, {n} export files differ")


# -- the approximate tier -----------------------------------------------------------------------------------


def test_approx_tiers_and_their_descriptions() -> None:
    cpu = ApproxTier.of(CPU)
    assert cpu == ApproxTier(Approx.relative(1e-4, max_out=1), None, Approx.relative(1e-3), None)
    assert cpu.describe() == approx_threshold(CPU) == "rtol 0.0001, <= 1 steps out, eval rtol 0.001"
    cuda = ApproxTier.of(CUDA)
    assert cuda == ApproxTier(Approx.relative(1e-3), 2, Approx.relative(1e-4), Approx.absolute(0.08))
    assert cuda.describe() == (
        "rtol 0.001 over the first 2 steps, <= 0 out, val@0 rtol 0.0001, |final val diff| <= 0.08"
    )
    prefix_only = ApproxTier.of({**CUDA, "final_val_atol": None})
    assert (
        prefix_only.final_val is None
        and prefix_only.describe() == "rtol 0.001, <= 0 steps out, eval rtol 0.0001"
    )


def test_approx_outs_judge_every_step_and_val_loss_without_a_prefix() -> None:
    got, want = [4.0, 3.6, 3.0, 2.6], [4.0, 3.5, 3.0, 2.5]
    vals = [(0, 4.5, 4.5), (2, 3.6, 3.5), (4, 2.0, 2.0)]
    loss, val_out = _approx_outs(got, want, vals, ApproxTier.of(CPU))
    assert (loss.out, loss.ok, loss.judged) == ((1, 3), False, 4)
    assert val_out == [(2, pytest.approx(0.1 / 3.5))]


def test_approx_outs_with_a_prefix_judge_it_the_first_val_and_the_final_val() -> None:
    got, want = [4.0, 3.5, 9.0, 9.0], [4.0, 3.5, 3.0, 2.5]
    tier = ApproxTier.of(CUDA)
    loss, val_out = _approx_outs(got, want, [(0, 4.5, 4.5), (2, 9.0, 3.5), (4, 2.05, 2.0)], tier)
    assert (loss.out, loss.judged, val_out) == ((), 2, [])
    _, val_out = _approx_outs(got, want, [(0, 4.6, 4.5), (2, 3.5, 3.5), (4, 2.2, 2.0)], tier)
    assert val_out == [(0, pytest.approx(0.1 / 4.5)), (4, pytest.approx(0.2))]
    _, val_out = _approx_outs(got, want, [(2, 3.5, 3.5), (4, math.nan, 2.0)], tier)
    assert len(val_out) == 1 and val_out[0][0] == 4 and math.isnan(val_out[0][1])  # no val@0 to judge
    assert _approx_outs(got, want, [], tier)[1] == []


def approx_choice(reg: Registry, cross_env: bool) -> Choice:
    c = golden(reg, "cpu-b", tier="approx")
    return Choice(c.entry, "approx", cross_env)


def test_approx_passes_within_its_bounds(reg: Registry) -> None:
    c = approx_choice(reg, cross_env=True)
    m = record()
    m["train_loss"][3] = 2.5 * (1 + 5e-4)  # one step out, one allowed
    o = _approx(m, c.entry.data, {"model.safetensors": "b" * 32}, c, CPU)
    assert (o.status, o.measured) == ("pass", "1 steps out")
    assert o.threshold == "approx vs cpu-b v1: rtol 0.0001, <= 1 steps out, eval rtol 0.001"
    head = (
        "approximate tier vs golden cpu-b v1 (another environment's golden): max rel 0.0005, 1 steps out, 0 "
        "val losses out (rtol 0.0001, <= 1 steps out, eval rtol 0.001); "
    )
    assert o.message in (  # the wording before and after main's a32e5d3..bb1fcaa (export files or digest)
        head + "export md5 differs (not judged in this tier)",
        head + "export files differ (not judged in this tier)",
    )


def test_approx_fails_naming_the_first_step_and_the_val_losses_out(reg: Registry) -> None:
    c = approx_choice(reg, cross_env=False)
    m = record()
    m["train_loss"] = [4.0, 3.6, 3.0, 2.6]
    m["eval"][2]["loss"] = 2.5
    o = _approx(m, c.entry.data, dict(MD5), c, CPU)
    assert (o.status, o.measured) == ("fail", "2 steps out")
    head = (
        "approximate tier vs golden cpu-b v1 (a golden blessed approximate): max rel 0.04, 2 steps out, 1 "
        "val losses out (rtol 0.0001, <= 1 steps out, eval rtol 0.001); "
    )
    tail = (
        "; first step out: 1 (golden 3.5, run 3.6); val loss out at steps [4]. A real change of the numbers "
        "(lr, init, data order), not machine noise: compare runs/single/loss.csv with the golden's values"
    )
    assert o.message in (
        head + "export md5 equal" + tail,
        head + "export files equal (not judged in this tier)" + tail,
    )


def test_approx_fails_on_val_losses_alone(reg: Registry) -> None:
    c = approx_choice(reg, cross_env=True)
    m = record()
    m["eval"][0]["loss"] = 4.6
    o = _approx(m, c.entry.data, dict(MD5), c, CPU)
    assert (o.status, o.measured) == ("fail", "0 steps out")
    assert o.message.endswith("; val loss out at steps [0]. A real change of the numbers (lr, init, data order), "
                               "not machine noise: compare runs/single/loss.csv with the golden's values")  # fmt: skip
    assert (
        "export md5 equal; val" in o.message
        or "export files equal (not judged in this tier); val" in o.message
    )


def test_entries_name_themselves_by_env_and_version() -> None:
    entry = Entry(Path("g/v7.json"), {"env_id": "cpu-z", "version": 7})
    assert Choice(entry, "exact", False).name == "cpu-z v7"
