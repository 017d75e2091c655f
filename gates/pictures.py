"""One picture per gate for the HTML report: what the gate judged, drawn against its threshold.

Each function reads the artifacts the gate reads (through gates.artifacts, schema-validated) and
recomputes what it draws from the raw values; it never draws from the gate's own verdict. A gate
without a function here (a new one) gets the report's generic card; a picture that cannot be drawn
(artifact invalid) raises NoPicture with the reason, shown in its place; a stage that has not run
raises NothingMeasured (a skip with nothing to draw, not a hole in the report).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

from contracts.gguf_check import check_gguf
from contracts.validate import ValidationError
from gates import consistency, ddp, goldens, perf, pilot, plots, seals
from gates.artifacts import ArtifactError, Artifacts, NonFinite, StageNotRun
from gates.dvclock import dir_md5
from gates.export_md5 import MANIFEST, _manifest, _registry
from gates.fresh_train import approx_threshold
from gates.outcome import rel_diffs
from gates.training import RUN_STAGE, run_metrics
from registry.store import FileCheck, RegistryError, check_export, compare_files

Thresholds = dict[str, Any]


@dataclass(frozen=True)
class Picture:
    html: str  # inline SVG or an HTML table
    caption: str


class NoPicture(Exception):
    """The picture cannot be drawn; the message says why (shown on the card)."""


class NothingMeasured(NoPicture):
    """The gate's stage has not run: there is nothing to draw (the card says so; not a missing picture)."""


class Unpaired(Exception):
    """Two runs a gate compares step by step are not the same config or length (the gate fails)."""

    def __init__(self, picture: Picture) -> None:
        super().__init__(picture.caption)
        self.picture = picture


