"""The training gates read, then judge (issue #53 item 1): gates/reading/runs.py reads every file,
gates/judges/{ddp,training,consistency,pilot}.py judge the records it returns and open nothing.

Three kinds of test, all in-process:
- each judge on records built by hand, no tree at all: one test per kind of verdict it gives;
- each gate on a real torch-free tree, judged with every way of opening a file made to raise: the
  verdict is the one `Gate.run` gives (negative control: the old judge, which read, is caught);
- the readers: what they read, in which order, and what they leave unread (the report's artifacts).
"""

from __future__ import annotations

import builtins
import copy
import gc
import io
import json
import os
import pathlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import test_judge_consistency as tc
import test_judge_ddp_entry as td
import test_judge_pilot_entry as tp
import test_judge_training_entry as tt

from contracts import artifact_table
from gates.judges import consistency, ddp, pilot, training
from gates.judges.outcome import Outcome
from gates.reading import runs
from gates.reading.artifacts import ArtifactError, StageNotRun
from gates.reading.runs import (
    Checked,
    ConsistencyRecords,
    FiniteRecords,
    PilotRecords,
    Run,
    RunFiles,
    Runs,
)
from judge_trees import Tree

# ---- the judges on records built by hand --------------------------------------------------------------

CONSISTENT = tc.metrics()


def files(m: dict | None = None, **changes: Any) -> RunFiles:
    """runs/single's files as the reader returns them when they agree with `m`."""
    m = m or CONSISTENT
    agree = {
        "name": "single",
        "metrics": m,
        "problems": (),
        "summary": consistency.summary_of(m),
        "texts": consistency.csv_texts(m),
        "latest": runs.final_checkpoint(m),
        "digest": m["param_digest"],
    }
    return RunFiles(**{**agree, **changes})


def test_consistency_judges_files_read_by_hand() -> None:
    o = consistency.consistency(ConsistencyRecords((files(),)))
    assert (o.status, o.measured, o.message) == (
        "pass",
        0,
        "runs single: summary, csv and final checkpoint agree",
    )
    o = consistency.consistency(ConsistencyRecords((), {"single": "stage train_single has not run"}))
    assert (o.status, o.measured, o.message) == ("skip", None, "no training stage has run")
    bad = files(
        problems=("own config",),
        summary={**consistency.summary_of(CONSISTENT), "world": 2},
        texts={"loss.csv": "x", "eval.csv": consistency.csv_texts(CONSISTENT)["eval.csv"]},
        latest="step_000001",
        digest="0" * 64,
    )
    o = consistency.consistency(ConsistencyRecords((bad,)))
    assert (o.status, o.measured, o.threshold) == ("fail", 5, consistency.THRESHOLD)
    problems = consistency.run_problems(bad)
    assert problems[0] == "own config" and problems[1].startswith("runs/single/summary.json is not what")
    assert problems[2:] == [
        "runs/single/loss.csv differs from metrics.json's values",
        "runs/single/checkpoints/latest is 'step_000001', metrics.json ends at step_000003",
        f"runs/single/checkpoints/step_000003/model.safetensors digests to {'0' * 16}..., metrics.json "
        f"param_digest is {CONSISTENT['param_digest'][:16]}...",
    ]
    assert consistency.run_problems(files(digest=None)) == [
        "metrics.json ends at step_000003, but runs/single/checkpoints/step_000003/model.safetensors does not exist"
    ]
    proc = files(tc.metrics("proc", 2), name="proc", texts={"loss.csv": "x", "eval.csv": "y"})
    o = consistency.consistency(ConsistencyRecords((files(), proc)))
    assert o.measured == 2 and o.message.startswith("runs/proc/loss.csv differs")


def test_the_consistency_picture_is_drawn_from_the_records() -> None:
    html = consistency.consistency_picture(ConsistencyRecords((files(latest="x"),)), {}).html
    assert "<tr class='bad'><td>runs/single/checkpoints/latest</td><td>DIFFERS</td></tr>" in html
    assert html.count("class='ok'") == 4


def test_finite_judges_what_was_read() -> None:
    nan = Checked(
        "single", "runs/single/metrics.json: lr[0] = nan", ("never said: the numbers were refused",)
    )
    o = training.finite(FiniteRecords((nan, Checked("proc", None, ("proc short",))), {"thread": "not run"}))
    assert (o.status, o.measured) == ("fail", 2)
    assert o.message.startswith("runs/single/metrics.json: lr[0] = nan; proc short. Next:")
    o = training.finite(FiniteRecords((Checked("thread", None),), {}, describes_runs=True))
    assert (o.status, o.message) == (
        "pass",
        "every number is finite in runs thread, shaped as params.yaml says",
    )
    assert training.finite(FiniteRecords((), {"single": "x"})).status == "skip"


