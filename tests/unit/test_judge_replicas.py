"""gates/judges/replicas.py and distributions.py under mutation: the statistical tier as pure functions.

Hand-made replica records: a decaying loss curve plus per-replica noise (white per step, and a slow
random walk: the weights' drift), drawn from seeded generators. Each check gets records that differ in
exactly one way; the tests pin the verdict, the statistic and the message. Negative controls: the same
statistic at a loose alpha alarms on unshifted noise (the test can fail), an unshifted run passes.
"""

from __future__ import annotations

import copy
import math
import random

import pytest

from gates.judges.ddp import check_dropout
from gates.judges.distributions import betainc, f_upper, t_two_sided
from gates.judges.replicas import (
    CurveTest,
    StatTier,
    check_cross_rank,
    check_lr,
    check_val0,
    curve_tests,
    hint,
    judge_replicas,
    level_test,
    nonfinite,
    replicas_agree,
    roughness_test,
    shape_problem,
)

STEPS = 30


def curve(rng: random.Random, start: float, white: float, walk: float) -> list[float]:
    out, drift = [], 0.0
    for i in range(STEPS):
        drift += rng.gauss(0.0, walk)
        out.append(start * math.exp(-i / 20) + drift + rng.gauss(0.0, white))
    return out


def record(seed: int, index: int, world: int = 1, white: float = 0.01, **changes) -> dict:
    rng = random.Random(seed)
    m = {
        "config_hash": "h1",
        "config": {"train": {"lr": 0.1}},
        "steps": STEPS,
        "device": "cpu",
        "precision": "fp32",
        "world": world,
        "launcher": "single" if world == 1 else "proc",
        "train_loss": curve(rng, 4.0, white, 0.002),
        "grad_norm": curve(rng, 1.0, 0.02, 0.002),
        "lr": [0.001 * (i + 1) for i in range(STEPS)],
        "eval": [{"step": 0, "loss": 4.1}]
        + [{"step": s, "loss": 4.0 * math.exp(-s / 20) + rng.gauss(0, 0.005)} for s in (10, 20, 30)],
        "samples": {
            "count": [8] * STEPS,
            "hash_sum": [100 + i for i in range(STEPS)],
            "dropout_hash_sum": [0] * STEPS,
        },
        "dropout": {"masks": "unseeded", "modules": 3, "p": [0.1]},
        "replica": {"index": index, "tier": "statistical", "noise_seed": seed},
        "cross_rank": {
            "max_abs_diff": 0.0,
            "per_rank": [{"rank": r, "max_abs_diff": 0.0, "param_sum": 1.0} for r in range(world)],
        },
        "runrecord": "1.4",
    }
    m.update(changes)
    return m


def replicas(k: int, base: int = 0) -> list[tuple[str, dict]]:
    return [(f"runs/single-r{i}", record(1000 * base + i, i)) for i in range(k)]


def ddp(seed: int = 999, **changes) -> tuple[str, dict]:
    return ("runs/proc", record(seed, 0, world=2, **changes))


TIER = StatTier()


# ---- distributions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "df", "p"),
    [
        (0.5, 3, 0.651447964848151),
        (5.841, 3, 0.00999956447532415),
        (17.3, 2, 0.0033245878115029178),
        (1.0, 1, 0.5),
        (3.0, 30, 0.005389964065651945),
        (40.0, 3, 3.4380680789158506e-05),
        (0.0, 5, 1.0),
    ],
)
def test_t_two_sided_matches_reference_values(t, df, p):  # reference: scipy.stats.t.sf * 2
    assert t_two_sided(t, df) == pytest.approx(p, rel=1e-9)
    assert t_two_sided(-t, df) == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize(
    ("f", "a", "b", "p"),
    [
        (1.0, 39, 117, 0.48257943685580296),
        (1.9, 39, 117, 0.0045494127825127725),
        (3.0, 10, 5, 0.11848355278206942),
        (0.5, 2, 2, 0.6666666666666667),
        (10.0, 1, 1, 0.19498222904213666),
    ],
)
def test_f_upper_matches_reference_values(f, a, b, p):  # reference: scipy.stats.f.sf
    assert f_upper(f, a, b) == pytest.approx(p, rel=1e-9)


