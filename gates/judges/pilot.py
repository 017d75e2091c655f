"""The pilot gates (`pilot.<cell>`): each feature cell through every launcher (docs/pilot.md).

The pipeline's own runs never take the feature paths (dropout 0, grad_accum 1, no recompute, no
resume), so a bug there passes every other gate: the seed design shipped dropout silently off
under DDP (T21). The pilot stage trains each cell of params.yaml pilot.cells.<profile> for a few
steps on single, thread and proc (params/pilot_cells.py); per launcher this gate checks:

1. DDP equivalence (thread, proc): the cell's run against the cell's single-device run, with the
   DDP gate's own function (gates/judges/ddp.py equivalence: samples and dropout masks exact, step 0,
   prefix, end), at the pilot tier of gates.pilot.
2. The feature against its reference cell on the same launcher, by the cell's judge:
   exact (recompute, resume: bitwise every loss, grad norm, fingerprint and the parameters);
   equivalent (grad_accum, fused AdamW, compile, bf16, all: the DDP gate's check functions, which
   catch a micro-batch loss not divided by grad_accum as grad_norm[0] x grad_accum);
   differs (dropout: masks drawn at every step where the reference drew none, grad_norm[0] or the
   loss moved by more than min_effect).
3. Eval at step 0: for a cell whose features act only in training (params/pilot_cells.py
   eval_identity) the val loss before any update must equal the reference's bitwise, so an eval that
   depends on a training feature (dropout active in evaluate()) fails on data.
4. Train mode: every step of the run trained with the model in train mode (metrics.json
   eval_mode_steps empty: the seed's T21, recorded by the trainer, decided here).
Recompute on cuda also needs a lower peak memory than the base; on cpu that half is not judged
(max RSS is a process high-water mark shared by every run of the stage).
The stage records each run's outcome in runs/pilot/pilot.json: a run that crashed fails its cell,
naming the launcher, the rank and the error line, while the cell's other launchers are still
judged; a run recorded ok must have its metrics.json (never trusted on the record's word).
Runs are first checked against what params.yaml says they must be (config, steps, world, resume).
"""

from __future__ import annotations

from html import escape
from typing import Any

from gates.judges import ddp
from gates.judges.ddp import Check
from gates.judges.gate import Gate, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, fmt, passed, rel_diffs
from gates.judges.training import TRAIN_MODE_NEXT, train_mode_problem
from gates.reading.runs import PILOT_INDEX as INDEX
from gates.reading.runs import PilotRecords, read_pilot, read_pilot_picture
from gates.reading.runs import pilot_run_path as run_path
from params.pilot_cells import CELLS

Metrics = dict[str, Any]
Runs = dict[tuple[str, str], Metrics]  # (cell, launcher) -> metrics, for the runs recorded ok
EXACT_SERIES = ("grad_norm", "train_loss", "lr")  # gradients first: KI-3 moves them before the loss


def crash_text(record: dict[str, Any]) -> str:
    rank = f"rank {record['rank']}: " if record.get("rank") is not None else ""
    return f"{rank}{record['error']}"


def tiers(t: dict[str, Any], cell: str, device: str) -> dict[str, Any]:
    """A gates.loss_match-shaped dict for the cell on `device`: the pilot tier with the cell's own bounds."""
    over = t.get("cells", {}).get(cell, {}).get(device, {})
    out: dict[str, Any] = {"max_rel": over.get("max_rel", t["max_rel"])}
    if device in t:
        out[device] = {**t[device], **{k: v for k, v in over.items() if k != "max_rel"}}
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


def differs(ref: Metrics, got: Metrics, min_effect: float, ref_name: str) -> list[Check]:
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
    return [ddp.check_samples(ref, got, ref_name), masks, moved]


def val_at_0(m: Metrics) -> float | None:
    return next((e["loss"] for e in m["eval"] if e["step"] == 0), None)


