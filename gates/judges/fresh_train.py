"""fresh_train: this run's single-device trajectory and export against a golden (gates/reading/goldens.py).

Exact tier: every train loss, val loss and export md5 bit-identical. Approximate tier (another
environment's golden, or a golden blessed approximate): train losses within loss_rtol with at most
max_steps_out steps outside, every val loss within eval_rtol; export md5s are only noted.
A project of its own (runrecord, no export stage) is judged against a golden of the run alone
(`registry bless --golden` without exports/fresh): its final weights by the parameter digest instead
of the export md5s; without any golden it skips (saying how to bless) unless its own params ask fail.
Tolerances per device type: gates.fresh_train.approx.<cpu|cuda>, as the Exact and Approx classes of
gates/judges/tolerance.py (ApproxTier says which key is which).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from contracts.numbers import rel_diff
from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, fmt, passed, rel_diffs
from gates.judges.tolerance import Approx, Exact, Verdict
from gates.judges.training import refusal
from gates.reading.exports import FreshTrainRecords, read_fresh_train, read_fresh_train_picture
from gates.reading.registry_records import Golden, GoldenChoice, OwnGolden
from registry.store import compare_files

EXACT = Exact()


def fresh_train(r: FreshTrainRecords, policy: dict[str, Any]) -> Outcome:
    if r.refused:
        return refusal(list(r.refused), r.describes_runs, None)  # type: ignore[return-value]
    # fail or skip without a golden: the project's own `gates.fresh_train.unblessed`; a project of its own
    # that leaves the section to the harness is not held to our pipeline's 'fail' before it has blessed
    # anything: skip, saying how to bless
    own = "skip"  # pragma: no mutate -- equivalent: _no_golden fails on "fail" only
    unblessed = own if r.own_project else policy["unblessed"]
    return judge(r.run, r.choice or GoldenChoice(), policy, r.files, unblessed)


def judge(
    m: dict[str, Any],
    choice: GoldenChoice,
    policy: dict[str, Any],
    files: dict[str, str] | None,
    unblessed: str,
) -> Outcome:
    """The verdict on one run record against the golden the registry holds for it: the gate's judgement,
    a pure function of the record, the golden chosen for it and the export's md5s."""
    if choice.problem is not None:
        return Outcome("error", None, None, choice.problem)
    if choice.golden is None:
        return _no_golden(choice.own, m["env"]["env_id"], m["config_hash"], unblessed)
    return _judge_against(m, choice.golden, choice.coverage, policy, files)


def _judge_against(
    m: dict[str, Any],
    golden: Golden,
    coverage: tuple[str, ...],
    policy: dict[str, Any],
    files: dict[str, str] | None,
) -> Outcome:
    if coverage:  # the golden against the run's own config (the reading checked it; refuse held it)
        return failed(None, golden.tier, "; ".join(coverage) + ": refusing to judge against it")
    if golden.tier == "exact":
        return _exact(m, golden.data, files, golden)
    return _approx(m, golden.data, files, golden, policy["approx"][m["device"]])


@dataclass(frozen=True)
class Weights:
    """The final weights against the golden's: export md5s where both have an export, else the
    parameter digest where the golden recorded one (a golden of the run alone)."""

    what: str  # "export files" | "parameter digest" | ""
    bad: list[str]  # the names that differ
    compared: int  # how many were compared (0: not applied)

    @classmethod
    def of(cls, m: dict[str, Any], g: dict[str, Any], files: dict[str, str] | None) -> Weights:
        if files is not None and "export" in g:  # every name either side holds, its two md5s compared
            want = g["export"]["files"]
            names = sorted(set(want) | set(files))
            return cls("export files", [n for n in names if want.get(n) != files.get(n)], len(names))
        if "run" in g:
            same = g["run"]["param_digest"] == m["param_digest"]
            return cls("parameter digest", [] if same else ["param_digest"], 1)
        return cls("", [], 0)

    def not_applied(self, files: dict[str, str] | None) -> dict[str, str]:
        if self.compared:
            return {}
        why = "this project has no export stage" if files is None else "the golden has none"
        return {"final weights": f"the golden holds export md5s only and {why}: losses judged alone"}


def _no_golden(own: OwnGolden | None, env_id: str, config_hash: str, unblessed: str) -> Outcome:
    if own is not None:
        return failed(
            None,
            own.tier,
            f"golden {env_id} v{own.version} was blessed for config {own.config_hash}, this run "
            f"is {config_hash}, and no other environment has a golden for it: an intended config change "
            f"needs a new golden (python -m registry bless --golden --reason '...')",
        )
    return Outcome(
        "fail" if unblessed == "fail" else "skip",
        "unblessed",
        None,
        f"unblessed: no golden for environment {env_id} nor for config {config_hash} on any other. "
        f"If this run is right, bless it: python -m registry bless --golden --reason '...'",
    )