def test_distribution_edges():
    assert betainc(2.0, 3.0, 0.0) == 0.0 and betainc(2.0, 3.0, 1.0) == 1.0
    assert betainc(2.0, 3.0, -0.5) == 0.0 and betainc(2.0, 3.0, 1.5) == 1.0
    assert betainc(2.0, 3.0, 0.4) == pytest.approx(0.5248, rel=1e-12)  # 1 - sum: exact polynomial
    assert betainc(2.0, 3.0, 0.9) == pytest.approx(0.9963, rel=1e-12)
    assert betainc(0.5, 0.5, 0.25) == pytest.approx(1 / 3, rel=1e-12)  # arcsine law: (2/pi) asin(sqrt x)
    assert betainc(5.0, 20.0, 0.9) == pytest.approx(1.0, rel=1e-12)  # far right: the mirrored fraction
    assert betainc(2000.0, 20000.0, 0.01) == 0.0  # far left tail underflows, never raises
    assert betainc(2.0, 3.0, 0.1) == pytest.approx(0.0523, rel=1e-12)
    assert t_two_sided(math.inf, 3) == 0.0 and t_two_sided(math.nan, 3) == 0.0
    assert f_upper(math.inf, 3, 4) == 0.0 and f_upper(math.nan, 3, 4) == 0.0
    assert f_upper(0.0, 3, 4) == 1.0 and f_upper(-1.0, 3, 4) == 1.0


# ---- the statistics ---------------------------------------------------------------------------------


def test_level_test_exact_numbers():
    t = level_test("x", [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], [4.0, 4.0])
    # means 1, 2, 3: centre 2, sd 1; gap 2; t = 2 / sqrt(1 + 1/3)
    assert t.name == "x level" and t.statistic == pytest.approx(2 / math.sqrt(4 / 3), rel=1e-12)
    assert t.p == pytest.approx(t_two_sided(2 / math.sqrt(4 / 3), 2), rel=1e-12)
    assert level_test("x", [[1.0], [1.0]], [1.0]).statistic == 0.0
    assert level_test("x", [[1.0], [1.0]], [1.0]).p == 1.0
    assert level_test("x", [[1.0], [1.0]], [1.5]).statistic == math.inf
    assert level_test("x", [[1.0], [1.0]], [1.5]).p == 0.0


def test_roughness_test_exact_numbers():
    ys = [[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]]  # diffs [1, -1] and [-1, 1]: centre [0, 0]; within 4
    got = roughness_test("x", ys, [0.0, 2.0, 0.0])  # diffs [2, -2]: mean square 4, / 1.5
    assert got.name == "x roughness"
    assert got.statistic == pytest.approx((4 / 1.5) / (4 / 2), rel=1e-12)
    # per-step variances [2, 2]: Satterthwaite min(2, 16 / 8) = 2, halved
    assert got.p == pytest.approx(f_upper(got.statistic, 1.0, 1.0), rel=1e-12)
    uneven = [[0.0, 1.0, 1.0, 1.0], [0.0, -1.0, -1.0, -0.5], [0.0, 0.0, 0.0, -0.5]]
    # diffs [1,0,0], [-1,0,0.5], [0,0,-0.5]: centre [0, 0, 0]; per step [1, 0, 0.25]; den 1.25 / 3
    got = roughness_test("x", uneven, [0.0, 1.0, 1.0, 1.0])  # diffs [1, 0, 0]: num (1/3) / (4/3)
    assert got.statistic == pytest.approx(0.25 / (1.25 / 3), rel=1e-12)
    df1 = min(3, 1.25**2 / (1 + 0.0625)) / 2
    assert got.p == pytest.approx(f_upper(got.statistic, df1, 2 * df1), rel=1e-12)
    flat = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert roughness_test("x", flat, [0.0, 0.0, 0.0]).statistic == 0.0
    assert roughness_test("x", flat, [0.0, 0.0, 0.0]).p == 1.0
    assert roughness_test("x", flat, [0.0, 1.0, 0.0]).statistic == math.inf
    assert roughness_test("x", flat, [0.0, 1.0, 0.0]).p == 0.0


