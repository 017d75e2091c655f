"""The statistical tier of the DDP comparison: randomness nobody can seed (dropout inside SDPA or a
fused kernel), judged from K single-device replicas (docs/statistical-tier.md).

The replicas share the config, the init and the data order; only the unseedable noise differs
(runrecord `dropout="replicas"`, `rec.reseed(k)`). A correct DDP run is then one more draw of that
noise: exchangeable with the replicas. The tier judges

1. exactly what stays exact: every replica and the DDP run consumed the same samples per step and
   applied the same lr per step; the step-0 validation loss (eval mode, identical weights) agrees up to
   summation order; the DDP ranks hold equal parameters at the end;
2. the curves as distributions, each test at alpha / m (Bonferroni over the m tests applied):
   - level: the DDP curve's mean over steps against the replicas' curve means, Student's t with K - 1
     degrees of freedom (a new draw against K: scale sqrt(1 + 1/K)); for train_loss, grad_norm and the
     evals after step 0;
   - roughness: the step-to-step variance of the DDP curve around the replicas' mean against the
     replicas' own, Fisher's F(S - 1, (K - 1)(S - 1)), upper tail; for train_loss and grad_norm: a
     logged loss noisier than any replica (one rank's loss) moves no mean.

Non-finite numbers fail; fewer than `min_replicas` replicas is inconclusive, never a pass.
Pure functions of metrics dicts; never imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gates.judges.ddp import Check, check_samples
from gates.judges.ddp import shape_problem as ddp_shape
from gates.judges.distributions import f_upper, t_two_sided
from gates.judges.gate import Gate, Picture, Thresholds
from gates.judges.outcome import Outcome, fmt
from gates.reading.replica_runs import ReplicaRuns, read_replica_runs

Metrics = dict[str, Any]
Named = tuple[str, Metrics]  # ("runs/single-r0", its metrics.json)
CURVES = ("train_loss", "grad_norm")


@dataclass(frozen=True)
class StatTier:
    alpha: float = 0.01  # the stated false-alarm rate of the distribution tests together
    min_replicas: int = 3  # fewer: inconclusive
    first_step_rtol: float = 1e-6  # the step-0 validation loss: summation order only
    cross_rank_max_abs: float = 0.0  # max |p_rank - p_0| of the DDP run

    def describe(self, k: int) -> str:
        return (
            f"statistical tier: K={k} replicas (>= {self.min_replicas}), alpha {self.alpha:g}; samples, lr, "
            f"cross-rank exact, val@0 rel <= {self.first_step_rtol:g}"
        )


@dataclass(frozen=True)
class CurveTest:
    name: str  # "train_loss level"
    statistic: float
    p: float

    def line(self) -> str:
        return (
            f"{self.name} {'t' if self.name.endswith('level') else 'F'} {fmt(self.statistic)} p {fmt(self.p)}"
        )


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def level_test(name: str, replicas: list[list[float]], run: list[float]) -> CurveTest:
    """The run's curve mean against the replicas' curve means: two-sided t, K - 1 degrees of freedom."""
    k = len(replicas)
    means = [_mean(y) for y in replicas]
    centre = _mean(means)
    sd = math.sqrt(sum((m - centre) ** 2 for m in means) / (k - 1))
    gap = _mean(run) - centre
    t = (0.0 if gap == 0.0 else math.inf) if sd == 0.0 else gap / (sd * math.sqrt(1.0 + 1.0 / k))
    return CurveTest(f"{name} level", t, t_two_sided(t, k - 1))


def roughness_test(name: str, replicas: list[list[float]], run: list[float]) -> CurveTest:
    """Step-to-step variance around the replicas' mean curve: the run's against the replicas' pooled
    (their spread about their own mean), F upper tail. The steps' variances differ (warmup, decay) and
    differences of white noise correlate (lag 1: -1/2), so each side's degrees of freedom are
    Satterthwaite's from the per-step variances, halved (docs/statistical-tier.md)."""
    k, gaps = len(replicas), len(run) - 1
    diffs = [[y[i + 1] - y[i] for i in range(gaps)] for y in replicas]
    centre = [_mean([d[i] for d in diffs]) for i in range(gaps)]
    num = _mean([(run[i + 1] - run[i] - centre[i]) ** 2 for i in range(gaps)]) / (1.0 + 1.0 / k)
    per_step = [sum((d[i] - centre[i]) ** 2 for d in diffs) / (k - 1) for i in range(gaps)]
    den = _mean(per_step)
    if den == 0.0:
        return CurveTest(f"{name} roughness", 0.0 if num == 0.0 else math.inf, 1.0 if num == 0.0 else 0.0)
    # the noise in each step's variance estimate lowers the degrees of freedom (conservative), and 1/2
    # covers the lag-1 correlation and heavy steps: calibrated on two campaigns (docs/statistical-tier.md)
    df1 = min(gaps, sum(per_step) ** 2 / sum(w * w for w in per_step)) / 2.0
    f = num / den
    return CurveTest(f"{name} roughness", f, f_upper(f, df1, (k - 1) * df1))


