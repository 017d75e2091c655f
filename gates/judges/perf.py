"""Perf gates: steady tokens/s and peak memory of each training stage against a blessed baseline.

Everything is recomputed from raw data: the per-window (steps, seconds) and per-rank peak bytes that
xtrain.core.train records in metrics.json `perf`, and the same raw fields of the baseline
(registry/baselines/<env_id>/v<N>.json), read by contracts/perf_record.py (which `registry bless
--perf` shares). A rate is tokens_per_step * steps / seconds of a steady window (the warm-up windows
dropped). The change of a stage is a Hodges-Lehmann estimate with a ~95% confidence interval from
the two sets of windows (contracts.perf_record.shift_ci); `slowdown` is the tolerated slowdown,
which also absorbs the drift between runs that no single run's windows show. Fail: the whole
interval is slower than that; pass: none of it is; inconclusive: the interval straddles it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from contracts.perf_record import StagePerf, median_spread, shift_ci, stage_perf
from gates.judges.gate import Gate, NothingMeasured, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, inconclusive, passed
from gates.reading import expect
from gates.reading.artifacts import ArtifactError
from gates.reading.registry_records import PerfRecords, read_perf

MIN_WINDOWS = 3  # fewer steady windows cannot show their own spread
BLESS = "python -m registry bless --perf --reason '...'"
GREY = "#9e9e9e"  # the baseline's median in the throughput picture


def comparable(run: StagePerf, base: dict[str, Any] | None) -> tuple[StagePerf | None, str | None]:
    """The baseline's record of this stage, or why this run cannot be compared with it."""
    if base is None:
        return None, f"{run.launcher}: not in the baseline"
    b = stage_perf(base)
    for what, mine, theirs in (
        ("env_id", run.env_id, b.env_id),
        ("world", run.world, b.world),
        ("config_hash", run.config_hash, b.config_hash),
    ):
        if mine != theirs:
            return None, f"{run.launcher}: {what} {mine} differs from the baseline's {theirs}"
    return b, None


StageCheck = Callable[[StagePerf, StagePerf, dict[str, Any]], tuple[str, str, str]]


def judge(r: PerfRecords, thresholds: dict[str, Any], check: StageCheck, what: str) -> Outcome:
    """Shared frame of both gates: stages, baseline, profile; `check` judges one stage."""
    runs, notes = r.runs, list(r.notes)
    if not runs:
        return Outcome("skip", None, None, "no training stage has run: " + "; ".join(notes))
    contradicted = [p for launcher, m in runs.items() for p in expect.run_problems(None, launcher, m)]
    if contradicted:  # a record whose config_hash is not its config's would pick another baseline
        return failed(None, None, "; ".join(contradicted) + ". Refusing to judge: rerun the stage")
    device = next(iter(runs.values()))["device"]
    profile = (thresholds.get("perf") or {}).get(device)
    if profile is None:
        return failed(None, None, f"params.yaml gates.perf has no thresholds for device {device!r}")
    if what == "throughput" and profile.get("throughput") == "skip":
        return Outcome(
            "skip",
            None,
            None,
            f"gates.perf.{device}.throughput is skip: window spreads on a shared {device} are too large to "
            "judge (python -m gates explain perf.throughput); peak memory is still judged",
        )
    if r.baseline_problem is not None:  # where the gate looked at the registry: an error, as before
        raise ArtifactError(r.baseline_problem)
    env_id, base = r.env_id, r.baseline
    if base is None:
        return Outcome(
            "skip",
            None,
            None,
            f"no perf baseline for environment {env_id} (registry/baselines/{env_id}/): {what} not judged. "
            f"After a run you trust: {BLESS}",
        )
    verdicts = []
    for launcher, m in runs.items():
        run = stage_perf(m)
        b, why_not = comparable(run, base.stages.get(launcher))
        if b is None:
            notes.append(f"{why_not}: not judged (bless a new baseline: {BLESS})")
            continue
        if len(b.peaks) != b.world:  # the run's ranks are checked above (expect); the baseline's here
            raise ArtifactError(
                f"{base.rel}: stages.{launcher}.perf.peak_memory.per_rank: "
                f"{len(b.peaks)} ranks for world {b.world} (bless a new baseline: {BLESS})"
            )
        verdicts.append((launcher, *check(run, b, profile)))
    return combine(verdicts, notes, f"baseline {env_id} v{base.version}")