def test_curve_tests_cover_both_curves_and_common_evals():
    reps = [m for _, m in replicas(3)]
    run = ddp()[1]
    names = [t.name for t in curve_tests(reps, run)]
    assert names == [
        "train_loss level",
        "train_loss roughness",
        "grad_norm level",
        "grad_norm roughness",
        "eval level",
    ]
    short = copy.deepcopy(run)
    short["eval"] = [e for e in short["eval"] if e["step"] in (0, 10)]
    evals = [t for t in curve_tests(reps, short) if t.name == "eval level"]
    assert len(evals) == 1  # only step 10 is common: the level of that one eval
    two = [copy.deepcopy(m) for m in reps]
    for m in [*two, short]:
        m["train_loss"], m["grad_norm"] = m["train_loss"][:2], m["grad_norm"][:2]
    short["eval"] = [{"step": 0, "loss": 4.1}]
    assert [t.name for t in curve_tests(two, short)] == ["train_loss level", "grad_norm level"]


def _alarms(alpha: float, shift: float = 0.0, extra: float = 0.0, draws: int = 300) -> int:
    n = 0
    for d in range(draws):
        run = ddp(seed=50_000 + d)
        if shift or extra:
            rng = random.Random(d)
            run[1]["grad_norm"] = [x + shift + rng.gauss(0, extra) for x in run[1]["grad_norm"]]
        n += judge_replicas(replicas(3, base=d + 1), run, StatTier(alpha=alpha)).status != "pass"
    return n


def test_unshifted_noise_passes_at_the_stated_rate():
    assert _alarms(0.01) <= 9  # 300 null draws at alpha 0.01: 3 expected
    assert _alarms(0.5) >= 60  # negative control: a loose alpha alarms on the same noise


def test_a_shifted_or_noisier_curve_is_caught():
    assert _alarms(0.01, shift=1.0, draws=40) >= 38  # a level shift of the grad norm
    assert _alarms(0.01, extra=0.1, draws=40) >= 38  # a grad norm 5x noisier step to step


# ---- the verdict --------------------------------------------------------------------------------


def test_a_correct_run_passes_naming_the_tier():
    o = judge_replicas(replicas(4), ddp(), TIER)
    assert o.status == "pass", o.message
    assert o.message.startswith("statistical tier (K=4, alpha 0.01, each of 5 tests at 0.002)")
    assert "4 replicas share samples, lr and val@0" in o.message
    assert "train_loss level t" in o.message and "eval level" in o.message
    assert o.threshold == (
        "statistical tier: K=4 replicas (>= 3), alpha 0.01; samples, lr, cross-rank exact, val@0 rel <= 1e-06"
    )
    assert 0.01 <= o.measured <= 1.0


def test_too_few_replicas_is_inconclusive_never_a_pass():
    o = judge_replicas(replicas(2), ddp(), TIER)
    assert o.status == "inconclusive" and o.measured == 2
    assert "2 replicas of single, the tier needs >= 3" in o.message
    assert judge_replicas(replicas(3), ddp(), TIER).status == "pass"  # control: 3 are enough
    assert judge_replicas(replicas(1), ddp(), StatTier(min_replicas=2)).status == "inconclusive"


