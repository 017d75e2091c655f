"""The pilot gates (`pilot.<cell>`): each feature cell through every launcher (docs/pilot.md).

The pipeline's own runs never take the feature paths (dropout 0, grad_accum 1, no recompute, no
resume), so a bug there passes every other gate: the seed design shipped dropout silently off
under DDP (T21). The pilot stage trains each cell of params.yaml pilot.cells.<profile> for a few
steps on single, thread and proc (params/pilot_cells.py); per launcher this gate checks:

1. DDP equivalence (thread, proc): the cell's run against the cell's single-device run, with the
   DDP gate's own function (gates/ddp.py equivalence: samples and dropout masks exact, step 0,
   prefix, end), at the pilot tier of gates.pilot.
2. The feature against its reference cell on the same launcher, by the cell's judge:
   exact (recompute, resume: bitwise every loss, grad norm, fingerprint and the parameters);
   equivalent (grad_accum, fused AdamW, compile, bf16, all: the DDP gate's check functions, which
   catch a micro-batch loss not divided by grad_accum as grad_norm[0] x grad_accum);
   differs (dropout: masks drawn at every step where the reference drew none, grad_norm[0] or the
   loss moved by more than min_effect).
Recompute on cuda also needs a lower peak memory than the base; on cpu that half is not judged
(max RSS is a process high-water mark shared by every run of the stage).
Runs are first checked against what params.yaml says they must be (config, steps, world, resume).
"""

from __future__ import annotations

from html import escape
from typing import Any

from gates import ddp
from gates.artifacts import Artifacts
from gates.ddp import Check
from gates.gate import Gate, Picture, Thresholds
from gates.outcome import Outcome, failed, fmt, passed, rel_diffs
from params.config import Params
from params.pilot_cells import CELLS, cell_params, cells_for, pilot_section

Metrics = dict[str, Any]
STAGE = "pilot"
EXACT_SERIES = ("grad_norm", "train_loss", "lr")  # gradients first: KI-3 moves them before the loss


def run_path(cell: str, launcher: str) -> str:
    return f"runs/pilot/{cell}/{launcher}/metrics.json"


def read(a: Artifacts, cell: str, launcher: str) -> Metrics:
    return a.json(run_path(cell, launcher), "metrics.schema.json", STAGE)


def tiers(t: dict[str, Any], cell: str, device: str) -> dict[str, Any]:
    """A gates.loss_match-shaped dict for the cell on `device`: the pilot tier with the cell's own bounds."""
    over = t.get("cells", {}).get(cell, {}).get(device, {})
    out: dict[str, Any] = {"max_rel": over.get("max_rel", t["max_rel"])}
    if device in t:
        out[device] = {**t[device], **{k: v for k, v in over.items() if k != "max_rel"}}
    return out


def shape_problems(params: Params, cell: str, launcher: str, m: Metrics) -> list[str]:
    """How a pilot run differs from what params.yaml says it must be."""
    where, p = run_path(cell, launcher), pilot_section(params)
    out = []
    want = cell_params(params, cell).run_config(m["config"]["model"]["vocab_size"]).config_hash()
    if m["config_hash"] != want:
        out.append(f"{where}: config_hash {m['config_hash']}, params.yaml pilot cell {cell} gives {want}")
    if m["steps"] != p["steps"] or len(m["train_loss"]) != p["steps"]:
        out.append(f"{where}: {len(m['train_loss'])} losses, params.yaml pilot.steps is {p['steps']}")
    world = 1 if launcher == "single" else params["launchers"][launcher]["world"]
    if m["world"] != world:
        out.append(f"{where}: world {m['world']}, params.yaml says {world}")
    if cell == "resume" and m["resumed_from_step"] != p["resume_at"]:
        out.append(
            f"{where}: resumed_from_step {m['resumed_from_step']}, the resume cell must resume at "
            f"pilot.resume_at={p['resume_at']}: the resume path was not taken"
        )
    return out


def exact(ref: Metrics, got: Metrics) -> Check:
    """Bitwise: every series, eval loss, sample and mask fingerprint, and the final parameters."""
    for key in EXACT_SERIES:
        bad = list(ddp.EXACT.judge(got[key], ref[key]).out)
        if bad:
            i = bad[0]
            return Check("bitwise", False, f"{key} differs at {len(bad)} steps, first step {i}: "
                         f"{got[key][i]!r} vs {ref[key][i]!r} (rel {fmt(rel_diffs([got[key][i]], [ref[key][i]])[0])})")  # fmt: skip
    pairs = {
        "eval losses": ([e["loss"] for e in ref["eval"]], [e["loss"] for e in got["eval"]]),
        "samples": (ref["samples"], got["samples"]),
        "parameters (param_digest)": (ref["param_digest"], got["param_digest"]),
    }
    for name, (x, y) in pairs.items():
        if x != y:
            return Check("bitwise", False, f"{name} differ though every loss is equal")
    return Check(
        "bitwise", True, f"bitwise equal: {len(ref['train_loss'])} losses, grad norms, evals, parameters"
    )