def _evals(m: Metrics) -> dict[int, float]:
    return {e["step"]: e["loss"] for e in m["eval"]}


def curve_tests(replicas: list[Metrics], run: Metrics) -> list[CurveTest]:
    """Every distribution test the records allow: level and roughness of train_loss and grad_norm
    (roughness from 3 steps), the level of the evals after step 0 that every run has."""
    tests = []
    for key in CURVES:
        ys = [m[key] for m in replicas]
        tests.append(level_test(key, ys, run[key]))
        if len(run[key]) >= 3:
            tests.append(roughness_test(key, ys, run[key]))
    common = set(_evals(run))
    for m in replicas:
        common &= set(_evals(m))
    steps = sorted(s for s in common if s > 0)
    if steps:
        tests.append(
            level_test(
                "eval", [[_evals(m)[s] for s in steps] for m in replicas], [_evals(run)[s] for s in steps]
            )
        )
    return tests


def nonfinite(runs: list[Named]) -> str | None:
    """The first non-finite loss, grad norm or eval of any run, named; None when all are finite."""
    for name, m in runs:
        for key in CURVES:
            bad = [i for i, x in enumerate(m[key]) if not math.isfinite(x)]
            if bad:
                return f"{name}: {key}[{bad[0]}] = {m[key][bad[0]]} ({len(bad)} non-finite)"
        bad_evals = [e for e in m["eval"] if not math.isfinite(e["loss"])]
        if bad_evals:
            return f"{name}: eval at step {bad_evals[0]['step']} = {bad_evals[0]['loss']}"
    return None


def shape_problem(replicas: list[Named], run: Named) -> str | None:
    """Why the runs cannot be judged together: a record that is not a replica of the statistical tier,
    runs that loss_match could not compare either (gates/judges/ddp.py shape_problem: one config,
    length, device and precision), a replica off one device, or one replica recorded twice."""
    name0, first = replicas[0]
    for name, m in [*replicas, run]:
        if m.get("dropout", {}).get("masks") != "unseeded" or "replica" not in m:
            return (
                f"{name}: not a replica of the statistical tier (metrics.json dropout.masks "
                f"{m.get('dropout', {}).get('masks')!r}): record it with RunRecorder(..., dropout='replicas') "
                "and rec.reseed(replica)"
            )
    for name, m in replicas:
        if m["world"] != 1:
            return f"{name}: a replica of single ran at world {m['world']}"
    for name, m in [*replicas[1:], run]:  # the world is the DDP run's own: compared as loss_match does
        problem = ddp_shape(
            {**first, "world": m["world"]}, m, name.removeprefix("runs/"), name0.removeprefix("runs/")
        )
        if problem:
            return problem
    seen: dict[int, str] = {}
    for name, m in replicas:
        k = m["replica"]["index"]
        if k in seen:
            return f"{name} and {seen[k]} are both replica {k}: each replica needs its own rec.reseed(k)"
        seen[k] = name
    return None


def replicas_agree(replicas: list[Named]) -> Check:
    """Exact: the replicas differ only in the unseedable noise: same samples and lr per step, same val@0."""
    name0, first = replicas[0]
    for name, m in replicas[1:]:
        for what, a, b in (
            ("samples.count", m["samples"]["count"], first["samples"]["count"]),
            ("samples.hash_sum", m["samples"]["hash_sum"], first["samples"]["hash_sum"]),
            ("lr", m["lr"], first["lr"]),
            ("val_loss@0", _evals(m).get(0), _evals(first).get(0)),
        ):
            if a != b:
                return Check(
                    "replicas",
                    False,
                    f"{name} differs from {name0} in {what}: replicas must share the init and the data "
                    "order (rec.reseed(k) after the model is built and the data generator exists)",
                )
    return Check("replicas", True, f"{len(replicas)} replicas share samples, lr and val@0")