def combine(verdicts: list[tuple[str, str, str, str]], notes: list[str], against: str) -> Outcome:
    """Worst status over stages (fail > inconclusive > pass); none judged is skip, never pass."""
    if not verdicts:
        return Outcome("skip", None, None, f"no stage comparable with {against}: " + "; ".join(notes))
    measured = ", ".join(f"{launcher} {value}" for launcher, _, value, _ in verdicts)
    messages = [f"{launcher}: {msg}" for launcher, _, _, msg in verdicts]
    text = "; ".join(messages + notes) + f" (vs {against})"
    statuses = {status for _, status, _, _ in verdicts}
    if "fail" in statuses:
        return failed(measured, None, text)
    if "inconclusive" in statuses:
        return inconclusive(measured, None, text + ". Rerun on a quiet machine")
    return passed(measured, None, text)


def _mib(x: float) -> str:
    return f"{x / 2**20:,.0f} MiB"


def throughput_check(run: StagePerf, base: StagePerf, profile: dict[str, Any]) -> tuple[str, str, str]:
    """(status, measured change, message) of one stage's steady tokens/s against its baseline."""
    for who, rates in (("run", run.rates), ("baseline", base.rates)):
        if not all(math.isfinite(r) and r > 0 for r in rates):
            return "fail", "non-finite", f"{who} has a window with a non-finite or zero rate {rates}"
        if len(rates) < MIN_WINDOWS:
            return "inconclusive", "-", f"{who} has {len(rates)} steady windows (need {MIN_WINDOWS})"
    med, spread = median_spread(run.rates)
    bmed, bspread = median_spread(base.rates)
    change, low, high = shift_ci(run.rates, base.rates)
    limit = profile["slowdown"]
    value = f"{100 * change:+.1f}%"
    text = (
        f"{med:,.0f} tok/s vs {bmed:,.0f}: {value} (95% CI {100 * low:+.1f}% to {100 * high:+.1f}%; "
        f"window spread {100 * spread:.0f}%, baseline {100 * bspread:.0f}%), tolerated slowdown "
        f"{100 * limit:.0f}%"
    )
    if high < -limit:
        return "fail", value, f"slower than tolerated: {text}"
    if low < -limit:
        return "inconclusive", value, f"too noisy to judge (the interval straddles the tolerance): {text}"
    return "pass", value, text


def memory_check(run: StagePerf, base: StagePerf, profile: dict[str, Any]) -> tuple[str, str, str]:
    """(status, measured growth, message) of one stage's peak memory per rank against its baseline."""
    if run.memory_kind != base.memory_kind:
        return "fail", "-", f"memory measured as {run.memory_kind}, baseline as {base.memory_kind}"
    if not all(math.isfinite(p) and p > 0 for p in run.peaks + base.peaks):
        return "fail", "non-finite", f"a peak is non-finite or zero: run {run.peaks}, baseline {base.peaks}"
    growth = [p / b - 1 for p, b in zip(run.peaks, base.peaks, strict=True)]
    rank = max(range(len(growth)), key=growth.__getitem__)
    limit = profile["memory_growth"]
    value = f"{100 * growth[rank]:+.1f}%"
    shared = " (ranks share one process: one RSS)" if run.memory_scope == "process" else ""
    text = (
        f"rank {rank} peak {_mib(run.peaks[rank])} vs {_mib(base.peaks[rank])} ({value}, "
        f"limit +{100 * limit:.0f}%, {run.memory_kind}){shared}"
    )
    if growth[rank] > limit:
        return "fail", value, f"grew over the limit: {text}"
    return "pass", value, text


def threshold_text(t: dict[str, Any], template: str) -> str:
    """The catalogue's threshold line: `template` filled with each device profile's values."""
    profiles = t.get("perf") or {}
    if not profiles:
        return "no gates.perf thresholds"
    out = []
    for dev, p in profiles.items():
        text = template.format(**{k: f"{100 * v:g}%" for k, v in p.items() if not isinstance(v, str)})
        skip = " (throughput: skip)" if p.get("throughput") == "skip" and "{slowdown}" in template else ""
        out.append(f"{dev}: {text}{skip}")
    return "; ".join(out)


def throughput(r: PerfRecords, thresholds: dict[str, Any]) -> Outcome:
    return judge(r, thresholds, throughput_check, "throughput")