def _pairs(m: dict[str, Any], g: dict[str, Any]) -> tuple[list[float], list[float], list[int]]:
    steps = list(range(len(m["train_loss"])))
    want = [g["metrics"]["train_loss"]["values"][str(s)] for s in steps]
    return m["train_loss"], want, steps


def _val_pairs(m: dict[str, Any], g: dict[str, Any]) -> list[tuple[int, float, float]]:
    ref = g["metrics"]["val_loss"]["values"]
    return [(e["step"], e["loss"], ref[str(e["step"])]) for e in m["eval"]]


def _exact(m: dict[str, Any], g: dict[str, Any], files: dict[str, str] | None, choice: Golden) -> Outcome:
    got, want, steps = _pairs(m, g)
    diff = list(EXACT.judge(got, want).out)  # positions are steps: _pairs pairs steps 0..n-1
    vals = _val_pairs(m, g)
    val_diff = list(
        EXACT.judge([x for _, x, _ in vals], [y for _, _, y in vals], [s for s, _, _ in vals]).out
    )
    weights = Weights.of(m, g, files)
    skipped = weights.not_applied(files)
    norms = _grad_norm_diff(m, g)
    if not diff and not val_diff and not weights.bad and not norms:
        same = f" and {weights.compared} {weights.what}" if weights.compared else ""
        grads = " grad norms," if "grad_norm" in g["metrics"] else ""
        return Outcome(
            "pass",
            "bitwise",
            "exact",
            f"exact tier vs golden {choice.name}: {len(steps)} losses,{grads} {len(m['eval'])} val losses"
            f"{same} bit-identical"
            + (f"; final weights: not applied: {skipped['final weights']}" if skipped else ""),
            not_applied=skipped,
        )
    parts = [norms] if norms else []
    if diff:
        s = diff[0]
        parts.append(
            f"first differing step {s} (golden {want[s]!r}, run {got[s]!r}), {len(diff)} steps differ, "
            f"max rel {fmt(max(rel_diffs(got, want)))}"
        )
    if val_diff:
        parts.append(f"val loss differs at steps {val_diff}")
    if weights.bad:
        parts.append(f"{weights.what} differ: " + ", ".join(weights.bad))
    rerun = "`dvc repro train_single`"
    return Outcome(
        "fail",
        f"{len(diff)} steps, {len(weights.bad)} {weights.what or 'files'} differ",
        "exact",
        f"exact tier vs golden {choice.name}: " + "; ".join(parts) + ". This environment trained "
        f"bit-identically before: find the change that moved the numbers (git bisect with {rerun}), or "
        "if intended bless a new golden with a reason",
        not_applied=skipped,
    )


def _grad_norm_diff(m: dict[str, Any], g: dict[str, Any]) -> str:
    """The exact tier's grad-norm check where the golden records them (goldens blessed since runrecord
    1.3): a bug that rescales the gradient (a loss not divided by grad_accum) shows at step 0 even
    where clipping hides it from the losses. '' when every norm is bit-identical."""
    if "grad_norm" not in g["metrics"]:
        return ""
    ref = g["metrics"]["grad_norm"]["values"]
    got = [m["grad_norm"][int(s)] for s in sorted(ref, key=int)]
    want = [ref[s] for s in sorted(ref, key=int)]
    out = list(EXACT.judge(got, want).out)
    if not out:
        return ""
    s = out[0]
    ratio = f", x{got[s] / want[s]:.3g}" if want[s] else ""
    return (
        f"grad_norm differs at {len(out)} steps, first step {s} (golden {want[s]!r}, run {got[s]!r}{ratio})"
    )


