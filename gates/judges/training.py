"""Training gates: cross-rank agreement, finiteness, and the refusal and train-mode rule the others share.

The runs are read in gates/reading/runs.py; the judges here take those records. Every gate first
checks each run against its own record and, where params.yaml describes runs, against params
(gates/reading/expect.py, read with the run): a run whose config_hash, steps, eval cadence or world
disagrees with its config (or with params.yaml) is refused, never compared.
"""

from __future__ import annotations

import math
from typing import Any

from gates.judges.gate import Gate, NothingMeasured, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, fmt, passed
from gates.judges.tolerance import Approx
from gates.reading.expect import foreign_recorder
from gates.reading.runs import (
    FiniteRecords,
    Metrics,
    Runs,
    read_cross_rank,
    read_finite,
    read_finite_picture,
)

# param_sum is a float64 sum over n parameters: equal replicas may still differ by this much per
# parameter and unit of the sum's size (one rounding per addition).
SUM_NOISE = 2.0**-52


def refusal(problems: list[str], describes_runs: bool, threshold: Any) -> Outcome | None:
    """A fail naming every way the runs disagree with their own records (and params.yaml, where it
    describes runs: `describes_runs`), or None when they agree."""
    if not problems:
        return None
    tail = (
        "Refusing to compare runs that are not what params.yaml describes: rerun them (dvc repro) with "
        "this params.yaml"
        if describes_runs
        else "Refusing to judge runs whose records contradict themselves: rerun them (dvc repro)"
    )
    return failed(None, threshold, "; ".join(problems) + ". " + tail)


def refuse_runs(r: Runs, threshold: Any) -> Outcome | None:
    """`refusal` of every problem the reading found in the runs, in their order."""
    return refusal([p for run in r.runs for p in run.problems], r.describes_runs, threshold)


def pairs(r: Runs) -> list[tuple[str, Metrics]]:
    """(name, metrics) of each run, in the order read (what with_train_mode takes)."""
    return [(run.name, run.metrics) for run in r.runs]


TRAIN_MODE_NEXT = (
    "Next: every training step must start with the model in train mode: an evaluate() or other "
    "call left model.eval() on (call model.train() after evaluating; xtrain/core/train.py evaluate "
    "restores it; the warning line of the run names the rank and the module); the steps are "
    "metrics.json eval_mode_steps"
)
# The same for a loop of its own (runrecord): its words, its files, nothing of this repository.
TRAIN_MODE_NEXT_YOURS = (
    "Next: every training step must start with the model in train mode: an evaluation or other call "
    "left model.eval() on (call model.train() after evaluating; the run's warning line names the rank "
    "and the module); the steps are in {files} (eval_mode_steps)"
)


def step_ranges(steps: list[int]) -> str:
    """[3, 40, 41, 42] -> '3, 40..42'."""
    spans: list[list[int]] = []  # [first, last] of each run of consecutive steps
    for s in sorted(steps):
        if spans and s == spans[-1][1] + 1:
            spans[-1][1] = s
        else:
            spans.append([s, s])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in spans)


def train_mode_problem(m: dict[str, Any], where: str, launcher: str) -> str | None:
    """Why the run trained a step with a module in eval mode, or was not recorded where it must be.

    The trainer records the steps (metrics.json eval_mode_steps) instead of stopping: the seed's T21
    (dropout silently off under DDP after an eval) is a verdict, not a crash. Absent means "not
    recorded": allowed only for a run another recorder wrote (runrecord), never a pass by default
    for xtrain's trainer, which always records it."""
    steps = m.get("eval_mode_steps")
    if steps is None:
        if foreign_recorder(m):
            return None
        return (
            f"{where}: eval_mode_steps missing: xtrain's trainer records the steps it trained in eval "
            "mode; a run without them was written by an older trainer: rerun it"
        )
    if not steps:
        return None
    why = "dropout would be silently off" + ("" if foreign_recorder(m) else ": the seed's T21")
    return f"model in eval mode at training steps {step_ranges(steps)} on {launcher} ({why})"


def train_mode_unrecorded(runs: list[tuple[str, dict[str, Any]]]) -> str | None:
    """Why the train-mode check cannot be applied (a run of another recorder without eval_mode_steps),
    or None when every run recorded it."""
    missing = [run for run, m in runs if m.get("eval_mode_steps") is None and foreign_recorder(m)]
    if not missing:
        return None
    return (
        f"not recorded in runs/{', runs/'.join(missing)} (runrecord did not see the model: "
        "RunRecorder(..., model=model) records the mode of every step)"
    )