def test_loss_match_takes_single_first_and_names_the_records_run() -> None:
    s = td.record()
    o = ddp.loss_match(Runs((Run("single", s), Run("proc", td.record("proc", 2)))), td.LOSS_MATCH)
    assert o.status == "pass" and o.message.startswith("world 2 vs 1:")
    d = td.record("proc", 2)
    d["samples"]["hash_sum"][1] += 1
    o = ddp.loss_match(Runs((Run("single", s), Run("proc", d))), td.LOSS_MATCH)
    assert o.status == "fail" and "compare runs/single/loss.csv with runs/proc/loss.csv" in o.message


def test_cross_rank_names_the_records_run() -> None:
    m = tt.ranks(td.record("proc", 2), (0.0, 1.0), (2e-6, 1.0))
    o = training.cross_rank(Runs((Run("proc", m),)), 1e-6)
    assert (o.status, o.measured) == ("fail", 2e-6) and o.message.startswith("rank 1 differs from rank 0")
    o = training.cross_rank(Runs((Run("single", td.record()),), describes_runs=True), 1e-6)
    assert (o.status, o.message) == (
        "skip",
        "runs/single ran with world 1 (as params.yaml says): no other rank to compare",
    )


def cell(**changes: Any) -> PilotRecords:
    """pilot.base on the cpu profile, every run read and clean."""
    recorded = {("base", x): {"status": "ok"} for x in tp.WORLD}
    base = {
        "cell": "base",
        "profile": "cpu",
        "in_profile": True,
        "runs_on": ("cpu", "gpu"),
        "launchers": tuple(tp.WORLD),
        "recorded": recorded,
        "runs": {k: tp.pilot_run(*k) for k in recorded},
    }
    return PilotRecords(**{**base, **changes})


def test_a_pilot_cell_is_judged_from_its_records() -> None:
    o = pilot.cell_gate(cell(), tp.T)
    assert (o.status, o.threshold) == ("pass", tp.THRESHOLD) and o.message.startswith("cell base (")
    o = pilot.cell_gate(cell(), None)
    assert (o.status, o.message) == (
        "fail",
        "params.yaml gates.pilot: missing: no thresholds for the pilot gates",
    )
    o = pilot.cell_gate(cell(in_profile=False, profile="cpu"), tp.T)
    assert o.status == "skip" and "is not in params.yaml pilot.cells.cpu" in o.message
    o = pilot.cell_gate(cell(launchers=("thread", "proc")), tp.T)
    assert (o.status, o.message) == (
        "fail",
        "params.yaml pilot.launchers: single is missing: every cell is judged against it",
    )
    o = pilot.cell_gate(cell(problems=("a run is short",)), tp.T)
    assert (o.status, o.message) == ("fail", "a run is short. Refusing to judge: rerun dvc repro pilot")
    unrecorded = cell(recorded={**cell().recorded, ("base", "proc"): None})
    assert pilot.cell_gate(unrecorded, tp.T).message.startswith(
        "runs/pilot/pilot.json: runs.base.proc: not recorded. Refusing"
    )
    crash = {"status": "failed", "rank": 1, "error": "boom"}
    crashed = cell(recorded={**cell().recorded, ("base", "proc"): crash})
    crashed = cell(recorded=crashed.recorded, runs={k: v for k, v in crashed.runs.items() if k[1] != "proc"})
    o = pilot.cell_gate(crashed, tp.T)
    assert o.status == "fail" and "proc: crashed: rank 1: boom" in o.message


def test_eval_identity_is_the_records_word() -> None:
    recorded = {(c, x): {"status": "ok"} for c in ("base", "resume") for x in tp.WORLD}
    read = {k: tp.pilot_run(*k) for k in recorded}
    read["resume", "thread"]["eval"][0]["loss"] += 1e-6  # step 0's val loss moved
    same = cell(cell="resume", recorded=recorded, runs=read, eval_identity=True)
    o = pilot.cell_gate(same, tp.T)
    assert o.status == "fail" and "vs base: eval at step 0: val loss" in o.message
    o = pilot.cell_gate(cell(cell="resume", recorded=recorded, runs=read, eval_identity=False), tp.T)
    assert "eval at step 0" not in o.message


# ---- no file is opened while judging ------------------------------------------------------------------


class Opened(AssertionError):
    pass