@dataclass(frozen=True)
class ApproxTier:
    """params.yaml gates.fresh_train.approx.<device> as tolerances (gates/judges/tolerance.py)."""

    loss: Approx  # Approx.relative(loss_rtol, max_out=max_steps_out): the judged train losses
    prefix_steps: int | None  # judge only the first N train losses (cuda); None: every one
    val: Approx  # Approx.relative(eval_rtol): every val loss; with prefix_steps, the step-0 one only
    final_val: Approx | None  # Approx.absolute(final_val_atol), with prefix_steps: the last val loss

    @classmethod
    def of(cls, tol: dict[str, Any]) -> ApproxTier:
        final = tol.get("final_val_atol")
        return cls(
            loss=Approx.relative(tol["loss_rtol"], max_out=tol["max_steps_out"]),
            prefix_steps=tol.get("prefix_steps"),
            val=Approx.relative(tol["eval_rtol"]),
            final_val=None if final is None else Approx.absolute(final),
        )

    def describe(self) -> str:
        loss, val = self.loss, self.val
        if self.prefix_steps is not None and self.final_val is not None:
            return (
                f"rtol {loss.rtol:g} over the first {self.prefix_steps} steps, <= {loss.max_out} out, "
                f"val@0 rtol {val.rtol:g}, |final val diff| <= {self.final_val.atol:g}"
            )
        return f"rtol {loss.rtol:g}, <= {loss.max_out} steps out, eval rtol {val.rtol:g}"


def approx_threshold(tol: dict[str, Any]) -> str:
    """The approximate tier of params.yaml gates.fresh_train.approx.<device>, as people read it."""
    return ApproxTier.of(tol).describe()


def _approx_outs(
    got: list[float], want: list[float], vals: list[tuple[int, float, float]], tier: ApproxTier
) -> tuple[Verdict, list[tuple[int, float]]]:
    """The judged train losses' verdict (steps out, max rel) and the val losses out of their bound.

    With prefix_steps (the cuda tier), only the first prefix_steps train losses are judged, the step-0
    val loss within eval_rtol and the final val loss within final_val_atol: other GPU kernels reorder
    sums, and in bf16 equivalent reorderings part chaotically after ~20 steps (docs/verdicts.md),
    so a whole-trajectory rtol loose enough for them (Megatron's 0.05) also passes an lr change."""
    k = tier.prefix_steps  # None: every train loss
    loss = tier.loss.judge(got[:k], want[:k])
    judged = vals if k is None else [v for v in vals if v[0] == 0]  # eval steps are distinct (refuse)
    val_out = [(s, rel_diff(x, y)) for s, x, y in judged if not tier.val.within(x, y)]
    if tier.final_val is not None and vals and not tier.final_val.within(vals[-1][1], vals[-1][2]):
        val_out.append((vals[-1][0], abs(vals[-1][1] - vals[-1][2])))  # NaN is out too
    return loss, val_out


def _approx(
    m: dict[str, Any],
    g: dict[str, Any],
    files: dict[str, str] | None,
    choice: Golden,
    tol: dict[str, Any],
) -> Outcome:
    got, want, _ = _pairs(m, g)
    loss, val_out = _approx_outs(got, want, _val_pairs(m, g), ApproxTier.of(tol))
    out, max_rel = list(loss.out), loss.max_rel
    threshold = f"approx vs {choice.name}: {approx_threshold(tol)}"
    weights = Weights.of(m, g, files)
    noted = (
        f"{weights.what} {'differ' if weights.bad else 'equal'} (not judged in this tier)"
        if weights.compared
        else "final weights not compared"
    )
    where = "another environment's golden" if choice.cross_env else "a golden blessed approximate"
    summary = (
        f"approximate tier vs golden {choice.name} ({where}): max rel {fmt(max_rel)}, "
        f"{len(out)} steps out, {len(val_out)} val losses out ({approx_threshold(tol)}); {noted}"
    )
    if loss.ok and not val_out:
        return passed(f"{len(out)} steps out", threshold, summary)
    first = f"first step out: {out[0]} (golden {want[out[0]]!r}, run {got[out[0]]!r})" if out else ""
    val = f"val loss out at steps {[s for s, _ in val_out]}" if val_out else ""
    return failed(
        f"{len(out)} steps out",
        threshold,
        f"{summary}; {'; '.join(x for x in (first, val) if x)}. A real change of the numbers (lr, init, "
        f"data order), not machine noise: compare runs/single/loss.csv with the golden's values",
    )


# ---- the picture -----------------------------------------------------------------------------------


def _unblessed_picture(m: dict[str, Any], reason: str) -> Picture:
    """fresh_train without a golden to draw against: the run alone, and why it is not judged."""
    from gates.judges import plots

    fig, (ax,) = plots.figure(height=2.6)
    ax.plot(m["train_loss"], lw=1, label="this run")  # x: the position, which is the step
    ev = [e for e in m["eval"] if math.isfinite(e["loss"])]
    ax.plot([e["step"] for e in ev], [e["loss"] for e in ev], "s", mfc="none", color="#6a1b9a", label="eval")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title(f"runs/single (config {m['config_hash']}): no golden to compare with")
    plots.legend(ax)
    return Picture(
        plots.to_svg(fig),
        f"This run's training loss (line) and eval loss (squares), nats per token, alone: {reason}. "
        "Pass needs a golden: bless this run if it is right (python -m registry bless --golden "
        "--reason '...'), then the gate compares every step with it.",
    )