def with_train_mode(o: Outcome, runs: list[tuple[str, dict[str, Any]]]) -> Outcome:
    """`o`, failed first for every run that trained a step in eval mode (train_mode_problem); where
    a run could not say, the check is named as not applied."""
    unrecorded = train_mode_unrecorded(runs)
    if unrecorded:
        o.not_applied["train mode"] = unrecorded
        o.message += f"; train mode: not applied: {unrecorded}"
    problems = [p for run, m in runs if (p := train_mode_problem(m, f"runs/{run}/metrics.json", run))]
    if not problems:
        return o
    files = ", ".join(f"runs/{run}/metrics.json" for run, m in runs if m.get("eval_mode_steps"))
    nxt = (
        TRAIN_MODE_NEXT_YOURS.format(files=files)
        if any(foreign_recorder(m) for _, m in runs)
        else TRAIN_MODE_NEXT
    )
    return Outcome(
        "fail",
        o.measured,
        o.threshold,
        "; ".join(problems) + f". {nxt}. The comparison itself: {o.status}: {o.message}",
        not_applied=o.not_applied,
    )


def cross_rank(r: Runs, max_abs: float) -> Outcome:
    """Recomputed from every rank's entry: the claimed maximum, each rank's difference and parameter sum."""
    (only,) = r.runs
    run, m = only.name, only.metrics
    refused = refuse_runs(r, max_abs)
    if refused:
        return refused
    per_rank = m["cross_rank"]["per_rank"]
    worst = max(per_rank, key=lambda r: r["max_abs_diff"])
    if m["cross_rank"]["max_abs_diff"] != worst["max_abs_diff"] or per_rank[0]["max_abs_diff"] != 0:
        return failed(
            worst["max_abs_diff"],
            max_abs,
            f"runs/{run}/metrics.json is inconsistent: max_abs_diff "
            f"{m['cross_rank']['max_abs_diff']} but rank {worst['rank']} reports {worst['max_abs_diff']} "
            f"(and rank 0 {per_rank[0]['max_abs_diff']} against itself)",
        )
    s0 = per_rank[0]["param_sum"]
    for r in per_rank[1:]:
        allowed = m["n_params"] * (r["max_abs_diff"] + SUM_NOISE * max(1.0, abs(s0)))
        if abs(r["param_sum"] - s0) > allowed:
            return failed(
                abs(r["param_sum"] - s0),
                max_abs,
                f"runs/{run}/metrics.json is inconsistent: rank {r['rank']}'s parameter sum "
                f"{r['param_sum']!r} differs from rank 0's {s0!r} by {fmt(abs(r['param_sum'] - s0))}, "
                f"more than its max_abs_diff {r['max_abs_diff']} over {m['n_params']:,} parameters allows",
            )
    if m["world"] == 1:
        return Outcome(
            "skip",
            0.0,
            max_abs,
            f"runs/{run} ran with world 1{' (as params.yaml says)' if r.describes_runs else ''}: no other "
            "rank to compare",
        )
    # each rank's max |p_r - p_0| against 0, within cross_rank.max_abs (an absolute tolerance)
    ranks = Approx.absolute(max_abs).judge([r["max_abs_diff"] for r in per_rank], [0.0] * len(per_rank))
    if ranks.ok:
        return passed(
            worst["max_abs_diff"],
            max_abs,
            f"{m['world']} ranks agree: max |p_r - p_0| "
            f"{fmt(worst['max_abs_diff'])} over {m['n_params']:,} parameters",
        )
    sums = ", ".join(f"rank {r['rank']}: {r['param_sum']:.10g}" for r in per_rank)
    return failed(
        worst["max_abs_diff"],
        max_abs,
        f"rank {worst['rank']} differs from rank 0 by "
        f"{fmt(worst['max_abs_diff'])} (parameter sums {sums}). The ranks did not apply identical "
        f"updates: check that every rank sees the same averaged gradients (all-reduce), the same "
        f"optimizer state and the same initialisation",
    )


def finite(r: FiniteRecords) -> Outcome:
    """No NaN/Inf anywhere in any run's metrics (Artifacts.json scanned every number), shapes as params say."""
    checked = [c.name for c in r.checked]
    problems = [p for c in r.checked for p in ([c.non_finite] if c.non_finite is not None else c.problems)]
    if not checked:
        return Outcome("skip", None, None, "no training stage has run")
    if problems:
        return failed(
            len(problems),
            0,
            "; ".join(problems) + ". Next: the first non-finite step (lower the learning rate, "
            "check the data and precision), or rerun a run that does not match "
            + ("params.yaml" if r.describes_runs else "its own record"),
        )
    shaped = "shaped as params.yaml says" if r.describes_runs else "shaped as their own configs say"
    return passed(0, 0, f"every number is finite in runs {', '.join(checked)}, {shaped}")