def test_non_finite_fails():
    run = ddp()
    run[1]["grad_norm"][7] = math.nan
    o = judge_replicas(replicas(3), run, TIER)
    assert o.status == "fail" and "non-finite: runs/proc: grad_norm[7] = nan (1 non-finite)" in o.message
    reps = replicas(3)
    reps[1][1]["train_loss"][0] = math.inf
    assert "runs/single-r1: train_loss[0] = inf" in judge_replicas(reps, ddp(), TIER).message
    reps = replicas(3)
    reps[2][1]["eval"][2]["loss"] = math.nan
    assert nonfinite(reps) == "runs/single-r2: eval at step 20 = nan"
    assert nonfinite(replicas(3)) is None


def test_the_exact_checks_fail_on_their_own():
    run = ddp(lr=[0.001 * (i + 1) for i in range(1, STEPS + 1)])  # lr one step ahead
    o = judge_replicas(replicas(3), run, TIER)
    assert (
        o.status == "fail"
        and "lr: lr differs at 30 steps, first step 0: 0.002 vs runs/single-r0 0.001" in o.message
    )
    run = ddp()
    run[1]["cross_rank"] = {
        "max_abs_diff": 0.07,
        "per_rank": [
            {"rank": 0, "max_abs_diff": 0.0, "param_sum": 1.0},
            {"rank": 1, "max_abs_diff": 0.07, "param_sum": 1.1},
        ],
    }
    o = judge_replicas(replicas(3), run, TIER)
    assert (
        "cross-rank: runs/proc: ranks [1] ended with other parameters than rank 0 (max |p_r - p_0| 0.07 > 0)"
        in o.message
    )
    run = ddp()
    run[1]["samples"]["hash_sum"][3] += 1
    assert "samples differ at 1 of 30 steps, first step 3" in judge_replicas(replicas(3), run, TIER).message


def test_check_functions():
    ref = replicas(1)[0]
    assert check_lr(ref, ddp()).ok and check_lr(ref, ddp()).detail == "lr equal at 30 steps"
    run = ddp()
    run[1]["eval"][0]["loss"] = 4.1 * (1 + 2e-6)
    bad = check_val0(ref, run, 1e-6)
    assert not bad.ok and "rel 2e-06 > 1e-06): the init differs" in bad.detail
    assert check_val0(ref, run, 3e-6).ok
    assert check_val0(ref, ddp(), 0.0).detail == "val@0 rel 0"
    run[1]["eval"] = run[1]["eval"][1:]
    assert not check_val0(ref, run, 1e-6).applied and check_val0(ref, run, 1e-6).ok
    zero = ("runs/single-r0", {**ref[1], "eval": [{"step": 0, "loss": 0.0}]})
    assert check_val0(zero, ("runs/proc", {**ref[1], "eval": [{"step": 0, "loss": 1e-7}]}), 1e-6).ok
    assert not check_val0(zero, ("runs/proc", {**ref[1], "eval": [{"step": 0, "loss": 1e-5}]}), 1e-6).ok
    assert check_cross_rank(ddp(), 0.0).ok
    near = ddp()
    near[1]["cross_rank"]["max_abs_diff"] = 1e-7
    near[1]["cross_rank"]["per_rank"][1]["max_abs_diff"] = 1e-7
    assert check_cross_rank(near, 1e-6).ok and not check_cross_rank(near, 0.0).ok
    assert "ranks [1]" in check_cross_rank(near, 0.0).detail


def test_replicas_must_share_data_order_lr_and_val0():
    assert replicas_agree(replicas(3)).ok
    for key, change in (
        ("samples.count", lambda m: m["samples"]["count"].__setitem__(4, 9)),
        ("samples.hash_sum", lambda m: m["samples"]["hash_sum"].__setitem__(4, 9)),
        ("lr", lambda m: m["lr"].__setitem__(4, 9.0)),
        ("val_loss@0", lambda m: m["eval"][0].__setitem__("loss", 9.0)),
    ):
        reps = replicas(3)
        change(reps[2][1])
        c = replicas_agree(reps)
        assert not c.ok and c.detail.startswith(f"runs/single-r2 differs from runs/single-r0 in {key}:"), key
        assert judge_replicas(reps, ddp(), TIER).status == "fail"