def differs(ref: Metrics, got: Metrics, min_effect: float) -> list[Check]:
    """Dropout on: masks drawn at every step (none in the reference), and loss[0] moved."""
    drawn, ref_drawn = got["samples"]["dropout_hash_sum"], ref["samples"]["dropout_hash_sum"]
    idle = [i for i, h in enumerate(drawn) if h == 0]
    masks = Check(
        "masks drawn",
        not idle and not any(ref_drawn),
        f"masks drawn at {len(drawn) - len(idle)} of {len(drawn)} steps"
        + (f", none at step {idle[0]}: dropout is off on this launcher (model in eval mode, or the "
           "dropout setting never reached the model: the seed's T21)" if idle else "")
        + (" but the reference drew some" if any(ref_drawn) else ""),
    )  # fmt: skip
    # at step 0 dropout moves the loss of a fresh model little (CPU pilot: 3.5e-4) but its gradient
    # more (6e-3): the effect is the larger of grad_norm[0] and the loss over the run
    g0 = rel_diffs([got["grad_norm"][0]], [ref["grad_norm"][0]])[0]
    loss = max(rel_diffs(got["train_loss"], ref["train_loss"]))
    moved = Check(
        "effect",
        max(g0, loss) > min_effect,
        f"grad_norm[0] rel {fmt(g0)}, max loss rel {fmt(loss)} from dropout off (one must exceed {min_effect:g})",
    )
    return [ddp.check_samples(ref, got), masks, moved]


def equivalent(ref: Metrics, got: Metrics, lm: dict[str, Any], name: str) -> tuple[list[Check], float]:
    """The DDP gate's check functions, applied to a feature instead of a launcher."""
    tier = ddp.tier_for(lm, got["device"])
    if tier is None:
        return [Check("tier", False, f"gates.pilot.{got['device']}: missing")], 0.0
    prefix, worst = ddp.check_prefix(ref, got, tier.prefix_steps, tier.prefix, name)
    checks = [
        ddp.check_samples(ref, got),
        ddp.check_dropout(ref, got),
        ddp.check_first_step(ref, got, tier.first_step),
        prefix,
        ddp.check_end(ref, got, tier.end),
    ]
    return checks, worst


def memory(ref: Metrics, got: Metrics) -> list[Check]:
    """Recompute must lower the peak on cuda; on cpu max RSS cannot tell (module docstring)."""
    peak = got["perf"]["peak_memory"]
    if peak["kind"] != "cuda_max_memory_allocated":
        return []
    a, b = peak["per_rank"][0]["bytes"], ref["perf"]["peak_memory"]["per_rank"][0]["bytes"]
    return [Check("peak memory", a < b, f"peak {a / 2**20:.1f} MiB vs {b / 2**20:.1f} MiB without recompute")]


def feature_checks(
    cell: str, ref: Metrics, got: Metrics, lm: dict[str, Any], t: dict[str, Any], name: str
) -> tuple[list[Check], float]:
    """The cell's feature against its reference cell on the same launcher."""
    judge = CELLS[cell].judge
    if judge == "exact":
        checks = [exact(ref, got)]
        return checks + (memory(ref, got) if cell == "recompute" else []), 0.0
    if judge == "differs":
        return differs(ref, got, t["min_effect"]), 0.0
    return equivalent(ref, got, lm, name)


def launcher_checks(
    a: Artifacts, cell: str, launcher: str, single: Metrics, t: dict[str, Any]
) -> tuple[list[Check], float]:
    """Every check of one launcher's run of the cell; the worst prefix rel."""
    got = single if launcher == "single" else read(a, cell, launcher)
    lm = tiers(t, cell, got["device"])
    checks: list[Check] = []
    worst = 0.0
    if launcher != "single":
        o = ddp.equivalence(single, got, f"pilot/{cell}/{launcher}", lm)
        worst = o.measured if isinstance(o.measured, float) else worst
        checks.append(Check("vs single", o.status == "pass", o.message))
    reference = CELLS[cell].reference
    if reference != cell:
        more, w = feature_checks(cell, read(a, reference, launcher), got, lm, t, f"{cell}/{launcher}")
        checks += [Check(f"vs {reference}: {c.name}", c.ok, c.detail) for c in more]
        worst = max(worst, w)
    return checks, worst


def threshold_text(t: dict[str, Any], cell: str) -> str:
    judge = CELLS[cell].judge
    vs = {
        "exact": "bitwise equal to the reference",
        "equivalent": "samples and masks exact, step 0, prefix and end as the DDP gate",
        "differs": f"masks drawn every step, grad_norm[0] or the loss moved > {t['min_effect']:g}",
    }[judge]
    tiers_text = "; ".join(
        f"{d}: " + ddp.describe_tiers(tiers(t, cell, d)).split(f"{d}: ", 1)[1]
        for d in ("cpu", "cuda")
        if d in t
    )
    ddp_text = f"per launcher: DDP gate vs single (samples and dropout masks exact; {tiers_text})"
    if CELLS[cell].reference == cell:
        return ddp_text
    return f"{ddp_text}; vs {CELLS[cell].reference}: {vs}"


