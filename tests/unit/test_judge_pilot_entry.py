"""gates/judges/pilot.py's entry points under mutation (docs/judge-mutation.md): cell_gate,
launcher_checks, feature_checks, shape_problems and the gates' definitions, on torch-free trees.

tests/unit/test_judge_pilot.py judges hand-made records with the pure checks; here each run is a
metrics.json valid against metrics.schema.json, shaped as params.yaml's pilot cell gives it, with
runs/pilot/pilot.json beside it, all recorded in dvc.lock under the pilot stage and read through
Artifacts: the schemas, the stage and params.yaml are the real ones.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_judge_training import record
from test_judge_training_entry import full

from conftest import PARAMS
from gates.judges import pilot, plots
from gates.judges.ddp import Check
from gates.judges.pilot import cell_gate, cell_unit, feature_checks, launcher_checks
from gates.reading import expect
from gates.reading.runs import pilot_index as records
from gates.reading.runs import pilot_metrics, read_pilot
from gates.reading.runs import pilot_shape_problems as shape_problems
from judge_trees import Tree
from params.cadence import eval_steps
from params.config import load_params
from params.identity import config_identity
from params.pilot_cells import CELLS, cell_params, eval_identity

CPU = load_params(str(PARAMS), ["profile=cpu"])
T = {
    "max_rel": 1e-3,
    "min_effect": 1e-3,
    "cpu": {"first_step_rtol": 1e-5, "prefix_steps": None, "final_val_atol": 0.01},
}
WORLD = {
    "single": 1,
    "thread": CPU["launchers"]["thread"]["world"],
    "proc": CPU["launchers"]["proc"]["world"],
}
THRESHOLD = pilot.threshold_text(T, "base")


def pilot_run(cell: str, launcher: str, params: Any = CPU) -> dict[str, Any]:
    """A run of exactly what params.yaml's pilot cell gives on `launcher`."""
    config = cell_params(params, cell).run_config(300).to_dict()
    world = WORLD[launcher]
    m = record(world=world, launcher=launcher, config=config, config_hash=config_identity(config))
    steps = config["train"]["steps"]
    m.update(steps=steps, train_loss=[4.0 - 0.1 * i for i in range(steps)], grad_norm=[1.0] * steps)
    m.update(lr=[0.1] * steps, resumed_from_step=params["pilot"]["resume_at"] if cell == "resume" else None)
    m["samples"] = {k: [0] * steps for k in expect.SAMPLE_SERIES}
    m["eval"] = [{"step": s, "loss": 4.5 - 0.1 * s} for s in eval_steps(config["train"])]
    m["final_val_loss"] = m["eval"][-1]["loss"]
    if cell in ("dropout", "all"):
        m["samples"]["dropout_hash_sum"] = [7] * steps
        m["grad_norm"] = [1.1] * steps
    return full(m)


def tree_of(root: Path, runs: dict[tuple[str, str], Any], params: Any = CPU) -> Tree:
    """runs/pilot: the index (a dict value: that run's record; else ok) and each ok run's metrics.json."""
    tree = Tree(root, params=params)
    index: dict[str, Any] = {
        "format": "xtrain-pilot/2", "profile": "cpu", "device": "cpu", "steps": 6, "resume_at": 3,
        "worlds": WORLD, "launchers": ["single", "thread", "proc"], "cells": [], "runs": {},
        "seconds": {}, "wall_s": 1.0, "proc_job_s": None, "proc_restarts": 0,
    }  # fmt: skip
    for (cell, x), m in runs.items():
        rec = m if "status" in m else {"status": "ok"}
        index["runs"].setdefault(cell, {})[x] = rec
        if rec["status"] == "ok":
            path = root / pilot.run_path(cell, x)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(m))
            tree.record_out("pilot", pilot.run_path(cell, x))
    (root / "runs" / "pilot").mkdir(parents=True, exist_ok=True)
    (root / pilot.INDEX).write_text(json.dumps(index))
    tree.record_out("pilot", pilot.INDEX)
    return tree


def cells(*names: str) -> dict[tuple[str, str], Any]:
    return {(c, x): pilot_run(c, x) for c in names for x in ("single", "thread", "proc")}