def test_shape_problems():
    reps = replicas(3)
    assert shape_problem(reps, ddp()) is None
    reps[1][1]["replica"]["index"] = 0
    assert shape_problem(reps, ddp()) == (
        "runs/single-r1 and runs/single-r0 are both replica 0: each replica needs its own rec.reseed(k)"
    )
    for key, value, said in (
        ("steps", 31, "runs/proc/metrics.json: train_loss has 30 entries for 31 steps"),
        ("device", "cuda", "runs/proc ran on cuda/fp32, runs/single-r0 on cpu/fp32"),
        ("precision", "bf16", "runs/proc ran on cpu/bf16, runs/single-r0 on cpu/fp32"),
    ):
        assert shape_problem(replicas(3), ddp(**{key: value})).startswith(said), key
    other = replicas(3)
    other[2][1]["device"] = "cuda"  # configs are not compared (what the runs did is): the device is
    assert shape_problem(other, ddp()).startswith("runs/single-r2 ran on cuda/fp32, runs/single-r0 on cpu")
    other = replicas(3)
    other[2][1]["config_hash"] = "h3"  # a config difference alone is information, never a shape problem
    assert shape_problem(other, ddp()) is None
    seeded = ddp(dropout={"masks": "seeded", "modules": 1, "p": [0.1]})
    assert (
        "runs/proc: not a replica of the statistical tier (metrics.json dropout.masks 'seeded')"
        in shape_problem(replicas(3), seeded)
    )
    bare = ddp()
    del bare[1]["replica"]
    assert "runs/proc: not a replica" in shape_problem(replicas(3), bare)
    none = ddp()
    del none[1]["dropout"]
    assert "dropout.masks None" in shape_problem(replicas(3), none)
    wide = replicas(3)
    wide[2][1]["world"] = 2
    assert shape_problem(wide, ddp()) == "runs/single-r2: a replica of single ran at world 2"
    o = judge_replicas(replicas(3), ddp(steps=31), TIER)
    assert o.status == "fail" and "train_loss has 30 entries for 31 steps" in o.message


def test_hints_name_the_gradients_first_then_the_logged_loss():
    def t(name):
        return CurveTest(name, 9.0, 1e-9)

    assert hint([t("train_loss roughness"), t("grad_norm level")]).startswith("the gradients differ")
    assert hint([t("train_loss roughness")]).startswith("the logged loss is noisier than every replica")
    assert hint([t("train_loss level")]).startswith("the logged training loss is off")
    assert hint([t("eval level")]).startswith("the validation losses are off")
    assert t("grad_norm roughness").line() == "grad_norm roughness F 9 p 1e-09"
    assert t("eval level").line() == "eval level t 9 p 1e-09"


def test_a_noisier_logged_loss_fails_with_the_logging_hint():
    run = ddp(white=0.05)  # one rank's loss: 5x the replicas' step-to-step noise, gradients unchanged
    o = judge_replicas(replicas(3), run, TIER)
    assert o.status == "fail" and "train_loss roughness F" in o.message
    assert "Next: the logged loss is noisier than every replica" in o.message
    assert "grad_norm" not in o.message.split("outside the replicas' spread:")[1]
    assert o.measured < 0.01


def test_exact_loss_match_says_unseeded_dropout_is_the_statistical_tiers():
    c = check_dropout(record(1, 0), record(2, 1, world=2))
    assert not c.ok and "unseeded dropout (runrecord dropout='replicas')" in c.detail
    assert "the statistical tier does" in c.detail


# ---- whole verdicts and checks, pinned (the judge's words are its interface) --------------------