@contextmanager
def no_files() -> Iterator[None]:
    """Every way the gates open or look at a file raises, inside the block (the records read before it)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise Opened(f"a file was touched while judging: {args[:2]}")

    gc.collect()  # finalizers of earlier tests' temporary files run now, not inside the block
    with pytest.MonkeyPatch.context() as mp:
        for module in (builtins, io):
            mp.setattr(module, "open", refuse)
        for name in ("stat", "scandir", "listdir"):
            mp.setattr(os, name, refuse)
        for name in ("open", "read_text", "read_bytes", "exists", "is_file", "is_dir", "iterdir", "stat"):
            mp.setattr(pathlib.Path, name, refuse)
        mp.setattr(runs, "load_file", refuse)
        yield


def judged_without_files(gate: Any, a: Any, t: dict) -> Outcome:
    """The gate's verdict from records read first, then judged with every file access raising."""
    want = gate.run(a.for_gate(), t)
    records = gate.read(a.for_gate(), t)
    with no_files():
        got = gate.judge(records, t)
    assert got == want
    return got


def test_the_ddp_gates_judge_without_a_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    tree = Tree(tmp_path, params=None)
    proc = td.record("proc", 2)
    proc["train_loss"][1] *= 1.02
    td.write(tree, single=td.record(), thread=td.record("thread", 2), proc=proc)
    a, t = tree.artifacts(), {**td.THRESHOLDS, "cross_rank": {"max_abs": 1e-6}}
    gates = [ddp.loss_match_gate("thread"), ddp.loss_match_gate("proc"), ddp.LAUNCHER_PARITY]
    gates += [training.cross_rank_gate("thread"), training.FINITE]
    got = [judged_without_files(g, a, t).status for g in gates]
    assert got == ["pass", "fail", "fail", "pass", "pass"]


def test_consistency_and_pilot_judge_without_a_file(tmp_path: Path, monkeypatch) -> None:
    a = tp.tree_of(tmp_path / "p", tp.cells("base", "dropout")).artifacts()
    assert judged_without_files(pilot.cell_unit("dropout"), a, {"pilot": tp.T}).status == "pass"
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    tree = Tree(tmp_path / "c")
    tc.write_run(tree, "single", tc.metrics())
    (tree.root / "runs/single/eval.csv").write_text("x")
    assert judged_without_files(consistency.GATE, tree.artifacts(), {}).status == "fail"


def test_a_judge_that_reads_is_caught(tmp_path: Path, monkeypatch) -> None:
    """Negative control: the old loss_match read the runs itself; under the patch that raises."""
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    tree = Tree(tmp_path, params=None)
    td.write(tree, single=td.record(), thread=td.record("thread", 2))
    a = tree.artifacts()
    reading = ddp.loss_match_gate("thread")
    old = type(reading)(
        **{
            **reading.__dict__,
            "judge": lambda r, t: ddp.loss_match(runs.read_loss_match(a, "thread"), t["loss_match"]),
        }
    )
    with pytest.raises(Opened), no_files():
        old.judge(None, td.THRESHOLDS)


# ---- the readers --------------------------------------------------------------------------------------


def test_the_pair_readers_read_the_reference_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    tree = Tree(tmp_path, params=None)
    edited = td.record("proc", 2, config_hash="0" * 16)
    td.write(tree, single=td.record(), thread=td.record("thread", 2), proc=edited)
    a = tree.artifacts()
    r = runs.read_loss_match(a, "proc")
    assert [x.name for x in r.runs] == ["single", "proc"] and list(a.read) == [
        "runs/single/metrics.json",
        "runs/proc/metrics.json",
    ]
    assert r.runs[0].problems == () and r.runs[1].problems[0].startswith(
        "runs/proc/metrics.json: config_hash:"
    )
    assert r.describes_runs is False and r["proc"].metrics == edited
    with pytest.raises(KeyError):
        r["thread"]
    a = tree.artifacts()
    assert [x.name for x in runs.read_launcher_parity(a).runs] == ["thread", "proc"]
    assert list(a.read) == ["runs/thread/metrics.json", "runs/proc/metrics.json"]
    with pytest.raises(StageNotRun):
        runs.read_cross_rank(Tree(tmp_path / "none").artifacts(), "thread")