def check_lr(ref: Named, run: Named) -> Check:
    """Exact: the lr the run applied at every step is the replicas'."""
    (rname, r), (name, m) = ref, run
    if len(m["lr"]) != len(r["lr"]):
        return Check("lr", False, f"{name} recorded {len(m['lr'])} lr values, {rname} {len(r['lr'])}")
    pairs = zip(m["lr"], r["lr"], strict=True)  # pragma: no mutate -- equivalent: lengths equal above
    bad = [i for i, (a, b) in enumerate(pairs) if a != b]
    if not bad:
        return Check("lr", True, f"lr equal at {len(r['lr'])} steps")
    i = bad[0]
    return Check(
        "lr",
        False,
        f"lr differs at {len(bad)} steps, first step {i}: {m['lr'][i]:.7g} vs {rname} {r['lr'][i]:.7g}",
    )


def check_val0(ref: Named, run: Named, rtol: float) -> Check:
    """Tight: the step-0 validation loss, identical weights in eval mode: summation order only."""
    (rname, r), (_name, m) = ref, run
    a, b = _evals(m).get(0), _evals(r).get(0)
    if a is None or b is None:
        return Check("val@0", True, "no step-0 evaluation on both sides", applied=False)
    rel = abs(a - b) / abs(b) if b else abs(a)
    if rel <= rtol:
        return Check("val@0", True, f"val@0 rel {fmt(rel)}")
    return Check(
        "val@0", False, f"val@0 {a:.7g} vs {rname} {b:.7g} (rel {fmt(rel)} > {rtol:g}): the init differs"
    )


def check_cross_rank(run: Named, max_abs: float) -> Check:
    """Exact: every rank of the DDP run ended with rank 0's parameters."""
    name, m = run
    worst = m["cross_rank"]["max_abs_diff"]
    if worst <= max_abs:
        return Check("cross-rank", True, f"ranks equal (max |p_r - p_0| {fmt(worst)})")
    ranks = [r["rank"] for r in m["cross_rank"]["per_rank"] if r["max_abs_diff"] > max_abs]
    return Check(
        "cross-rank",
        False,
        f"{name}: ranks {ranks} ended with other parameters than rank 0 (max |p_r - p_0| {fmt(worst)} > "
        f"{max_abs:g}): unsynced gradients, a per-rank init after the wrap, or a per-rank lr",
    )


HINTS = {
    "grad_norm": "the gradients differ from single's replicas: your loss scaling under gradient accumulation "
    "(divide each micro-batch loss by the accumulation steps on every rank), your gradient all-reduce",
    "train_loss roughness": "the logged loss is noisier than every replica while the gradients agree: log the "
    "mean over ranks (all_reduce(loss) / world), not one rank's",
    "train_loss level": "the logged training loss is off the replicas' spread: your loss logging or training",
    "eval level": "the validation losses are off the replicas' spread: your eval set or training",
}


def hint(failing: list[CurveTest]) -> str:
    """What the failing tests point at, the gradients first."""
    names = [t.name for t in failing]
    for key, text in HINTS.items():
        if any(n.startswith(key) for n in names):
            return text
    return "compare the runs' loss.csv"  # pragma: no mutate -- equivalent: every test name has a hint