def test_verdicts_pinned():
    o = judge_replicas(replicas(3), ddp(), TIER)
    assert (o.status, o.measured) == ("pass", 1.0)
    assert o.message == (
        "statistical tier (K=3, alpha 0.01, each of 5 tests at 0.002): 3 replicas share samples, lr and val@0; "
        "30 steps consumed exactly the runs/single-r0 rows; lr equal at 30 steps; val@0 rel 0; ranks equal "
        "(max |p_r - p_0| 0); train_loss level t 1.24 p 0.341; train_loss roughness F 0.933 p 0.515; grad_norm "
        "level t -0.0869 p 0.939; grad_norm roughness F 0.691 p 0.702; eval level t 0.201 p 0.859"
    )
    o = judge_replicas(replicas(3), ddp(white=0.05), TIER)
    assert o.status == "fail" and o.measured == pytest.approx(1.6814214736810617e-05, rel=1e-6)
    assert o.message == (
        "statistical tier (K=3, alpha 0.01, each of 5 tests at 0.002): outside the replicas' spread: train_loss "
        "roughness F 16.7 p 3.36e-06. Next: the logged loss is noisier than every replica while the gradients "
        "agree: log the mean over ranks (all_reduce(loss) / world), not one rank's"
    )
    o = judge_replicas(replicas(3), ddp(lr=[0.001 * (i + 1) for i in range(1, STEPS + 1)]), TIER)
    assert o.message == (
        "statistical tier (K=3, alpha 0.01, each of 5 tests at 0.002): lr: lr differs at 30 steps, first step 0: "
        "0.002 vs runs/single-r0 0.001"
    )
    assert o.threshold == TIER.describe(3) and o.measured == 1.0
    o = judge_replicas(replicas(3), ddp(), StatTier(alpha=0.5))
    assert o.message.startswith("statistical tier (K=3, alpha 0.5, each of 5 tests at 0.1)")


def test_exactly_at_the_bonferroni_level_passes():
    p = min(t.p for t in curve_tests([m for _, m in replicas(3)], ddp()[1]))
    assert judge_replicas(replicas(3), ddp(), StatTier(alpha=p * 5)).status == "pass"  # p == alpha / m
    assert judge_replicas(replicas(3), ddp(), StatTier(alpha=p * 5 * 1.000001)).status == "fail"


def test_checks_pinned_whole():
    from gates.judges.ddp import Check

    assert replicas_agree(replicas(3)) == Check("replicas", True, "3 replicas share samples, lr and val@0")
    reps = replicas(3)
    reps[1][1]["lr"][0] = 5.0
    assert replicas_agree(reps) == Check(
        "replicas",
        False,
        "runs/single-r1 differs from runs/single-r0 in lr: replicas must share the init and the data order "
        "(rec.reseed(k) after the model is built and the data generator exists)",
    )
    ref = replicas(1)[0]
    assert check_lr(ref, ddp()) == Check("lr", True, "lr equal at 30 steps")
    late = ddp()
    late[1]["lr"][29] = 1.0
    assert check_lr(ref, late) == Check(
        "lr", False, "lr differs at 1 steps, first step 29: 1 vs runs/single-r0 0.03"
    )
    short = ddp()
    short[1]["lr"] = short[1]["lr"][:29]
    assert check_lr(ref, short) == Check("lr", False, "runs/proc recorded 29 lr values, runs/single-r0 30")
    assert check_val0(ref, ddp(), 1e-6) == Check("val@0", True, "val@0 rel 0")
    off = ddp()
    off[1]["eval"][0]["loss"] = 4.2
    assert check_val0(ref, off, 1e-6) == Check(
        "val@0", False, "val@0 4.2 vs runs/single-r0 4.1 (rel 0.0244 > 1e-06): the init differs"
    )
    none = ddp()
    none[1]["eval"] = none[1]["eval"][1:]
    assert check_val0(ref, none, 1e-6) == Check(
        "val@0", True, "no step-0 evaluation on both sides", applied=False
    )
    assert check_val0(none, ref, 1e-6) == Check(
        "val@0", True, "no step-0 evaluation on both sides", applied=False
    )
    zero = ("runs/single-r0", {**ref[1], "eval": [{"step": 0, "loss": 0.0}]})
    neg = ("runs/proc", {**ref[1], "eval": [{"step": 0, "loss": -2e-7}]})
    assert check_val0(zero, neg, 1e-6) == Check("val@0", True, "val@0 rel 2e-07")
    assert check_cross_rank(ddp(), 0.0) == Check("cross-rank", True, "ranks equal (max |p_r - p_0| 0)")
    split = ddp()
    split[1]["cross_rank"] = {
        "max_abs_diff": 0.5,
        "per_rank": [
            {"rank": r, "max_abs_diff": d, "param_sum": 1.0} for r, d in enumerate((0.0, 0.5, 1e-7, 0.3))
        ],
    }
    assert check_cross_rank(split, 1e-6) == Check(
        "cross-rank",
        False,
        "runs/proc: ranks [1, 3] ended with other parameters than rank 0 (max |p_r - p_0| 0.5 > 1e-06): "
        "unsynced gradients, a per-rank init after the wrap, or a per-rank lr",
    )