def memory(r: PerfRecords, thresholds: dict[str, Any]) -> Outcome:
    return judge(r, thresholds, memory_check, "peak memory")


# ---- the picture -----------------------------------------------------------------------------------


def _perf_stages(r: PerfRecords) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if not r.runs:
        raise NothingMeasured("no training stage has run")
    if r.baseline_problem is not None:
        raise ArtifactError(r.baseline_problem)
    return r.runs, None if r.baseline is None else r.baseline.stages


def perf_picture(r: PerfRecords, t: Thresholds, memory: bool) -> Picture:
    from gates.judges import plots

    runs, base = _perf_stages(r)
    device = next(iter(runs.values()))["device"]
    limits = t["perf"][device]
    fig, (ax,) = plots.figure(height=2.8)
    names = list(runs)
    for i, launcher in enumerate(names):
        run = stage_perf(runs[launcher])
        values = [v / 2**20 for v in run.peaks] if memory else run.rates
        ax.plot([i] * len(values), values, "o", color="#1565c0", ms=4, label="this run" if i == 0 else None)
        if base and launcher in base:
            ref = stage_perf(base[launcher])
            if memory:
                top = max(ref.peaks) / 2**20 * (1 + limits["memory_growth"])
                ax.hlines(top, i - 0.3, i + 0.3, color=plots.LIMIT, lw=2, label="limit" if i == 0 else None)
            else:
                med, _ = median_spread(ref.rates)
                ax.hlines(med, i - 0.3, i + 0.3, color=GREY, lw=3, label="baseline" if i == 0 else None)
                ax.hlines(
                    med * (1 - limits["slowdown"]),
                    i - 0.3,
                    i + 0.3,
                    color=plots.LIMIT,
                    lw=2,
                    ls="--",
                    label="tolerated" if i == 0 else None,
                )
    ax.set_xticks(range(len(names)), names)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_ylabel("peak memory per rank (MiB)" if memory else "tokens/s per steady window")
    plots.legend(ax)
    against = "the blessed baseline of this environment" if base else "no baseline (bless one to judge)"
    what = (
        f"Peak memory of every rank of each training stage ({stage_perf(next(iter(runs.values()))).memory_kind})"
        f" against {against}. Pass: every rank at or under the orange limit (baseline peak + "
        f"{100 * limits['memory_growth']:.0f}%)."
        if memory
        else f"tokens/s of every steady window of each training stage against {against}: grey the baseline's "
        f"median, dashed orange the tolerated slowdown ({100 * limits['slowdown']:.0f}%). Pass: the 95% "
        "confidence interval of the change (from both sets of windows) lies above it; fail: it lies below; "
        "inconclusive: it straddles it."
    )
    return Picture(plots.to_svg(fig), what)


# ---- the gates -------------------------------------------------------------------------------------

THROUGHPUT = Gate(
    id="perf.throughput",
    checks="median steady tokens/s of each training stage (recomputed from the raw windows) against the "
    "blessed perf baseline of its environment",
    threshold=lambda t: threshold_text(
        t, "95% CI of the change wholly slower than {slowdown}: fail; straddling it: inconclusive"
    ),
    read=read_perf,
    judge=lambda r, t: throughput(r, t),
    why="a change that keeps the numerics but trains slower is a regression users feel first",
    investigate="runs/<launcher>/metrics.json perf.windows (seconds per logged window); profile one step "
    "(torch.profiler); git bisect with python -m gates bisect GOOD BAD --gate "
    "perf.throughput; bless an understood change with python -m registry bless --perf --reason '...'",
    takes=("perf",),
    picture=lambda a, t: perf_picture(a, t, memory=False),
)

MEMORY = Gate(
    id="perf.memory",
    checks="peak memory per rank of each training stage (CUDA max_memory_allocated, CPU max RSS) "
    "against the blessed perf baseline of its environment",
    threshold=lambda t: threshold_text(t, "growth <= {memory_growth}"),
    read=read_perf,
    judge=lambda r, t: memory(r, t),
    why="memory growth turns into out-of-memory at the next larger batch or model",
    investigate="runs/<launcher>/metrics.json perf.peak_memory; on CUDA torch.cuda.memory_summary or the "
    "memory snapshot of one step (activations, optimizer state, allocator cache)",
    takes=("perf",),
    picture=lambda a, t: perf_picture(a, t, memory=True),
)