def gate(root: Path, runs: dict[tuple[str, str], Any], cell: str, t: Any = T, params: Any = CPU):
    return cell_gate(read_pilot(tree_of(root, runs, params).artifacts(), {"pilot": t}, cell), t)


# -- the shape of a run ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["base", "resume", "dropout"])
@pytest.mark.parametrize("launcher", ["single", "thread", "proc"])
def test_a_run_as_params_yaml_gives_it_has_no_problem(cell: str, launcher: str) -> None:
    assert shape_problems(CPU, cell, launcher, pilot_run(cell, launcher)) == []


def test_each_way_a_run_is_not_what_params_yaml_says_is_named() -> None:
    where = "runs/pilot/base/thread/metrics.json"
    m = pilot_run("base", "thread")
    m["config_hash"] = "x" * 16
    want = config_identity(cell_params(CPU, "base").run_config(300).to_dict())
    assert f"{where}: config_hash {'x' * 16}, params.yaml pilot cell base gives {want}" in shape_problems(
        CPU, "base", "thread", m
    )
    m = pilot_run("base", "thread")
    m["steps"] = 7
    assert f"{where}: 6 losses, params.yaml pilot.steps is 6" in shape_problems(CPU, "base", "thread", m)
    m = pilot_run("base", "thread")
    m["train_loss"] = m["train_loss"][:5]
    assert f"{where}: 5 losses, params.yaml pilot.steps is 6" in shape_problems(CPU, "base", "thread", m)
    m = pilot_run("base", "single", params=CPU)
    assert shape_problems(CPU, "base", "thread", m) == [
        f"{where}: world 1, params.yaml says {WORLD['thread']}"
    ]
    assert WORLD["thread"] != 1
    m = pilot_run("base", "thread")
    m["world"] = 1
    assert f"{where}: world 1, params.yaml says {WORLD['thread']}" in shape_problems(CPU, "base", "thread", m)
    m = pilot_run("base", "single")
    m["world"] = 2
    assert "runs/pilot/base/single/metrics.json: world 2, params.yaml says 1" in shape_problems(
        CPU, "base", "single", m
    )
    m = pilot_run("resume", "proc")
    m["resumed_from_step"] = 2
    assert shape_problems(CPU, "resume", "proc", m) == [
        "runs/pilot/resume/proc/metrics.json: resumed_from_step 2, the resume cell must resume at "
        "pilot.resume_at=3: the resume path was not taken"
    ]
    m = pilot_run("base", "proc")
    m["resumed_from_step"] = 2  # only the resume cell must resume
    assert shape_problems(CPU, "base", "proc", m) == []


# -- records ---------------------------------------------------------------------------------------------


def test_records_are_read_from_the_index_and_an_absent_one_is_none(tmp_path: Path) -> None:
    crash = {"status": "failed", "rank": 1, "error": "boom"}
    runs = {("base", "single"): pilot_run("base", "single"), ("base", "proc"): crash}
    a = tree_of(tmp_path, runs).artifacts()
    got = records(a, ["base", "dropout"], ["single", "proc"])
    assert got == {
        ("base", "single"): {"status": "ok"},
        ("base", "proc"): crash,
        ("dropout", "single"): None,
        ("dropout", "proc"): None,
    }
    assert pilot_metrics(a, "base", "single")["world"] == 1


# -- the verdict of a cell -------------------------------------------------------------------------------


def test_a_clean_base_cell_passes_on_every_launcher(tmp_path: Path) -> None:
    o = gate(tmp_path, cells("base"), "base")
    assert (o.status, o.measured, o.threshold) == ("pass", 0.0, THRESHOLD)
    assert o.message == (
        f"cell base ({CELLS['base'].what}): single: train mode ok; thread: train mode, vs single ok; "
        "proc: train mode, vs single ok"
    )