def test_nonfinite_and_shape_messages_pinned():
    reps = replicas(3)
    reps[0][1]["grad_norm"][2] = math.inf
    reps[0][1]["grad_norm"][5] = math.nan
    assert nonfinite(reps) == "runs/single-r0: grad_norm[2] = inf (2 non-finite)"
    bare = ddp()
    bare[1]["dropout"] = {"masks": "off", "modules": 1, "p": [0.1]}
    assert shape_problem(replicas(3), bare) == (
        "runs/proc: not a replica of the statistical tier (metrics.json dropout.masks 'off'): record it with "
        "RunRecorder(..., dropout='replicas') and rec.reseed(replica)"
    )
    first = replicas(3)
    del first[0][1]["replica"]
    assert shape_problem(first, ddp()).startswith("runs/single-r0: not a replica")
    o = judge_replicas(replicas(3), bare, TIER)
    assert (o.status, o.measured) == ("fail", None)
    assert o.message == "statistical tier: " + shape_problem(replicas(3), bare)
    nan = ddp()
    nan[1]["train_loss"][0] = math.nan
    o = judge_replicas(replicas(3), nan, TIER)
    assert (o.status, o.measured, o.threshold) == ("fail", None, TIER.describe(3))
    assert o.message == "statistical tier: non-finite: runs/proc: train_loss[0] = nan (1 non-finite)"
    few = judge_replicas(replicas(2), ddp(), TIER)
    assert few.message == (
        "statistical tier: 2 replicas of single, the tier needs >= 3: record more (rec.reseed(k), "
        "runs/single-r<k>); never a pass"
    )
    assert few.threshold == TIER.describe(2)
    assert judge_replicas(replicas(4), ddp(), StatTier(min_replicas=5)).status == "inconclusive"
    assert judge_replicas(replicas(5), ddp(), StatTier(min_replicas=5)).status == "pass"


def test_curve_test_lines_and_names_pinned():
    reps = [m for _, m in replicas(3)]
    run = ddp()[1]
    got = level_test("grad_norm", [m["grad_norm"] for m in reps], run["grad_norm"])
    assert got.line() == "grad_norm level t -0.0869 p 0.939"
    assert roughness_test("train_loss", [m["train_loss"] for m in reps], run["train_loss"]).line() == (
        "train_loss roughness F 0.933 p 0.515"
    )
    two = level_test("x", [[1.0, 3.0], [3.0, 5.0]], [2.0, 4.0])  # means 2, 4: centre 3, sd sqrt 2; run mean 3
    assert two.statistic == 0.0 and two.p == 1.0
    far = level_test("x", [[1.0, 3.0], [3.0, 5.0]], [7.0, 7.0])  # gap 4 / (sqrt 2 * sqrt 1.5)
    assert far.statistic == pytest.approx(4 / (math.sqrt(2) * math.sqrt(1.5)), rel=1e-12)
    assert far.p == pytest.approx(t_two_sided(far.statistic, 1), rel=1e-12)