def eval_at_0(ref: Metrics, got: Metrics, ref_name: str) -> Check:
    """Bitwise: before any update the cell evaluates like its reference (params/pilot_cells.py
    eval_identity: its features act only in training)."""
    a, b = val_at_0(got), val_at_0(ref)
    if a is None or b is None:
        return Check("eval at step 0", False, "no eval at step 0: the pilot base evaluates at step 0")
    if ddp.EXACT.judge([a], [b]).ok:
        return Check("eval at step 0", True, f"val loss {a!r} bitwise equal to {ref_name}'s")
    return Check(
        "eval at step 0",
        False,
        f"val loss {a!r} vs {ref_name} {b!r} (rel {fmt(rel_diffs([a], [b])[0])}) before any update: "
        "this cell's features act only in training, so its eval must equal the reference's bitwise; "
        "the eval depends on a training feature (dropout active in evaluate(): the model in train mode?)",
    )


def equivalent(
    ref: Metrics, got: Metrics, lm: dict[str, Any], name: str, ref_name: str
) -> tuple[list[Check], float]:
    """The DDP gate's check functions, applied to a feature instead of a launcher."""
    tier = ddp.tier_for(lm, got["device"])
    if tier is None:
        return [Check("tier", False, f"gates.pilot.{got['device']}: missing")], 0.0
    prefix, worst = ddp.check_prefix(ref, got, tier.prefix_steps, tier.prefix, name, ref_name)
    checks = [
        ddp.check_samples(ref, got, ref_name),
        ddp.check_dropout(ref, got, ref_name),
        ddp.check_first_step(ref, got, tier.first_step, ref_name),
        prefix,
        ddp.check_end(ref, got, tier.end, ref_name),
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
        return differs(ref, got, t["min_effect"], CELLS[cell].reference), 0.0
    return equivalent(ref, got, lm, name, CELLS[cell].reference)


def launcher_checks(
    same_eval: bool, cell: str, launcher: str, runs: Runs, t: dict[str, Any]
) -> tuple[list[Check], float]:
    """Every check of one launcher's run of the cell (it finished: runs has it); the worst prefix rel.
    `same_eval`: the cell's features act only in training (params/pilot_cells.py eval_identity)."""
    got = runs[cell, launcher]
    problem = train_mode_problem(got, run_path(cell, launcher), launcher)
    checks = [Check("train mode", problem is None, problem or "every step trained in train mode")]
    lm = tiers(t, cell, got["device"])
    worst = 0.0
    if launcher != "single":
        if (cell, "single") not in runs:
            checks.append(Check("vs single", False, "not judged: the cell's single-device run crashed"))
        else:
            o = ddp.equivalence(runs[cell, "single"], got, f"pilot/{cell}/{launcher}", lm)
            worst = o.measured if isinstance(o.measured, float) else worst
            checks.append(Check("vs single", o.status == "pass", o.message))
    reference = CELLS[cell].reference
    if reference == cell:
        return checks, worst
    if (reference, launcher) not in runs:
        why = f"not judged: cell {reference}'s {launcher} run crashed (pilot.{reference} names it)"
        return [*checks, Check(f"vs {reference}", False, why)], worst
    ref = runs[reference, launcher]
    more, w = feature_checks(cell, ref, got, lm, t, f"{cell}/{launcher}")
    if same_eval:
        more.append(eval_at_0(ref, got, reference))
    checks += [Check(f"vs {reference}: {c.name}", c.ok, c.detail) for c in more]
    return checks, max(worst, w)


def threshold_text(t: dict[str, Any], cell: str) -> str:
    judge = CELLS[cell].judge
    vs = {
        "exact": "bitwise equal to the reference",
        "equivalent": "samples and masks exact, step 0, prefix and end as the DDP gate",
        "differs": f"masks drawn every step, grad_norm[0] or the loss moved > {t['min_effect']:g}",
    }[judge]
    # the split's maxsplit is equivalent: tiers() keeps device d alone, so "d: " occurs once
    tiers_text = "; ".join(
        f"{d}: " + ddp.describe_tiers(tiers(t, cell, d)).split(f"{d}: ", 1)[1]  # pragma: no mutate -- equivalent: "d: " occurs once
        for d in ("cpu", "cuda")
        if d in t
    )  # fmt: skip
    ddp_text = f"per launcher: DDP gate vs single (samples and dropout masks exact; {tiers_text})"
    if CELLS[cell].reference == cell:
        return ddp_text
    return f"{ddp_text}; vs {CELLS[cell].reference}: {vs}"


def cell_gate(r: PilotRecords, t: dict[str, Any] | None) -> Outcome:
    """The verdict of one cell over every launcher of params.yaml pilot.launchers."""
    cell = r.cell
    if t is None:
        return failed(None, None, "params.yaml gates.pilot: missing: no thresholds for the pilot gates")
    threshold = threshold_text(t, cell)
    if not r.in_profile:
        return Outcome("skip", None, threshold, f"cell {cell} ({CELLS[cell].what}) is not in params.yaml "
                       f"pilot.cells.{r.profile}: see docs/pilot.md for which cells run where")  # fmt: skip
    launchers = r.launchers
    if "single" not in launchers:
        return failed(
            None, threshold, "params.yaml pilot.launchers: single is missing: every cell is judged against it"
        )
    recorded, runs = r.recorded, r.runs  # a run recorded ok was read (never trusted on the record's word)
    missing = [f"{INDEX}: runs.{c}.{x}: not recorded" for (c, x), rec in recorded.items() if rec is None]
    problems = missing + list(r.problems)
    if problems:
        return failed(
            None, threshold, "; ".join(dict.fromkeys(problems)) + ". Refusing to judge: rerun dvc repro pilot"
        )
    crashed = {x: recorded[cell, x] for x in launchers if (cell, x) not in runs}
    results = {x: launcher_checks(r.eval_identity, cell, x, runs, t) for x in launchers if x not in crashed}
    worst = max((w for _, w in results.values()), default=0.0)
    bad = [f"{x}: crashed: {crash_text(rec)}" for x, rec in crashed.items()]
    bad += [f"{x}: {c.name}: {c.detail}" for x, (cs, _) in results.items() for c in cs if not c.ok]
    if bad:
        return failed(worst, threshold, verdict_text(cell, bad, crashed, results))
    summary = "; ".join(f"{x}: " + ", ".join(c.name for c in cs) + " ok" for x, (cs, _) in results.items())
    return passed(worst, threshold, f"cell {cell} ({CELLS[cell].what}): {summary}")


def verdict_text(
    cell: str, bad: list[str], crashed: dict[str, Any], results: dict[str, tuple[list[Check], float]]
) -> str:
    """A failing cell's message: what failed, which launchers were judged and passed, what to do next."""
    clean = [
        f"{x} ({len(cs)} check{'s' * (len(cs) != 1)})"
        for x, (cs, _) in results.items()
        if all(c.ok for c in cs)
    ]
    judged = f"; judged and passing: {', '.join(clean)}" if clean else ""
    nexts = [
        f"a crashed run: python -m pipeline.pilot --cells {cell} --launchers {' '.join(crashed)} reruns it "
        "(XTRAIN_DEBUG=1: the traceback; the stage's log has the rank's line)"
    ] if crashed else []  # fmt: skip
    if any(c.name == "train mode" and not c.ok for cs, _ in results.values() for c in cs):
        nexts.append(TRAIN_MODE_NEXT.removeprefix("Next: "))
    nexts.append(f"docs/pilot.md; runs/pilot/{cell}/<launcher>/loss.csv")
    return f"cell {cell} ({CELLS[cell].what}): " + " | ".join(bad) + judged + ". Next: " + "; ".join(nexts)


# ---- the picture -----------------------------------------------------------------------------------


def cell_picture(r: PilotRecords, t: Thresholds) -> Picture:
    """Per launcher, the cell's loss against its reference cell's (same launcher) and against its own
    single-device run: what the pilot gate judges, step by step."""
    from gates.judges import plots
    from gates.judges.pictures import rel_panel

    cell = r.cell
    if not r.in_profile:
        return Picture(
            f"<table class='files'><tr><td>cell {escape(cell)} ({escape(CELLS[cell].what)})</td>"
            f"<td>not run on profile {escape(r.profile)}; runs on: {escape(', '.join(r.runs_on) or 'none')}"
            "</td></tr></table>",
            "The cell is not in params.yaml pilot.cells for this profile: skip, never a pass (docs/pilot.md "
            "says why). Pass, where it runs: every launcher agrees with the cell's single-device run and the "
            "feature with its reference cell.",
        )
    ref_cell = CELLS[cell].reference
    launchers, recorded = r.launchers, r.recorded
    fig, axes = plots.figure(len(launchers), height=2.2)
    max_rel = t["pilot"]["max_rel"]
    ref_name = ref_cell if ref_cell != cell else "single"
    for ax, launcher in zip(axes, launchers, strict=True):  # pragma: no mutate -- equivalent: an axis per launcher  # fmt: skip
        pair = ((cell, launcher), (ref_cell, launcher) if ref_cell != cell else (cell, "single"))
        down = [
            f"{c} {x} " + ("not recorded" if rec is None else f"crashed: {crash_text(rec)}")
            for c, x in pair
            if (rec := recorded[c, x]) is None or rec["status"] != "ok"
        ]
        if down:  # a crashed run has no numbers: its panel names the crash
            ax.text(0.01, 0.5, "; ".join(down)[:160], transform=ax.transAxes, color=plots.BAD, fontsize=8)
            ax.set_title(f"{cell} vs {ref_name}, {launcher}: crashed")
            continue
        got, ref = r.runs[pair[0]], r.runs[pair[1]]
        rel_panel(ax, got, ref, cell, ref_name, max_rel)
        ax.set_title(f"{cell} vs {ref_name}, {launcher} (world {got['world']})")
    return Picture(
        plots.to_svg(fig),
        f"Per launcher, the relative difference of the training loss (dots) and eval loss (squares) of cell "
        f"{cell} against cell {ref_cell} on the same launcher (log scale; bitwise equal drawn at "
        f"{plots.ZERO_FLOOR:g}); the dashed line is max rel {max_rel:g}. Pass: an exact cell sits on the floor, "
        "an equivalent one below the line, the dropout cell above min_effect (dropout changes the loss). "
        "A crashed run's panel names the launcher, the rank and the error instead. The gate also checks "
        "samples, masks, step 0 and each launcher against the cell's single-device run (its message).",
    )


# ---- the gates -------------------------------------------------------------------------------------


def cell_unit(cell: str) -> Gate:
    return Gate(
        id=f"pilot.{cell}",
        checks=f"the pilot cell {cell} ({CELLS[cell].what}) on every launcher of pilot.launchers: the "
        f"DDP gate against the cell's single-device run, and the feature against cell "
        f"{CELLS[cell].reference} on the same launcher ({CELLS[cell].judge}; the val loss at step 0 "
        "bitwise where eval ignores the cell's features); every step in train mode; a crashed run fails",
        threshold=lambda t: threshold_text(t["pilot"], cell) if "pilot" in t else "gates.pilot missing",
        judge=lambda r, t: cell_gate(r, t.get("pilot")),
        why="the pipeline's runs never take the feature paths (dropout, grad accumulation, recompute, resume, "
        "fused AdamW, compile, bf16): a bug there passes every other gate, as dropout silently off under DDP "
        "did in the seed design (T21); docs/pilot.md",
        investigate=f"the message names the launcher and the check (a crashed run: its rank and error line, "
        f"as runs/pilot/pilot.json runs.{cell} records it); runs/pilot/{cell}/<launcher>/loss.csv "
        f"against runs/pilot/{CELLS[cell].reference}/<launcher>/loss.csv; rerun one cell with "
        f"python -m pipeline.pilot --cells {cell}",
        takes=("pilot",),
        picture=cell_picture,
        read=lambda a, t: read_pilot(a, t, cell),
        read_for_picture=lambda a, t: read_pilot_picture(a, cell),
    )


GATES = [cell_unit(cell) for cell in CELLS]