# ---- the pictures ----------------------------------------------------------------------------------


def cross_rank_picture(r: Runs, t: Thresholds) -> Picture:
    from gates.judges import plots

    max_abs = t["cross_rank"]["max_abs"]
    (only,) = r.runs
    launcher, m = only.name, only.metrics
    per_rank = sorted(m["cross_rank"]["per_rank"], key=lambda r: r["rank"])
    fig, (ax,) = plots.figure(height=2.4)
    values = [r["max_abs_diff"] for r in per_rank]
    plots.bars_against_limit(
        ax, [f"rank {r['rank']}" for r in per_rank], values, max_abs, f"limit {max_abs:g}"
    )
    ax.set_ylabel("max |p_rank − p_0|")
    ax.set_title(f"runs/{launcher}: parameter difference from rank 0 after the last step")
    return Picture(
        plots.to_svg(fig),
        f"Largest absolute parameter difference between each rank and rank 0 (parameter units, log "
        f"scale; 0 drawn at {plots.ZERO_FLOOR:g}). Pass: every bar on or below the dashed line ({max_abs:g}) "
        f"and at least two ranks.",
    )


def non_finite_steps(values: list[float]) -> list[int]:
    return [i for i, v in enumerate(values) if not math.isfinite(v)]


def finite_picture(runs: dict[str, Metrics], t: Thresholds) -> Picture:
    """Every run that ran, its NaNs kept (gates/reading/runs.py read_finite_picture): drawn where they are."""
    from gates.judges import plots

    fig, (loss_ax, norm_ax) = plots.figure(1, 2, height=2.8)
    drawn, bad = [], 0
    for run, m in runs.items():
        drawn.append(run)
        eval_steps = [e["step"] for e in m["eval"] if not math.isfinite(e["loss"])]
        for ax, values, extra in ((loss_ax, m["train_loss"], eval_steps), (norm_ax, m["grad_norm"], [])):
            ax.plot([v if math.isfinite(v) else math.nan for v in values], lw=1, label=run)
            for step in sorted({*non_finite_steps(values), *extra}):
                ax.axvline(
                    step,
                    color=plots.BAD,
                    lw=1.5,  # pragma: no mutate -- equivalent: matplotlib's default line width
                )
                bad += 1
    if not drawn:
        raise NothingMeasured("no training stage has run")
    for ax, label in ((loss_ax, "train loss (nats/token)"), (norm_ax, "grad norm (before clipping)")):
        ax.set_xlabel("step")
        ax.set_ylabel(label)
        plots.legend(ax)
    loss_ax.set_title("loss per run")
    norm_ax.set_title("gradient norm per run")
    return Picture(
        plots.to_svg(fig),
        f"Training loss and gradient norm of every run ({', '.join(drawn)}); a red vertical line marks "
        f"each step with a NaN or Inf (train loss, eval loss or grad norm): {bad} here. Pass: no red line.",
    )


# ---- the gates -------------------------------------------------------------------------------------


def cross_rank_gate(launcher: str) -> Gate:
    return Gate(
        id=f"cross_rank.{launcher}",
        checks=f"max |p_rank - p_0| over all ranks and tensors after the last {launcher} step",
        threshold=lambda t: f"<= {t['cross_rank']['max_abs']:g}",
        judge=lambda r, t: cross_rank(r, t["cross_rank"]["max_abs"]),
        why="replicas that drift apart silently train different models; bitwise equality proved "
        "flaky on NCCL and gates at 1e-6",
        investigate=f"runs/{launcher}/metrics.json cross_rank.per_rank names the rank; check that every rank "
        f"applies the same averaged gradient and optimizer step (comm.sync_grads, DDP buckets)",
        takes=("cross_rank",),
        picture=cross_rank_picture,
        read=lambda a, t: read_cross_rank(a, launcher),
    )


FINITE = Gate(
    id="finite",
    checks="no NaN or Inf in any loss, eval loss or grad norm of any run",
    threshold=lambda t: "all finite",
    judge=lambda r, t: finite(r),
    why="a diverged run can still produce files; it must never pass",
    investigate="the message names the run, series and first step; lower the learning rate or check precision",
    takes=(),
    picture=finite_picture,
    read=lambda a, t: read_finite(a),
    read_for_picture=lambda a, t: read_finite_picture(a),
)