def _steps_out(choice: Golden, tier: ApproxTier, got: list[float], want: list[float]) -> list[int]:
    """The positions the gate's tolerance puts out: any difference (exact), or out of the judged prefix."""
    if choice.tier == "exact":
        return list(EXACT.judge(got, want).out)
    k = tier.prefix_steps  # None: every one
    return list(tier.loss.judge(got[:k], want[:k]).out)


def fresh_train_picture(r: FreshTrainRecords, t: Thresholds) -> Picture:
    from gates.judges import plots
    from gates.judges.pictures import md5_table

    m, files, c = r.run, r.files, r.choice or GoldenChoice()
    env_id = m["env"]["env_id"]
    if c.problem is not None:  # the gate's own choice of golden and tier
        raise NoPicture(c.problem)
    choice = c.golden
    if choice is None:
        why = f"no golden for environment {env_id} nor for config {m['config_hash']} on any other"
        if c.own is not None:  # an intended config change without its golden (the gate fails)
            why = f"golden {env_id} v{c.own.version} was blessed for config {c.own.config_hash}"
        return _unblessed_picture(m, why)
    g = choice.data
    ref = g["metrics"]["train_loss"]["values"]
    steps = sorted(int(s) for s in ref if int(s) < len(m["train_loss"]))
    got, want = [m["train_loss"][s] for s in steps], [ref[str(s)] for s in steps]
    rel = rel_diffs(got, want)
    exact = choice.tier == "exact"
    tol = t["fresh_train"]["approx"][m["device"]]  # the gate's approximate tier for this device type
    tier = ApproxTier.of(tol)
    marked = _steps_out(choice, tier, got, want)
    fig, (top, bottom) = plots.figure(2, 1)
    plots.overlay(top, steps, want, got, (f"golden v{choice.version}", "this run"), marked)
    top.set_ylabel("train loss (nats/token)")
    top.set_title(f"runs/single vs golden {choice.name} ({choice.tier} tier)")
    limit = plots.ZERO_FLOOR * 10 if exact else tier.loss.rtol
    label = "exact: any difference" if exact else f"rtol {tier.loss.rtol:g}"
    plots.log_limit_plot(bottom, steps, rel, limit, "run vs golden", label)
    bottom.set_xlabel("step")
    bottom.set_ylabel("relative difference")
    rule = (
        "Pass (exact tier): every loss bit-identical (no ×) and the final weights equal."
        if exact
        else f"Pass (approximate tier): {tier.describe()} (steps past the judged ones are drawn, not marked)."
    )
    weights = Weights.of(m, g, files)
    if weights.what == "export files":
        table = md5_table(compare_files(g["export"]["files"], files or {}), "golden md5")
        said = "Table: exports/fresh against the golden's export md5s."
    else:
        table = ""
        said = (
            f"Final weights: parameter digest {'equal to' if not weights.bad else 'differs from'} the golden's."
            if weights.compared
            else "Final weights: not compared (the golden holds export md5s; this project has no export)."
        )
    return Picture(
        plots.to_svg(fig) + table,
        f"Top: this run's training loss against the golden's (nats per token), differing steps marked ×. "
        f"Bottom: relative difference per step (log scale; 0 drawn at {plots.ZERO_FLOOR:g}). "
        f"{said} {rule} {len(marked)} of {len(steps)} steps differ.",
    )


GATE = Gate(
    id="fresh_train",
    checks="this run's single-device loss trajectory and export md5 (a project without export: parameter "
    "digest) against the golden of its environment",
    threshold=lambda t: (
        "exact (own environment's golden) or approximate (another's): "
        + ", ".join(f"{d} {approx_threshold(v)}" for d, v in sorted(t["fresh_train"]["approx"].items()))
    ),
    read=read_fresh_train,
    judge=lambda r, t: fresh_train(r, t["fresh_train"]),
    why="Megatron-LM style goldens per environment: an identical environment trains bitwise (exact tier); "
    "another CPU model or GPU is judged against the same config's golden within tolerances (approximate)",
    investigate="runs/single/metrics.json env.env_id picks registry/goldens/<env_id>/; the message names the "
    "golden, the tier and the first differing step. Bisect the code change with `dvc repro train_single`; "
    "bless a new golden only for an understood change",
    takes=("fresh_train",),
    picture=fresh_train_picture,
    read_for_picture=read_fresh_train_picture,
)