def test_the_worst_prefix_rel_is_measured(tmp_path: Path) -> None:
    runs = cells("base")
    runs["base", "proc"]["train_loss"][3] *= 1 + 5e-4
    o = gate(tmp_path, runs, "base")
    assert o.status == "pass" and o.measured == pytest.approx(5e-4, rel=1e-3)
    runs["base", "thread"]["train_loss"][2] *= 1 + 2e-3
    o = gate(tmp_path / "b", runs, "base")
    assert o.status == "fail" and o.measured == pytest.approx(2e-3, rel=1e-3)
    assert o.message.startswith(f"cell base ({CELLS['base'].what}): thread: vs single: ")
    assert "judged and passing: single (1 check), proc (2 checks). Next: docs/pilot.md" in o.message


def test_a_feature_cell_passes_against_its_reference(tmp_path: Path) -> None:
    o = gate(tmp_path, cells("base", "dropout"), "dropout")
    assert o.status == "pass" and o.threshold == pilot.threshold_text(T, "dropout")
    assert o.message == (
        f"cell dropout ({CELLS['dropout'].what}): single: train mode, vs base: samples, vs base: masks drawn, "
        "vs base: effect, vs base: eval at step 0 ok; thread: train mode, vs single, vs base: samples, "
        "vs base: masks drawn, vs base: effect, vs base: eval at step 0 ok; proc: train mode, vs single, "
        "vs base: samples, vs base: masks drawn, vs base: effect, vs base: eval at step 0 ok"
    )
    o = gate(tmp_path / "g", cells("base", "grad_accum"), "grad_accum")
    assert o.status == "pass"
    assert o.message.startswith(
        f"cell grad_accum ({CELLS['grad_accum'].what}): single: train mode, vs base: samples, "
        "vs base: dropout masks, vs base: first step, vs base: prefix, vs base: end, vs base: eval at step 0 ok;"
    )


def test_no_thresholds_a_cell_not_run_and_no_single_launcher(tmp_path: Path) -> None:
    o = gate(tmp_path, cells("base"), "base", t=None)
    assert (o.status, o.measured, o.threshold) == ("fail", None, None)
    assert o.message == "params.yaml gates.pilot: missing: no thresholds for the pilot gates"
    o = gate(tmp_path / "s", cells("base"), "fused_adamw")
    assert (o.status, o.measured, o.threshold) == ("skip", None, pilot.threshold_text(T, "fused_adamw"))
    assert o.message == (
        f"cell fused_adamw ({CELLS['fused_adamw'].what}) is not in params.yaml pilot.cells.cpu: see "
        "docs/pilot.md for which cells run where"
    )
    no_single = copy.deepcopy(CPU)
    no_single["pilot"]["launchers"] = ["thread", "proc"]
    o = gate(tmp_path / "n", cells("base"), "base", params=no_single)
    assert (o.status, o.measured, o.threshold) == ("fail", None, THRESHOLD)
    assert o.message == "params.yaml pilot.launchers: single is missing: every cell is judged against it"


def test_a_run_not_recorded_or_misshapen_refuses_to_judge(tmp_path: Path) -> None:
    runs = cells("base", "dropout")
    del runs["dropout", "proc"], runs["base", "thread"]
    o = gate(tmp_path, runs, "dropout")
    assert (o.status, o.measured, o.threshold) == ("fail", None, pilot.threshold_text(T, "dropout"))
    assert o.message == (
        "runs/pilot/pilot.json: runs.dropout.proc: not recorded; runs/pilot/pilot.json: runs.base.thread: "
        "not recorded. Refusing to judge: rerun dvc repro pilot"
    )
    runs = cells("base")
    runs["base", "proc"]["world"] = 1
    runs["base", "proc"]["cross_rank"]["per_rank"] = runs["base", "proc"]["cross_rank"]["per_rank"][:1]
    o = gate(tmp_path / "w", runs, "base")
    assert o.status == "fail" and o.measured is None
    assert o.message == (
        f"runs/pilot/base/proc/metrics.json: world 1, params.yaml says {WORLD['proc']}. Refusing to judge: "
        "rerun dvc repro pilot"
    )