def test_describe_pinned():
    assert StatTier(alpha=0.05, min_replicas=4, first_step_rtol=1e-5).describe(6) == (
        "statistical tier: K=6 replicas (>= 4), alpha 0.05; samples, lr, cross-rank exact, val@0 rel <= 1e-05"
    )
    assert StatTier() == StatTier(alpha=0.01, min_replicas=3, first_step_rtol=1e-6, cross_rank_max_abs=0.0)


def test_mutation_survivors_of_the_first_round():
    from gates.judges.ddp import Check

    c = check_dropout(record(1, 0), record(2, 1, world=2))
    assert c == Check(
        "dropout masks",
        False,
        "unseeded dropout (runrecord dropout='replicas'): no two runs draw the same masks, so the exact "
        "tier cannot judge them; the statistical tier does, from replicas of single (python -m gates explain "
        "loss_match_stat.proc)",
    )
    flat = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert roughness_test("x", flat, [0.0, 1.0, 0.0]).name == "x roughness"
    three = [
        {**m, "train_loss": m["train_loss"][:3], "grad_norm": m["grad_norm"][:3]} for _, m in replicas(3)
    ]
    run = {**ddp()[1], "train_loss": ddp()[1]["train_loss"][:3], "grad_norm": ddp()[1]["grad_norm"][:3]}
    names = [t.name for t in curve_tests(three, run)]
    assert names[:4] == ["train_loss level", "train_loss roughness", "grad_norm level", "grad_norm roughness"]
    at_one = [
        {**m, "eval": [{"step": 0, "loss": 4.1}, {"step": 1, "loss": 4.0 + i / 100}]}
        for i, m in enumerate(three)
    ]
    run["eval"] = [{"step": 0, "loss": 4.1}, {"step": 1, "loss": 4.5}]
    evals = [t for t in curve_tests(at_one, run) if t.name == "eval level"]
    assert len(evals) == 1 and evals[0].statistic == pytest.approx(0.49 / (0.01 * math.sqrt(4 / 3)), rel=1e-9)


def test_mutation_survivors_of_the_second_round():
    run = ddp()
    run[1]["cross_rank"] = {
        "max_abs_diff": 0.07,
        "per_rank": [
            {"rank": 0, "max_abs_diff": 0.0, "param_sum": 1.0},
            {"rank": 1, "max_abs_diff": 0.07, "param_sum": 1.1},
        ],
    }
    run[1]["lr"][3] = 1.0
    run[1]["grad_norm"] = [x + 2.0 + (0.3 if i % 2 else -0.3) for i, x in enumerate(run[1]["grad_norm"])]
    assert judge_replicas(replicas(3), run, TIER).message == (
        "statistical tier (K=3, alpha 0.01, each of 5 tests at 0.002): lr: lr differs at 1 steps, first step 3: 1 "
        "vs runs/single-r0 0.004; cross-rank: runs/proc: ranks [1] ended with other parameters than rank 0 (max "
        "|p_r - p_0| 0.07 > 0): unsynced gradients, a per-rank init after the wrap, or a per-rank lr; outside the "
        "replicas' spread: grad_norm level t 185 p 2.93e-05; grad_norm roughness F 408 p 4.18e-18. Next: the "
        "gradients differ from single's replicas: your loss scaling under gradient accumulation (divide each "
        "micro-batch loss by the accumulation steps on every rank), your gradient all-reduce"
    )
    other = replicas(3)
    other[1][1]["device"] = "cuda"
    assert shape_problem(other, ddp()).startswith("runs/single-r1 ran on cuda/fp32, runs/single-r0 on cpu")
    o = judge_replicas(other, ddp(), TIER)
    assert (o.status, o.threshold) == ("fail", TIER.describe(3))