def _metrics_pair(a: Artifacts, run: str, reference: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ref, got = run_metrics(a, reference), run_metrics(a, run)
    if ref["config_hash"] != got["config_hash"] or len(ref["train_loss"]) != len(got["train_loss"]):
        raise Unpaired(_unpaired(got, ref, run, reference))
    return got, ref


def _unpaired(got: dict[str, Any], ref: dict[str, Any], run: str, reference: str) -> Picture:
    """Both trajectories as they are, when no step-by-step difference can be drawn."""
    fig, (ax,) = plots.figure(height=2.6)
    for m, name in ((ref, reference), (got, run)):
        ax.plot(
            range(len(m["train_loss"])), m["train_loss"], lw=1, label=f"{name} ({len(m['train_loss'])} steps)"
        )
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (nats/token)")
    ax.set_title(f"runs/{run} vs runs/{reference}: not comparable step by step")
    plots.legend(ax)
    return Picture(
        plots.to_svg(fig),
        f"Training loss of runs/{run} and runs/{reference} (nats per token) as recorded: config "
        f"{got['config_hash']} vs {ref['config_hash']}, {len(got['train_loss'])} vs {len(ref['train_loss'])} "
        "steps. Pass needs the same config and length (the gate's message says which differs); rerun "
        "both stages from the same params.",
    )


def _rel_panel(
    ax, got: dict, ref: dict, run: str, reference: str, max_rel: float, steps: int | None = None
) -> int | None:
    """Relative difference per step against max_rel; `steps`: only the first ones (what a gate judges)."""
    n = len(ref["train_loss"]) if steps is None else min(steps, len(ref["train_loss"]))
    rel = rel_diffs(got["train_loss"][:n], ref["train_loss"][:n])
    first = plots.log_limit_plot(
        ax, list(range(len(rel))), rel, max_rel, "train loss", f"max rel {max_rel:g}"
    )
    ev_ref = {e["step"]: e["loss"] for e in ref["eval"]}
    ev = [
        (e["step"], rel_diffs([e["loss"]], [ev_ref[e["step"]]])[0])
        for e in got["eval"]
        if e["step"] in ev_ref and e["step"] <= n
    ]
    if ev:
        low, high = ax.get_ylim()
        finite = [r for _, r in ev if math.isfinite(r)]
        if finite and max(finite) * 3 > high:  # an eval difference above every train difference
            high = max(finite) * 30
            ax.set_ylim(low, high)
        top = high / 3
        ax.plot(
            [s for s, _ in ev],
            plots.on_log_axis([r for _, r in ev], top),
            "s",
            mfc="none",
            color="#6a1b9a",
            label="eval loss",
        )
        plots.legend(ax)
    ax.set_xlabel("step")
    ax.set_ylabel(f"|{run} − {reference}| / |{reference}|")
    return first


def loss_match(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    launcher = gate_id.split(".", 1)[1]
    max_rel = t["loss_match"]["max_rel"]
    got, ref = _metrics_pair(a, launcher, "single")
    # The gate bounds max rel only over its tier's prefix (later steps are chaotic): draw that.
    tier = ddp.tier_for(t["loss_match"], got["device"])
    prefix = tier.prefix_steps if tier is not None else None
    fig, (ax,) = plots.figure()
    first = _rel_panel(ax, got, ref, launcher, "single", max_rel, prefix)
    span = "every step" if prefix is None else f"the first {prefix} steps"
    ax.set_title(f"{launcher} (world {got['world']}) vs single device: relative loss difference, {span}")
    where = f" First step over the line: {first}." if first is not None else ""
    return Picture(
        plots.to_svg(fig),
        f"Relative difference of the training loss (dots) and eval loss (squares) per step over {span} "
        f"(the gate's prefix), log scale, dimensionless; exact agreement is drawn at {plots.ZERO_FLOOR:g}. "
        f"Pass: every point below the dashed line (max rel {max_rel:g}); the gate also checks the samples, "
        f"step 0 and the final val loss (its message).{where}",
    )


def launcher_parity(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    max_rel = t["launcher_parity"]["max_rel"]
    got, ref = _metrics_pair(a, "proc", "thread")
    # Judged like loss_match: the bound holds over the device tier's prefix; later steps are drawn, not judged.
    tier = ddp.tier_for(t["loss_match"], got["device"])
    prefix = tier.prefix_steps if tier is not None else None
    rel = rel_diffs(got["train_loss"], ref["train_loss"])
    fig, (top, bottom) = plots.figure(2, 1)
    steps = list(range(len(rel)))
    judged = len(rel) if prefix is None else min(prefix, len(rel))
    marked = [i for i, r in enumerate(rel[:judged]) if not r < max_rel]
    plots.overlay(top, steps, ref["train_loss"], got["train_loss"], ("thread", "proc (torchrun)"), marked)
    top.set_ylabel("train loss (nats/token)")
    top.set_title(f"torchrun (proc) vs thread-per-rank training loss, world {got['world']}")
    first = _rel_panel(bottom, got, ref, "proc", "thread", max_rel, prefix)
    span = "every step" if prefix is None else f"the first {prefix} steps (the tier's prefix)"
    where = f" First step over: {first}." if first is not None else ""
    return Picture(
        plots.to_svg(fig),
        f"Top: both trajectories (loss in nats per token), judged steps over the limit marked ×. Bottom: "
        f"their relative difference over {span} (log scale; 0 drawn at {plots.ZERO_FLOOR:g}). Pass: every "
        f"point below the dashed line (max rel {max_rel:g}); the gate also checks samples, dropout masks, "
        f"step 0 and the final val loss exactly as loss_match does (its message).{where}",
    )


def cross_rank(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    launcher = gate_id.split(".", 1)[1]
    max_abs = t["cross_rank"]["max_abs"]
    m = run_metrics(a, launcher)
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
        f"scale; 0 drawn at {plots.ZERO_FLOOR:g}). Pass: every bar below the dashed line ({max_abs:g}) "
        f"and at least two ranks.",
    )


def md5_table(checks: list, expected_label: str) -> str:
    rows = "".join(
        f"<tr class='{'ok' if c.ok else 'bad'}'><td>{escape(c.name)}</td>"
        f"<td><code>{escape(c.expected or '(absent)')}</code></td>"
        f"<td><code>{escape(c.actual or '(absent)')}</code></td><td>{'equal' if c.ok else 'DIFFERS'}</td></tr>"
        for c in checks
    )
    return (
        f"<table class='files'><tr><th>file</th><th>{escape(expected_label)}</th><th>actual md5</th>"
        f"<th></th></tr>{rows}</table>"
    )


def export_md5(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    manifest = _manifest(a, "pinned")
    actual = a.folder("exports/pinned", "export", exclude=(MANIFEST,))
    try:  # the gate's own selection: the pinned model's latest version in this dtype
        result = check_export(_registry(a), a.params["export"]["pinned_model"], manifest, actual)
    except RegistryError as e:
        raise NoPicture(str(e)) from None
    checks, entry = [*result.files, result.source], result.entry
    where = f"{entry.data['model']} v{entry.version}"
    return Picture(
        md5_table(checks, f"blessed md5 ({where})"),
        f"Each file of exports/pinned against the md5 blessed in {where}. Pass: every row equal.",
    )


def _unblessed(m: dict[str, Any], reason: str) -> Picture:
    """fresh_train without a golden to draw against: the run alone, and why it is not judged."""
    fig, (ax,) = plots.figure(height=2.6)
    ax.plot(range(len(m["train_loss"])), m["train_loss"], lw=1, label="this run")
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


def fresh_train(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    m = run_metrics(a, "single")
    files = a.folder("exports/fresh", "export", exclude=(MANIFEST,))
    env_id = m["env"]["env_id"]
    try:  # the gate's own choice of golden and tier
        choice = goldens.choose(_registry(a), env_id, m["config_hash"], m["device"], m["precision"])
    except RegistryError as e:
        raise NoPicture(str(e)) from None
    if choice is None:
        own = _registry(a).golden(env_id)
        why = f"no golden for environment {env_id} nor for config {m['config_hash']} on any other"
        if own is not None:  # an intended config change without its golden (the gate fails)
            why = f"golden {env_id} v{own.version} was blessed for config {own.data['config_hash']}"
        return _unblessed(m, why)
    golden, g = choice.entry, choice.entry.data
    ref = g["metrics"]["train_loss"]["values"]
    steps = sorted(int(s) for s in ref if int(s) < len(m["train_loss"]))
    got, want = [m["train_loss"][s] for s in steps], [ref[str(s)] for s in steps]
    rel = rel_diffs(got, want)
    exact = choice.tier == "exact"
    tol = t["fresh_train"]["approx"][m["device"]]  # the gate's approximate tier for this device type
    rtol, judged = tol["loss_rtol"], tol.get("prefix_steps", len(steps))
    limit = plots.ZERO_FLOOR * 10 if exact else rtol
    marked = [
        i
        for i, (x, y, r) in enumerate(zip(got, want, rel, strict=True))
        if (x != y if exact else i < judged and not r <= rtol)
    ]
    fig, (top, bottom) = plots.figure(2, 1)
    plots.overlay(top, steps, want, got, (f"golden v{golden.version}", "this run"), marked)
    top.set_ylabel("train loss (nats/token)")
    top.set_title(f"runs/single vs golden {choice.name} ({choice.tier} tier)")
    plots.log_limit_plot(
        bottom,
        steps,
        rel,
        limit,
        "run vs golden",
        "exact: any difference" if exact else f"rtol {rtol:g}",
    )
    bottom.set_xlabel("step")
    bottom.set_ylabel("relative difference")
    rule = (
        "Pass (exact tier): every loss bit-identical (no ×) and every export file equal."
        if exact
        else f"Pass (approximate tier): {approx_threshold(tol)} (steps past the judged ones are drawn, not "
        "marked)."
    )
    table = md5_table(compare_files(g["export"]["files"], files), "golden md5")
    return Picture(
        plots.to_svg(fig) + table,
        f"Top: this run's training loss against the golden's (nats per token), differing steps marked ×. "
        f"Bottom: relative difference per step (log scale; 0 drawn at {plots.ZERO_FLOOR:g}). "
        f"Table: exports/fresh against the golden's export md5s. {rule} "
        f"{len(marked)} of {len(steps)} steps differ.",
    )


def _token_matrix(ax, samples: list[dict[str, Any]], engine: str) -> None:
    """Prompts x generated positions: green where both models chose the same token, red where not."""
    width = max(max(len(s["ours"]), len(s["engine"])) for s in samples)
    grid = [
        [i < len(s["ours"]) and i < len(s["engine"]) and s["ours"][i] == s["engine"][i] for i in range(width)]
        for s in samples
    ]
    plots.agreement_grid(ax, grid)
    for row, s in enumerate(samples):
        if s["first_mismatch"] is not None:
            ax.plot(s["first_mismatch"], row, marker="|", color="black", ms=14, mew=2)
    ax.set_xlabel("generated token position")
    ax.set_ylabel("prompt")
    ax.set_yticks(range(len(samples)))
    ax.set_title(f"greedy tokens: ours vs {engine}")


def closed_loop(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    r = a.json("reports/closed_loop.json", "closed_loop.schema.json", "closed_loop")
    engines = sorted(r["engines"])
    fig, axes = plots.figure(len(engines), 2, height=2.6 * len(engines))
    limits = []
    for row, engine in enumerate(engines):
        e = r["engines"][engine]
        c, n = e["check"], e["negative_control"]
        if not c["samples"]:
            raise NoPicture(f"reports/closed_loop.json: {engine} has no samples")
        atol = a.params["closed_loop"][f"logits_atol_{e['compute_dtype']}"] if a.params else c["logits_atol"]
        limits.append(f"{engine} {atol:g}")
        left, right = axes[2 * row], axes[2 * row + 1]
        names = [str(i) for i in range(len(c["samples"]))] + ["control"]
        values = [s["logits_max_abs_diff"] for s in c["samples"]] + [n["logits_max_abs_diff"]]
        expect = [False] * len(c["samples"]) + [True]
        plots.bars_against_limit(left, names, values, atol, f"atol {atol:g}", expect_over=expect)
        left.set_ylabel(f"max |logit ours − {engine}|")
        left.set_xlabel("prompt")
        left.set_title(f"{engine} logits ({e['compute_dtype']})")
        _token_matrix(right, c["samples"], engine)
    return Picture(
        plots.to_svg(fig),
        f"One row per engine ({', '.join(engines)}). Left: largest absolute logit difference per prompt "
        f"(logit units, log scale; 0 drawn at {plots.ZERO_FLOOR:g}) and the engine's negative control (one "
        f"tensor perturbed), which must reach the line. Right: each generated token, green where the engine "
        f"chose ours, red where not; a black bar marks where the outputs part. Pass: every prompt below its "
        f"atol ({', '.join(limits)}), all green, each control over its line, and the export unchanged since.",
    )


def _non_finite(values: list[float]) -> list[int]:
    return [i for i, v in enumerate(values) if not math.isfinite(v)]


def finite(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    fig, (loss_ax, norm_ax) = plots.figure(1, 2, height=2.8)
    drawn, bad = [], 0
    for run in RUN_STAGE:
        try:  # the NaNs are what this picture shows: read them, do not refuse them
            m = a.json(
                f"runs/{run}/metrics.json", "metrics.schema.json", RUN_STAGE[run], refuse_non_finite=False
            )
        except StageNotRun:
            continue
        drawn.append(run)
        eval_steps = [e["step"] for e in m["eval"] if not math.isfinite(e["loss"])]
        for ax, values, extra in ((loss_ax, m["train_loss"], eval_steps), (norm_ax, m["grad_norm"], [])):
            ax.plot([v if math.isfinite(v) else math.nan for v in values], lw=1, label=run)
            for step in sorted({*_non_finite(values), *extra}):
                ax.axvline(step, color=plots.BAD, lw=1.5)
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


def _throughput_panel(ax, s: dict[str, Any]) -> list[str]:
    """tokens/s per world and launcher, whiskers from the slowest to the fastest window."""
    missing = []
    for launcher, by_world in sorted(s["results"].items()):
        missing += [f"{launcher} world {w}" for w in s["worlds"] if str(w) not in by_world]
        worlds = sorted(int(w) for w in by_world)
        rows = [by_world[str(w)] for w in worlds]
        tps = [r["tokens_per_s"] for r in rows]
        # max(0, ...): a hand-edited table may put tokens/s outside its windows; draw it, don't fail
        low = [max(0.0, t - min(r["windows"], default=t)) for t, r in zip(tps, rows, strict=True)]
        high = [max(0.0, max(r["windows"], default=t) - t) for t, r in zip(tps, rows, strict=True)]
        ax.errorbar(worlds, tps, yerr=[low, high], marker="o", capsize=3, label=launcher)
    ax.set_xlabel("world (ranks)")
    ax.set_ylabel("tokens/s (faster half's median)")
    ax.set_xticks(s["worlds"])
    ax.set_title("throughput")
    plots.legend(ax)
    return missing


def scaling(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    s = a.json("bench/scaling.json", "scaling.schema.json", "scaling")
    profile = t["scaling"].get(s["profile"])
    if profile is None:
        raise NoPicture(f"profile {s['profile']!r} has no floors in params.yaml gates.scaling")
    floors = {int(w): f for w, f in profile["floors"].items()}
    fig, (left, right) = plots.figure(1, 2, height=2.9)
    missing = _throughput_panel(left, s)
    for launcher, by_world in sorted(s["results"].items()):
        worlds = sorted(int(w) for w in by_world)
        speedups = [by_world[str(w)]["speedup"] for w in worlds]
        right.plot(worlds, speedups, "o-", label=launcher)
        low = [(w, x) for w, x in zip(worlds, speedups, strict=True) if w in floors and x < floors[w]]
        if low:
            right.plot(*zip(*low, strict=True), "x", color=plots.BAD, ms=10, mew=2)
    right.plot(
        sorted(floors),
        [floors[w] for w in sorted(floors)],
        "_",
        color=plots.LIMIT,
        ms=24,
        mew=2.5,
        label="floor",
    )
    right.plot(s["worlds"], s["worlds"], ":", color="#9e9e9e", label="linear")
    right.set_xlabel("world (ranks)")
    right.set_ylabel("speedup over world 1 (×)")
    right.set_xticks(s["worlds"])
    for ax in (left, right):
        ax.set_xlim(min(s["worlds"]) - 0.4, max(s["worlds"]) + 0.4)
    right.set_title(f"speedup ({s['profile']} profile)")
    plots.legend(right)
    gone = f" Missing from the table: {', '.join(missing)}." if missing else ""
    return Picture(
        plots.to_svg(fig),
        f"Left: tokens per second per world and launcher on {s['device']} (median window; whiskers: "
        f"slowest to fastest window). Right: speedup over world 1 against its floor (orange bars), "
        f"below-floor points marked ×. Pass: every world measured for each launcher, every speedup on or "
        f"above its floor, thread and proc within {100 * profile['band']:.0f}% of each other.{gone}",
    )


def export_gguf(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    rows = []
    for name in ("fresh", "pinned"):
        result = check_gguf(a.root / "exports" / name)
        problems = result["problems"]
        verdict = (
            "<span class='ok'>equal</span>"
            if not problems
            else f"<span class='bad'>{len(problems)} problems</span>"
        )
        first = escape(problems[0]) if problems else "-"
        rows.append(
            f"<tr><td>exports/{name}/model.gguf</td><td>{result['tensors_compared']}</td><td>{verdict}</td>"
            f"<td>{first}</td></tr>"
        )
    table = (
        "<table class='files'><tr><th>file</th><th>tensors compared</th><th>vs safetensors and config.json"
        f"</th><th>first problem</th></tr>{''.join(rows)}</table>"
    )
    return Picture(
        table,
        "Each export's model.gguf read back with GGUFReader: every tensor against model.safetensors (bitwise "
        "for f32), the metadata against config.json and tokenizer.json. Pass: both rows equal.",
    )


def _perf_stages(a: Artifacts) -> tuple[dict[str, Any], dict[str, Any] | None]:
    runs, _ = perf.run_stages(a)
    if not runs:
        raise NothingMeasured("no training stage has run")
    _, base = perf.baseline_for(a, runs)
    return runs, None if base is None else base.data["stages"]


def perf_gate(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    runs, base = _perf_stages(a)
    device = next(iter(runs.values()))["device"]
    limits = t["perf"][device]
    fig, (ax,) = plots.figure(1, 1, height=2.8)
    names = list(runs)
    memory = gate_id == "perf.memory"
    for i, launcher in enumerate(names):
        run = perf.stage_perf(runs[launcher])
        values = [v / 2**20 for v in run.peaks] if memory else run.rates
        ax.plot([i] * len(values), values, "o", color="#1565c0", ms=4, label="this run" if i == 0 else None)
        if base and launcher in base:
            ref = perf.stage_perf(base[launcher])
            if memory:
                top = max(ref.peaks) / 2**20 * (1 + limits["memory_growth"])
                ax.hlines(top, i - 0.3, i + 0.3, color=plots.LIMIT, lw=2, label="limit" if i == 0 else None)
            else:
                med, _ = perf.median_spread(ref.rates)
                ax.hlines(med, i - 0.3, i + 0.3, color="#9e9e9e", lw=3, label="baseline" if i == 0 else None)
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
        f"Peak memory of every rank of each training stage ({perf.stage_perf(next(iter(runs.values()))).memory_kind})"
        f" against {against}. Pass: every rank at or under the orange limit (baseline peak + "
        f"{100 * limits['memory_growth']:.0f}%)."
        if memory
        else f"tokens/s of every steady window of each training stage against {against}: grey the baseline's "
        f"median, dashed orange the tolerated slowdown ({100 * limits['slowdown']:.0f}%). Pass: the 95% "
        "confidence interval of the change (from both sets of windows) lies above it; fail: it lies below; "
        "inconclusive: it straddles it."
    )
    return Picture(plots.to_svg(fig), what)


def pilot_cell(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    """Per launcher, the cell's loss against its reference cell's (same launcher) and against its own
    single-device run: what the pilot gate judges, step by step."""
    cell = gate_id.split(".", 1)[1]
    assert a.params is not None
    if cell not in pilot.cells_for(a.params):
        where = [k for k, v in pilot.pilot_section(a.params)["cells"].items() if cell in v]
        return Picture(
            f"<table class='files'><tr><td>cell {escape(cell)} ({escape(pilot.CELLS[cell].what)})</td>"
            f"<td>not run on profile {escape(a.params['profile'])}; runs on: {escape(', '.join(where) or 'none')}"
            "</td></tr></table>",
            "The cell is not in params.yaml pilot.cells for this profile: skip, never a pass (docs/pilot.md "
            "says why). Pass, where it runs: every launcher agrees with the cell's single-device run and the "
            "feature with its reference cell.",
        )
    ref_cell = pilot.CELLS[cell].reference
    launchers = pilot.pilot_section(a.params)["launchers"]
    fig, axes = plots.figure(len(launchers), 1, height=2.2)
    single = pilot.read(a, cell, "single")
    max_rel = t["pilot"]["max_rel"]
    for ax, launcher in zip(axes, launchers, strict=True):
        got = pilot.read(a, cell, launcher)
        ref, ref_name = (
            (pilot.read(a, ref_cell, launcher), ref_cell) if ref_cell != cell else (single, "single")
        )
        _rel_panel(ax, got, ref, cell, ref_name, max_rel)
        ax.set_title(f"{cell} vs {ref_name}, {launcher} (world {got['world']})")
    return Picture(
        plots.to_svg(fig),
        f"Per launcher, the relative difference of the training loss (dots) and eval loss (squares) of cell "
        f"{cell} against cell {ref_cell} on the same launcher (log scale; bitwise equal drawn at "
        f"{plots.ZERO_FLOOR:g}); the dashed line is max rel {max_rel:g}. Pass: an exact cell sits on the floor, "
        "an equivalent one below the line, the dropout cell above min_effect (dropout changes the loss). "
        "The gate also checks "
        "samples, masks, step 0 and each launcher against the cell's single-device run (its message).",
    )


def seals_picture(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    """Each sealed path: dvc.lock's md5 against the tree's (a folder: its `.dir` hash)."""
    lock = a.lock
    rows = []
    for path, recorded in seals.sealed_paths(lock, seals.in_scope(lock, a.scope)):
        full = lock.root / path
        if recorded.endswith(".dir"):
            now = dir_md5(lock.listing(path)) if full.is_dir() else None
            name = f"{path}/ ({len(lock.listing(path)) if full.is_dir() else 0} files)"
        else:
            now, name = (lock.md5(path) if full.is_file() else None), path
        rows.append(FileCheck(name, recorded, now))
    return Picture(
        md5_table(rows, "dvc.lock md5"),
        "Every out of dvc.lock (a folder by DVC's .dir hash of its files) and every folder dep such as "
        "registry/models, hashed now. Pass: every row equal and no stage or out missing from dvc.lock.",
    )


def consistency_picture(a: Artifacts, gate_id: str, t: Thresholds) -> Picture:
    """Each run's files against what its metrics.json gives."""
    rows = []
    for run in RUN_STAGE:
        try:
            problems = consistency.run_problems(a, run)
        except StageNotRun:
            continue
        for name in ("summary.json", "loss.csv", "eval.csv", "checkpoints/latest", "model.safetensors"):
            bad = any(name in p for p in problems)
            rows.append(
                f"<tr class='{'bad' if bad else 'ok'}'><td>runs/{run}/{escape(name)}</td>"
                f"<td>{'DIFFERS' if bad else 'agrees'}</td></tr>"
            )
    if not rows:
        raise NoPicture("no training stage has run")
    return Picture(
        "<table class='files'><tr><th>file</th><th>against metrics.json</th></tr>"
        + "".join(rows)
        + "</table>",
        "Each run's summary, csv files, latest pointer and final weights (parameter digest recomputed "
        "from model.safetensors) against its metrics.json. Pass: every row agrees.",
    )


PICTURES: dict[str, Callable[[Artifacts, str, Thresholds], Picture]] = {
    "seals": seals_picture,
    "consistency": consistency_picture,
    "loss_match": loss_match,
    "launcher_parity": launcher_parity,
    "cross_rank": cross_rank,
    "export_md5": export_md5,
    "fresh_train": fresh_train,
    "closed_loop": closed_loop,
    "finite": finite,
    "scaling": scaling,
    "export_gguf": export_gguf,
    "perf": perf_gate,
    "pilot": pilot_cell,
}


def draw(gate_id: str, a: Artifacts, t: Thresholds) -> Picture | None:
    """The gate's picture; None for a gate this module does not know (a generic card)."""
    fn = PICTURES.get(gate_id) or PICTURES.get(gate_id.split(".", 1)[0])
    if fn is None:
        return None
    try:
        return fn(a, gate_id, t)
    except Unpaired as e:
        return e.picture
    except StageNotRun as e:
        raise NothingMeasured(str(e)) from None
    except (ArtifactError, ValidationError, RegistryError, NonFinite) as e:
        raise NoPicture(f"artifact unreadable: {e}") from None
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise NoPicture(f"cannot draw from these artifacts ({type(e).__name__}: {e})") from None