def test_a_crash_fails_its_cell_and_the_other_launchers_are_still_judged(tmp_path: Path) -> None:
    runs = cells("base")
    runs["base", "proc"] = {"status": "failed", "rank": 1, "error": "OOM"}
    o = gate(tmp_path, runs, "base")
    assert (o.status, o.measured, o.threshold) == ("fail", 0.0, THRESHOLD)
    assert o.message == (
        f"cell base ({CELLS['base'].what}): proc: crashed: rank 1: OOM; judged and passing: single (1 check), "
        "thread (2 checks). Next: a crashed run: python -m pipeline.pilot --cells base --launchers proc reruns "
        "it (XTRAIN_DEBUG=1: the traceback; the stage's log has the rank's line); docs/pilot.md; "
        "runs/pilot/base/<launcher>/loss.csv"
    )


def test_a_crashed_single_or_reference_run_fails_what_needs_it(tmp_path: Path) -> None:
    runs = cells("base", "resume")
    runs["resume", "single"] = {"status": "failed", "rank": None, "error": "bad"}
    runs["base", "proc"] = {"status": "failed", "rank": 0, "error": "worse"}
    o = gate(tmp_path, runs, "resume")
    assert o.status == "fail"
    assert o.message.startswith(
        f"cell resume ({CELLS['resume'].what}): single: crashed: bad | "
        "thread: vs single: not judged: the cell's single-device run crashed | "
        "proc: vs single: not judged: the cell's single-device run crashed | "
        "proc: vs base: not judged: cell base's proc run crashed (pilot.base names it). Next: a crashed run: "
        "python -m pipeline.pilot --cells resume --launchers single reruns it"
    )


def test_a_run_in_eval_mode_fails_train_mode(tmp_path: Path) -> None:
    runs = cells("base")
    runs["base", "thread"]["eval_mode_steps"] = [2]
    o = gate(tmp_path, runs, "base")
    assert o.status == "fail"
    assert o.message.startswith(f"cell base ({CELLS['base'].what}): thread: train mode: ")
    assert pilot.TRAIN_MODE_NEXT.removeprefix("Next: ") in o.message


# -- launcher_checks and feature_checks ------------------------------------------------------------------


def by_name(checks: list[Check]) -> dict[str, bool]:
    return {c.name: c.ok for c in checks}


def test_launcher_checks_per_launcher_and_cell() -> None:
    runs = cells("base", "resume", "dropout")
    checks, worst = launcher_checks(eval_identity(CPU, "base"), "base", "single", runs, T)
    assert checks == [Check("train mode", True, "every step trained in train mode")] and worst == 0.0
    checks, worst = launcher_checks(eval_identity(CPU, "resume"), "resume", "thread", runs, T)
    assert by_name(checks) == {"train mode": True, "vs single": True, "vs base: bitwise": True,
                               "vs base: eval at step 0": True}  # fmt: skip
    assert checks[2].detail == "bitwise equal: 6 losses, grad norms, evals, parameters"
    checks, _ = launcher_checks(eval_identity(CPU, "dropout"), "dropout", "proc", runs, T)
    assert [c.name for c in checks] == ["train mode", "vs single", "vs base: samples", "vs base: masks drawn",
                                        "vs base: effect", "vs base: eval at step 0"]  # fmt: skip
    runs["resume", "thread"]["train_loss"][4] = 9.0
    checks, worst = launcher_checks(eval_identity(CPU, "resume"), "resume", "thread", runs, T)
    assert by_name(checks) == {"train mode": True, "vs single": False, "vs base: bitwise": False,
                               "vs base: eval at step 0": True}  # fmt: skip
    assert worst == pytest.approx(abs(9.0 - 3.6) / 3.6)


