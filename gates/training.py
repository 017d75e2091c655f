"""Training gates: DDP vs single-device loss, launcher parity, cross-rank agreement, finiteness."""

from __future__ import annotations

import math
from typing import Any

from gates.artifacts import Artifacts, StageNotRun
from gates.outcome import Outcome, failed, fmt, passed, rel_diffs

RUN_STAGE = {"single": "train_single", "thread": "train@thread", "proc": "train@proc"}


def run_metrics(a: Artifacts, run: str) -> dict[str, Any]:
    return a.json(f"runs/{run}/metrics.json", "metrics.schema.json", RUN_STAGE[run])


def compare_runs(a: Artifacts, run: str, reference: str, max_rel: float) -> Outcome:
    """Run `run`'s loss trajectory against `reference`'s, step by step (train and eval losses)."""
    ref, got = run_metrics(a, reference), run_metrics(a, run)
    if ref["config_hash"] != got["config_hash"]:
        return failed(
            None,
            max_rel,
            f"runs/{run} and runs/{reference} trained different configurations "
            f"(config_hash {got['config_hash']} vs {ref['config_hash']}): re-run both with one params.yaml",
        )
    if len(ref["train_loss"]) != len(got["train_loss"]):
        return failed(
            None,
            max_rel,
            f"runs/{run} has {len(got['train_loss'])} steps, runs/{reference} {len(ref['train_loss'])}",
        )
    rel = rel_diffs(got["train_loss"], ref["train_loss"])
    ev_ref = {e["step"]: e["loss"] for e in ref["eval"]}
    ev_rel = {
        e["step"]: rel_diffs([e["loss"]], [ev_ref[e["step"]]])[0] for e in got["eval"] if e["step"] in ev_ref
    }
    worst_step = max(range(len(rel)), key=rel.__getitem__)
    worst = max(rel[worst_step], max(ev_rel.values(), default=0.0))
    if worst < max_rel:
        return passed(
            worst,
            max_rel,
            f"max rel {fmt(worst)} at step {worst_step} over {len(rel)} steps "
            f"and {len(ev_rel)} evals (world {got['world']} vs {ref['world']})",
        )
    over = [i for i, r in enumerate(rel) if not r < max_rel]
    if over:
        s = over[0]
        first = (
            f"first step over {max_rel:g}: step {s} ({reference} {ref['train_loss'][s]:.7g}, "
            f"{run} {got['train_loss'][s]:.7g}, rel {fmt(rel[s])})"
        )
    else:
        s = min(k for k, r in ev_rel.items() if not r < max_rel)
        first = f"first eval over {max_rel:g}: step {s} (rel {fmt(ev_rel[s])})"
    hint = (
        "differs from the first step: the gradient reduction or the sharding changed"
        if over and over[0] == 0
        else "grows during training: a reduction-order change amplified by a chaotic config (lr too high?) "
        "or a real divergence; see docs/ddp-parity.md"
    )
    return failed(
        worst,
        max_rel,
        f"{first}; max rel {fmt(worst)}. It {hint}. Next: compare "
        f"runs/{reference}/loss.csv with runs/{run}/loss.csv (dvc plots show)",
    )


def cross_rank(a: Artifacts, run: str, max_abs: float) -> Outcome:
    m = run_metrics(a, run)
    per_rank = m["cross_rank"]["per_rank"]
    ranks = [r["rank"] for r in per_rank]
    if ranks != list(range(m["world"])):
        return failed(None, max_abs, f"runs/{run}/metrics.json lists ranks {ranks} for world {m['world']}")
    worst = max(per_rank, key=lambda r: r["max_abs_diff"])
    if m["cross_rank"]["max_abs_diff"] != worst["max_abs_diff"]:
        return failed(
            worst["max_abs_diff"],
            max_abs,
            f"runs/{run}/metrics.json is inconsistent: max_abs_diff "
            f"{m['cross_rank']['max_abs_diff']} but rank {worst['rank']} reports {worst['max_abs_diff']}",
        )
    if m["world"] == 1:
        return Outcome(
            "skip", 0.0, max_abs, f"runs/{run} ran with world 1: there is no other rank to compare"
        )
    if worst["max_abs_diff"] < max_abs:
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


def finite(a: Artifacts) -> Outcome:
    checked, problems = [], []
    for run in RUN_STAGE:
        try:
            m = run_metrics(a, run)
        except StageNotRun:
            continue
        checked.append(run)
        series = {
            "train_loss": m["train_loss"],
            "grad_norm": m["grad_norm"],
            "eval": [e["loss"] for e in m["eval"]],
        }
        for name, values in series.items():
            bad = [i for i, v in enumerate(values) if not math.isfinite(v)]
            if bad:
                problems.append(f"runs/{run} {name}[{bad[0]}] = {values[bad[0]]} ({len(bad)} non-finite)")
    if not checked:
        return Outcome("skip", None, None, "no training stage has run")
    if problems:
        return failed(
            len(problems),
            0,
            "; ".join(problems) + ". Next: the first non-finite step; lower the "
            "learning rate or check the data and precision",
        )
    return passed(0, 0, f"every loss and grad norm is finite in runs {', '.join(checked)}")