def cell_gate(a: Artifacts, cell: str, t: dict[str, Any] | None) -> Outcome:
    """The verdict of one cell over every launcher of params.yaml pilot.launchers."""
    assert a.params is not None, "the gates need the resolved params"
    if t is None:
        return failed(None, None, "params.yaml gates.pilot: missing: no thresholds for the pilot gates")
    threshold = threshold_text(t, cell)
    if cell not in cells_for(a.params):
        return Outcome("skip", None, threshold, f"cell {cell} ({CELLS[cell].what}) is not in params.yaml "
                       f"pilot.cells.{a.params['profile']}: see docs/pilot.md for which cells run where")  # fmt: skip
    launchers = pilot_section(a.params)["launchers"]
    runs = {x: read(a, cell, x) for x in launchers}
    ref = CELLS[cell].reference
    runs_ref = {x: read(a, ref, x) for x in launchers}
    problems = [
        p
        for x in launchers
        for c, m in ((cell, runs[x]), (ref, runs_ref[x]))
        for p in shape_problems(a.params, c, x, m)
    ]
    if problems:
        return failed(
            None, threshold, "; ".join(dict.fromkeys(problems)) + ". Refusing to judge: rerun dvc repro pilot"
        )
    if "single" not in runs:
        return failed(
            None, threshold, "params.yaml pilot.launchers: single is missing: every cell is judged against it"
        )
    results = {x: launcher_checks(a, cell, x, runs["single"], t) for x in launchers}
    worst = max(w for _, w in results.values())
    bad = [f"{x}: {c.name}: {c.detail}" for x, (cs, _) in results.items() for c in cs if not c.ok]
    if bad:
        return failed(worst, threshold, f"cell {cell} ({CELLS[cell].what}): " + " | ".join(bad)
                      + ". Next: docs/pilot.md; runs/pilot/<cell>/<launcher>/loss.csv")  # fmt: skip
    summary = "; ".join(
        f"{x}: " + (", ".join(c.name for c in cs) + " ok" if cs else "the reference run")
        for x, (cs, _) in results.items()
    )
    return passed(worst, threshold, f"cell {cell} ({CELLS[cell].what}): {summary}")


# ---- the picture -----------------------------------------------------------------------------------


def cell_picture(a: Artifacts, t: Thresholds, cell: str) -> Picture:
    """Per launcher, the cell's loss against its reference cell's (same launcher) and against its own
    single-device run: what the pilot gate judges, step by step."""
    from gates import plots
    from gates.pictures import rel_panel

    assert a.params is not None
    if cell not in cells_for(a.params):
        where = [k for k, v in pilot_section(a.params)["cells"].items() if cell in v]
        return Picture(
            f"<table class='files'><tr><td>cell {escape(cell)} ({escape(CELLS[cell].what)})</td>"
            f"<td>not run on profile {escape(a.params['profile'])}; runs on: {escape(', '.join(where) or 'none')}"
            "</td></tr></table>",
            "The cell is not in params.yaml pilot.cells for this profile: skip, never a pass (docs/pilot.md "
            "says why). Pass, where it runs: every launcher agrees with the cell's single-device run and the "
            "feature with its reference cell.",
        )
    ref_cell = CELLS[cell].reference
    launchers = pilot_section(a.params)["launchers"]
    fig, axes = plots.figure(len(launchers), 1, height=2.2)
    single = read(a, cell, "single")
    max_rel = t["pilot"]["max_rel"]
    for ax, launcher in zip(axes, launchers, strict=True):
        got = read(a, cell, launcher)
        ref, ref_name = (read(a, ref_cell, launcher), ref_cell) if ref_cell != cell else (single, "single")
        rel_panel(ax, got, ref, cell, ref_name, max_rel)
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


# ---- the gates -------------------------------------------------------------------------------------


def cell_unit(cell: str) -> Gate:
    return Gate(
        id=f"pilot.{cell}",
        checks=f"the pilot cell {cell} ({CELLS[cell].what}) on every launcher of pilot.launchers: the "
        f"DDP gate against the cell's single-device run, and the feature against cell "
        f"{CELLS[cell].reference} on the same launcher ({CELLS[cell].judge})",
        threshold=lambda t: threshold_text(t["pilot"], cell) if "pilot" in t else "gates.pilot missing",
        run=lambda a, t: cell_gate(a, cell, t.get("pilot")),
        why="the pipeline's runs never take the feature paths (dropout, grad accumulation, recompute, resume, "
        "fused AdamW, compile, bf16): a bug there passes every other gate, as dropout silently off under DDP "
        "did in the seed design (T21); docs/pilot.md",
        investigate=f"the message names the launcher and the check; runs/pilot/{cell}/<launcher>/loss.csv "
        f"against runs/pilot/{CELLS[cell].reference}/<launcher>/loss.csv; rerun one cell with "
        f"python -m pipeline.pilot --cells {cell}",
        takes=("pilot",),
        picture=lambda a, t: cell_picture(a, t, cell),
    )


GATES = [cell_unit(cell) for cell in CELLS]