def judge_replicas(replicas: list[Named], run: Named, tier: StatTier) -> Outcome:
    """The statistical tier's verdict on DDP run `run` against single-device `replicas`."""
    k, threshold = len(replicas), tier.describe(len(replicas))
    if k < tier.min_replicas:
        return Outcome(
            "inconclusive",
            k,
            threshold,
            f"statistical tier: {k} replicas of single, the tier needs >= {tier.min_replicas}: record more "
            "(rec.reseed(k), runs/single-r<k>); never a pass",
        )
    bad = nonfinite([*replicas, run])
    if bad:
        return Outcome("fail", None, threshold, f"statistical tier: non-finite: {bad}")
    problem = shape_problem(replicas, run)
    if problem:
        return Outcome("fail", None, threshold, f"statistical tier: {problem}")
    ref = replicas[0]
    exact = [
        replicas_agree(replicas),
        check_samples(ref[1], run[1], ref[0]),
        check_lr(ref, run),
        check_val0(ref, run, tier.first_step_rtol),
        check_cross_rank(run, tier.cross_rank_max_abs),
    ]
    tests = curve_tests([m for _, m in replicas], run[1])
    level = tier.alpha / len(tests)
    failing = [t for t in tests if not t.p >= level]  # a NaN p fails
    worst = min(min(t.p for t in tests) * len(tests), 1.0)
    head = f"statistical tier (K={k}, alpha {tier.alpha:g}, each of {len(tests)} tests at {fmt(level)})"
    shown = "; ".join(t.line() for t in tests)
    bad_exact = [c for c in exact if not c.ok]
    if not bad_exact and not failing:
        exact_ok = "; ".join(c.detail for c in exact)
        return Outcome("pass", worst, threshold, f"{head}: {exact_ok}; {shown}")
    parts = [f"{c.name}: {c.detail}" for c in bad_exact]
    if failing:
        parts.append(
            f"outside the replicas' spread: {'; '.join(t.line() for t in failing)}. Next: {hint(failing)}"
        )
    return Outcome("fail", worst, threshold, f"{head}: " + "; ".join(parts))


def tier_of(t: Thresholds) -> StatTier:
    """params.yaml gates: loss_match_stat -> the tier's settings (the others keep their defaults)."""
    section = t.get("loss_match_stat") or {}  # absent: a params.yaml older than the tier (StatTier's own)
    return StatTier(
        alpha=section.get("alpha", StatTier.alpha),
        min_replicas=section.get("min_replicas", StatTier.min_replicas),
    )


def judge_stat(records: ReplicaRuns, t: Thresholds) -> Outcome:
    """The gate's judge: the records gates/reading/replica_runs.py read, the thresholds; no file."""
    return judge_replicas(records.replicas, records.run, tier_of(t))


def stat_picture(records: ReplicaRuns, t: Thresholds) -> Picture:
    """Each run's curve means beside the replicas': the numbers the level tests compare."""
    runs = [*records.replicas, records.run]
    rows = "".join(
        f"<tr><td>{name}</td>" + "".join(f"<td>{fmt(_mean(m[key]))}</td>" for key in CURVES) + "</tr>"
        for name, m in runs
    )
    head = "".join(f"<th>mean {key}</th>" for key in CURVES)
    return Picture(
        f"<table><tr><th>run</th>{head}</tr>{rows}</table>",
        f"{len(records.replicas)} replicas of single and {records.run[0]}: the curve means the level tests compare",
    )


def stat_gate(launcher: str) -> Gate:
    return Gate(
        id=f"loss_match_stat.{launcher}",
        checks=f"the {launcher}-per-rank DDP run against K single-device replicas (runs/single-r<k>) when "
        "dropout cannot be seeded (runrecord dropout='replicas'): samples, lr per step, val@0 and cross-rank "
        "equality exactly; the train loss, grad norm and eval curves as distributions (level: t test of the "
        "curve mean; roughness: F test of the step-to-step noise), Bonferroni over the tests",
        threshold=lambda t: (
            f"statistical tier: K >= {tier_of(t).min_replicas} replicas, alpha {tier_of(t).alpha:g} per verdict"
        ),
        judge=judge_stat,
        why="dropout drawn inside a kernel (SDPA, fused attention) cannot be seeded per sample, so no DDP run "
        "equals a single-device run; a correct one is one more draw of that noise, a mistake moves it outside "
        "the replicas' spread (alpha 0.01 measured: 1/100 correct DDP runs; each classic mistake 20/20 at K=3)",
        investigate="the message names the failing check. cross-rank: unsynced gradients, a per-rank init after "
        "the wrap or a per-rank lr; lr, samples, val@0: as loss_match; grad_norm off the spread: loss scaling "
        f"under gradient accumulation or the gradient all-reduce; train_loss roughness: one rank's loss logged. "
        f"Files: runs/single-r<k>/loss.csv, runs/{launcher}/loss.csv",
        takes=("loss_match_stat",),
        picture=stat_picture,
        read=lambda a, t: read_replica_runs(a, launcher),
    )