def test_feature_checks_take_the_cells_judge() -> None:
    base, rec = pilot_run("base", "single"), pilot_run("recompute", "single")
    cuda = {"kind": "cuda_max_memory_allocated", "per_rank": [{"rank": 0, "bytes": 2**20}]}
    rec["perf"] = {"peak_memory": cuda}
    base["perf"] = {"peak_memory": {**cuda, "per_rank": [{"rank": 0, "bytes": 2**21}]}}
    lm = pilot.tiers(T, "recompute", "cpu")
    checks, w = feature_checks("recompute", base, rec, lm, T, "recompute/single")
    assert [c.name for c in checks] == ["bitwise", "peak memory"] and all(c.ok for c in checks) and w == 0.0
    res = copy.deepcopy(rec)
    checks, w = feature_checks("resume", base, res, lm, T, "resume/single")
    assert [c.name for c in checks] == ["bitwise"] and w == 0.0
    drop = pilot_run("dropout", "single")
    checks, w = feature_checks("dropout", base, drop, lm, {**T, "min_effect": 0.2}, "dropout/single")
    assert by_name(checks) == {"samples": True, "masks drawn": True, "effect": False} and w == 0.0
    assert checks[2].detail.endswith("(one must exceed 0.2)")
    got = pilot_run("grad_accum", "single")
    got["train_loss"][2] *= 1 + 4e-4
    checks, w = feature_checks("grad_accum", base, got, lm, T, "grad_accum/single")
    assert [c.name for c in checks] == ["samples", "dropout masks", "first step", "prefix", "end"]
    assert all(c.ok for c in checks) and w == pytest.approx(4e-4, rel=1e-3)


# -- the gates' definitions ------------------------------------------------------------------------------


def test_each_cell_is_a_gate_that_judges_with_the_pilot_thresholds(tmp_path: Path) -> None:
    assert [g.id for g in pilot.GATES] == [f"pilot.{c}" for c in CELLS]
    g = cell_unit("dropout")
    assert g.checks == (
        f"the pilot cell dropout ({CELLS['dropout'].what}) on every launcher of pilot.launchers: the DDP gate "
        "against the cell's single-device run, and the feature against cell base on the same launcher "
        "(differs; the val loss at step 0 bitwise where eval ignores the cell's features); every step in "
        "train mode; a crashed run fails"
    )
    assert g.threshold({"pilot": T}) == pilot.threshold_text(T, "dropout")
    assert g.threshold({}) == "gates.pilot missing"
    assert g.why == (
        "the pipeline's runs never take the feature paths (dropout, grad accumulation, recompute, resume, "
        "fused AdamW, compile, bf16): a bug there passes every other gate, as dropout silently off under DDP "
        "did in the seed design (T21); docs/pilot.md"
    )
    assert g.investigate == (
        "the message names the launcher and the check (a crashed run: its rank and error line, as "
        "runs/pilot/pilot.json runs.dropout records it); runs/pilot/dropout/<launcher>/loss.csv against "
        "runs/pilot/base/<launcher>/loss.csv; rerun one cell with python -m pipeline.pilot --cells dropout"
    )
    assert g.takes == ("pilot",)
    a = tree_of(tmp_path, cells("base")).artifacts()
    assert cell_unit("base").run(a, {"pilot": T}) == cell_gate(read_pilot(a, {"pilot": T}, "base"), T)
    assert (
        cell_unit("base").run(a, {}).message
        == "params.yaml gates.pilot: missing: no thresholds for the pilot gates"
    )


# -- the picture -----------------------------------------------------------------------------------------


def picture(
    root: Path, runs: dict[tuple[str, str], Any], cell: str, max_rel: float = 1e-3, params: Any = CPU
):
    return cell_unit(cell).draw(tree_of(root, runs, params).artifacts(), {"pilot": {**T, "max_rel": max_rel}})


def test_a_cell_not_run_on_the_profile_names_where_it_runs(tmp_path: Path, drawn) -> None:
    pic = picture(tmp_path, cells("base"), "fused_adamw")
    assert drawn == []
    assert pic.html == (
        f"<table class='files'><tr><td>cell fused_adamw ({CELLS['fused_adamw'].what})</td>"
        "<td>not run on profile cpu; runs on: gpu</td></tr></table>"
    )
    assert pic.caption == (
        "The cell is not in params.yaml pilot.cells for this profile: skip, never a pass (docs/pilot.md says "
        "why). Pass, where it runs: every launcher agrees with the cell's single-device run and the feature "
        "with its reference cell."
    )
    nowhere = copy.deepcopy(CPU)
    nowhere["pilot"]["cells"]["gpu"] = ["dropout"]
    nowhere["pilot"]["cells"]["cpu"] = ["dropout", "recompute"]
    pic = picture(tmp_path / "n", cells("base"), "fused_adamw", params=nowhere)
    assert "<td>not run on profile cpu; runs on: none</td>" in pic.html
    nowhere["pilot"]["cells"]["x<y"] = ["fused_adamw"]
    nowhere["pilot"]["cells"]["gpu"] = ["fused_adamw"]
    pic = picture(tmp_path / "e", cells("base"), "fused_adamw", params=nowhere)
    assert "<td>not run on profile cpu; runs on: gpu, x&lt;y</td>" in pic.html