def test_finite_and_consistency_record_what_has_not_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    tree = Tree(tmp_path, params=None)
    tc.write_run(tree, "proc", tc.metrics("proc", 2))
    r = runs.read_finite(tree.artifacts())
    assert [c.name for c in r.checked] == ["proc"] and set(r.not_run) == {"single", "thread"}
    assert r.not_run["single"] == "stage train_single has not run (dvc repro train_single)"
    c = runs.read_consistency(tree.artifacts())
    assert [f.name for f in c.runs] == ["proc"] and c.not_run == r.not_run
    assert c.runs[0].latest == "step_000003" and c.runs[0].digest == CONSISTENT["param_digest"]
    assert set(runs.read_finite_picture(tree.artifacts())) == {"proc"}
    (tree.root / "runs/proc/checkpoints/step_000003/model.safetensors").unlink()
    assert runs.read_run_files(tree.artifacts(), "proc").digest is None
    (tree.root / "runs/proc/loss.csv").unlink()
    with pytest.raises(ArtifactError, match=r"runs/proc/loss\.csv: missing"):
        runs.read_consistency(tree.artifacts())


def test_a_pilot_cell_reads_nothing_it_does_not_judge(tmp_path: Path) -> None:
    tree = tp.tree_of(tmp_path, tp.cells("base", "dropout"))
    for t in ({}, {"pilot": None}):
        a = tree.artifacts()
        r = runs.read_pilot(a, t, "dropout")
        assert (r.in_profile, r.recorded, r.runs, a.read) == (True, {}, {}, {})
    no_single = copy.deepcopy(tp.CPU)
    no_single["pilot"]["launchers"] = ["thread", "proc"]
    a = tp.tree_of(tmp_path / "n", tp.cells("base"), no_single).artifacts()
    r = runs.read_pilot(a, {"pilot": tp.T}, "base")
    assert (r.in_profile, r.launchers, r.recorded, a.read) == (True, ("thread", "proc"), {}, {})
    a = tree.artifacts()
    r = runs.read_pilot(a, {"pilot": tp.T}, "fused_adamw")  # a gpu cell
    assert (r.in_profile, r.runs_on, r.launchers, a.read) == (False, ("gpu",), (), {})
    a = tree.artifacts()
    r = runs.read_pilot(a, {"pilot": tp.T}, "dropout")
    assert next(iter(a.read)) == "runs/pilot/pilot.json" and len(r.runs) == 6 and r.problems == ()
    assert r.launchers == ("single", "thread", "proc") and r.eval_identity is True
    assert (r.cell, r.profile, r.runs_on) == ("dropout", "cpu", ("cpu", "gpu"))
    assert r.recorded["dropout", "proc"] == {"status": "ok"}


def test_finite_names_the_run_whose_number_is_not_finite(tmp_path: Path) -> None:
    m = tt.record(world=1, launcher="single")
    text = json.dumps(tt.full(m)).replace('"lr": [0.1', '"lr": [NaN')
    r = runs.read_finite(
        tt.tree_of(tmp_path, {"single": m, "proc": tt.record(launcher="proc")}, raw=text).artifacts()
    )
    assert [(c.name, c.non_finite) for c in r.checked] == [
        ("single", "runs/single/metrics.json: lr[0] = nan"),
        ("proc", None),
    ]


def test_the_pilot_gate_draws_from_the_pictures_reading(tmp_path: Path, drawn) -> None:
    crash = {"status": "failed", "rank": 0, "error": "x"}
    a = tp.tree_of(tmp_path, {**tp.cells("base", "dropout"), ("dropout", "thread"): crash}).artifacts()
    pilot.cell_unit("dropout").draw(a, {"pilot": tp.T})
    assert "runs/pilot/base/thread/metrics.json" not in a.read  # the gate's reading would read it
    assert "runs/pilot/base/proc/metrics.json" in a.read


def test_the_pilot_picture_reads_only_the_pairs_it_draws(tmp_path: Path) -> None:
    crash = {"status": "failed", "rank": 0, "error": "x"}
    tree = tp.tree_of(tmp_path, {**tp.cells("base", "dropout"), ("dropout", "thread"): crash})
    a = tree.artifacts()
    r = runs.read_pilot_picture(a, "dropout")
    assert sorted(r.runs) == [
        ("base", "proc"),
        ("base", "single"),
        ("dropout", "proc"),
        ("dropout", "single"),
    ]
    assert r.recorded["dropout", "thread"] == crash and r.problems == ()
    assert (r.cell, r.profile, r.runs_on, r.in_profile) == ("dropout", "cpu", ("cpu", "gpu"), True)
    tree = tp.tree_of(tmp_path / "b", {**tp.cells("base"), ("base", "single"): crash})
    a = tree.artifacts()
    r = runs.read_pilot_picture(a, "base")  # base against its own single run, which crashed: nothing drawn
    assert r.runs == {} and list(a.read) == ["runs/pilot/pilot.json"]