def test_the_picture_draws_each_launchers_rel_against_the_reference(tmp_path: Path, drawn) -> None:
    runs = cells("base", "dropout")
    runs["dropout", "thread"]["train_loss"][1] *= 1.25
    runs["dropout", "thread"]["eval"][-1]["loss"] *= 2
    pic = picture(tmp_path, runs, "dropout", max_rel=0.5)
    assert pic.html == "<svg/>"
    assert pic.caption == (
        "Per launcher, the relative difference of the training loss (dots) and eval loss (squares) of cell "
        f"dropout against cell base on the same launcher (log scale; bitwise equal drawn at {plots.ZERO_FLOOR:g}); "
        "the dashed line is max rel 0.5. Pass: an exact cell sits on the floor, an equivalent one below the "
        "line, the dropout cell above min_effect (dropout changes the loss). A crashed run's panel names the "
        "launcher, the rank and the error instead. The gate also checks samples, masks, step 0 and each "
        "launcher against the cell's single-device run (its message)."
    )
    (fig,) = drawn
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [f"dropout vs base, {x} (world {WORLD[x]})" for x in ("single", "thread", "proc")]
    thread = fig.axes[1]
    loss, limit = thread.lines[0], thread.lines[1]
    assert [float(v) for v in loss.get_ydata()] == pytest.approx(
        [plots.ZERO_FLOOR, 0.25] + [plots.ZERO_FLOOR] * 4, rel=1e-9
    )
    assert list(limit.get_ydata()) == [0.5, 0.5]
    evals = [line for line in thread.lines if line.get_label() == "eval loss"]
    assert [float(v) for v in evals[0].get_ydata()] == [plots.ZERO_FLOOR, 1.0]
    assert [float(v) for v in fig.axes[0].lines[0].get_ydata()] == [plots.ZERO_FLOOR] * 6
    assert {ax.get_ylabel() for ax in fig.axes} == {"|dropout − base| / |base|"}
    assert tuple(fig.get_size_inches()) == pytest.approx((7.2, 2.2 * 3))


def test_the_base_cell_is_drawn_against_its_single_run(tmp_path: Path, drawn) -> None:
    runs = cells("base")
    runs["base", "proc"]["train_loss"][0] *= 1.5
    picture(tmp_path, runs, "base")
    (fig,) = drawn
    assert [ax.get_title() for ax in fig.axes] == [f"base vs single, {x} (world {WORLD[x]})" for x in WORLD]
    assert float(fig.axes[2].lines[0].get_ydata()[0]) == pytest.approx(0.5)


def test_a_crashed_or_unrecorded_run_names_itself_in_its_panel(tmp_path: Path, drawn) -> None:
    runs = cells("base", "dropout")
    runs["dropout", "proc"] = {"status": "failed", "rank": 1, "error": "OOM"}
    runs["base", "proc"] = {"status": "failed", "rank": None, "error": "gone"}
    del runs["base", "thread"]
    picture(tmp_path, runs, "dropout")
    (fig,) = drawn
    assert [ax.get_title() for ax in fig.axes] == [
        "dropout vs base, single (world 1)",
        "dropout vs base, thread: crashed",
        "dropout vs base, proc: crashed",
    ]
    assert [t.get_text() for t in fig.axes[1].texts] == ["base thread not recorded"]
    (text,) = fig.axes[2].texts
    assert text.get_text() == "dropout proc crashed: rank 1: OOM; base proc crashed: gone"
    assert text.get_color() == plots.BAD and text.get_fontsize() == 8
    assert text.get_transform() == fig.axes[2].transAxes and text.get_position() == (0.01, 0.5)
    assert len(fig.axes[2].lines) == 0
    runs["base", "proc"] = {"status": "failed", "rank": None, "error": "y" * 200}
    picture(tmp_path / "long", runs, "dropout")
    assert (
        drawn[1].axes[2].texts[0].get_text()
        == ("dropout proc crashed: rank 1: OOM; base proc crashed: " + "y" * 200)[:160]
    )


# -- the names and bounds each check is handed -----------------------------------------------------------


def test_shape_problems_name_the_pilot_run_in_the_records_own_problems() -> None:
    m = pilot_run("base", "thread")
    m["cross_rank"]["per_rank"] = m["cross_rank"]["per_rank"][:1]
    assert shape_problems(CPU, "base", "thread", m) == [
        "runs/pilot/base/thread/metrics.json: cross_rank lists ranks [0] for world 2"
    ]


def test_dropout_at_exactly_min_effect_is_no_effect() -> None:
    got = pilot_run("dropout", "single")
    got["grad_norm"] = [1.5] * 6  # rel 0.5 exactly, the loss unmoved
    assert not differs_effect(pilot_run("base", "single"), got, 0.5).ok
    assert differs_effect(pilot_run("base", "single"), got, 0.4999).ok


def differs_effect(ref: dict[str, Any], got: dict[str, Any], min_effect: float) -> Check:
    return pilot.differs(ref, got, min_effect, "base")[2]


def test_equivalent_hands_the_tier_and_both_names_to_each_check() -> None:
    ref, got = pilot_run("base", "single"), pilot_run("grad_accum", "single")
    lm = {"max_rel": 1e-3, "cpu": {**T["cpu"], "prefix_steps": 3}}
    checks, _ = pilot.equivalent(ref, got, lm, "NAME", "REF")
    assert [c.detail for c in checks] == [
        "6 steps consumed exactly the REF rows",
        "6 steps drew no masks (no dropout), like REF",
        "loss[0] rel 0, grad_norm[0] rel 0, val_loss@0 rel 0",
        "max rel 0 at step 0 over 3 of 6 steps and 1 evals",
        "final val 3.90000 vs REF 3.90000 (diff +0.00e+00, tolerance 0.01)",
    ]
    got["train_loss"][3] *= 1.01  # after the 3-step prefix: judged only where every step is
    assert pilot.equivalent(ref, got, lm, "NAME", "REF")[0][3].ok
    lm["cpu"]["prefix_steps"] = None
    assert pilot.equivalent(ref, got, lm, "NAME", "REF")[0][3].detail == (
        "first step over 0.001: step 3 (REF 3.7, NAME 3.737, rel 0.01); max rel 0.01 over 6 of 6 steps and 2 evals"
    )
    got["grad_norm"][0] = 2.0
    assert pilot.equivalent(ref, got, lm, "NAME", "REF")[0][2].detail.startswith(
        "step 0 differs beyond summation order (rel <= 1e-05): grad_norm[0] 2 vs REF 1;"
    )


def test_feature_checks_name_the_run_and_its_reference() -> None:
    base, got = pilot_run("base", "single"), pilot_run("grad_accum", "single")
    got["train_loss"][3] *= 1.01
    checks, _ = feature_checks("grad_accum", base, got, pilot.tiers(T, "grad_accum", "cpu"), T, "ga/single")
    assert checks[3].detail.startswith("first step over 0.001: step 3 (base 3.7, ga/single 3.737, rel 0.01)")
    checks, _ = feature_checks("dropout", base, pilot_run("dropout", "single"), {}, T, "d/single")
    assert checks[0].detail == "6 steps consumed exactly the base rows"


def test_launcher_checks_name_the_run_and_hand_it_the_cells_tier() -> None:
    runs = cells("base", "resume", "dropout")
    del runs["base", "thread"]["eval_mode_steps"]
    assert launcher_checks(eval_identity(CPU, "base"), "base", "thread", runs, T)[0][0] == Check(
        "train mode",
        False,
        "runs/pilot/base/thread/metrics.json: eval_mode_steps missing: xtrain's trainer records the steps it "
        "trained in eval mode; a run without them was written by an older trainer: rerun it",
    )
    runs["base", "thread"]["device"] = "cuda"  # no cuda tier: vs single fails, nothing measured
    checks, worst = launcher_checks(eval_identity(CPU, "base"), "base", "thread", runs, T)
    assert worst == 0.0 and not checks[1].ok
    runs["base", "thread"]["device"] = "cpu"
    runs["base", "proc"]["eval_mode_steps"] = [1, 2]
    assert launcher_checks(eval_identity(CPU, "base"), "base", "proc", runs, T)[0][0].detail == (
        "model in eval mode at training steps 1..2 on proc (dropout would be silently off: the seed's T21)"
    )
    runs["base", "thread"]["samples"]["count"][0] = 9  # samples differ: no measured rel
    checks, worst = launcher_checks(eval_identity(CPU, "base"), "base", "thread", runs, T)
    assert worst == 0.0 and checks[1] == Check(
        "vs single",
        False,
        "world 2 vs 1: samples: samples differ at 1 of 6 steps, first step 0: the ranks consumed 9 rows, single "
        "0: rows missing or duplicated (xtrain/core/data.py shard_rows, step_batch); observed: pilot/base/thread "
        "vs single: rows per step: 9 vs 0 at step 0 (the same config): each rank reads its share of the step's "
        "global batch: divide the gradient accumulation (or the batch) by the world size. Next: see "
        "docs/ddp-gate.md; compare runs/single/loss.csv with runs/pilot/base/thread/loss.csv",
    )
    del runs["dropout", "single"]
    checks, _ = launcher_checks(eval_identity(CPU, "dropout"), "dropout", "thread", runs, T)
    assert checks[1] == Check("vs single", False, "not judged: the cell's single-device run crashed")
    del runs["base", "proc"]
    checks, _ = launcher_checks(eval_identity(CPU, "dropout"), "dropout", "proc", runs, T)
    assert checks[-1] == Check(
        "vs base", False, "not judged: cell base's proc run crashed (pilot.base names it)"
    )
    runs["resume", "thread"]["eval"][0]["loss"] = 9.0
    assert launcher_checks(eval_identity(CPU, "resume"), "resume", "thread", runs, T)[0][
        -1
    ].detail.startswith("val loss 9.0 vs base 4.5")
    # the cell's own bounds (gates.pilot.cells): 1 % off single passes under dropout's max_rel 0.05 only
    runs = cells("base", "dropout")
    runs["dropout", "proc"]["train_loss"][3] *= 1.01
    t = {**T, "cells": {"dropout": {"cpu": {"max_rel": 0.05}}}}
    checks, worst = launcher_checks(eval_identity(CPU, "dropout"), "dropout", "proc", runs, t)
    assert checks[1].ok and worst == pytest.approx(0.01)
    assert not launcher_checks(eval_identity(CPU, "dropout"), "dropout", "proc", runs, T)[0][1].ok
    ga = cells("grad_accum")
    ga["grad_accum", "single"]["train_loss"][3] *= 1.01
    checks, _ = launcher_checks(eval_identity(CPU, "grad_accum"), "grad_accum", "single", {**runs, **ga}, T)
    assert checks[4].detail.startswith("first step over 0.001: step 3 (base 3.7, grad_accum/single 3.737")


def test_the_gate_needs_params_and_a_cell_with_every_run_crashed_measures_0(tmp_path: Path) -> None:
    a = tree_of(tmp_path, cells("base")).artifacts()
    a.params = None
    with pytest.raises(AssertionError, match=r"^the gates need the resolved params$"):
        read_pilot(a, {"pilot": T}, "base")
    crash = {"status": "failed", "rank": 0, "error": "x"}
    o = gate(tmp_path / "c", {("base", x): crash for x in WORLD}, "base")
    assert (o.status, o.measured) == ("fail", 0.0)
    assert "--cells base --launchers single thread proc reruns it" in o.message
    assert cell_unit("dropout").id == "pilot.dropout"
