"""The pilot gate's verdicts on the gate tree's pilot (tests/gate_tree.py: every CPU cell through
single, thread and torchrun, run once for the session). These tests start no ranks: they judge, so
they are in the `tree` group, not the serial DDP chain (tests/process/test_pilot_gate.py runs the stage).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gate_tree import copy_tree, seal
from gates.reading.artifacts import ArtifactError
from params.config import load_params, set_in_file
from params.pilot_cells import cells_for
from pilot_cases import index, verdict

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]


@pytest.fixture()
def correct(gate_tree: Path, tmp_path: Path) -> Path:
    """The gate tree's pilot (tests/gate_tree.py): every CPU cell on single, thread and torchrun."""
    return copy_tree(gate_tree, tmp_path / "tree")


def test_correct_code_passes_every_cpu_cell_on_every_launcher(correct: Path) -> None:
    cells = cells_for(load_params(correct / "params.yaml"))
    assert cells == ["base", "dropout", "grad_accum", "recompute", "resume", "all"]
    for cell in cells:
        o = verdict(correct, cell)
        assert o.status == "pass", (cell, o.message)
        assert all(f"{x}: " in o.message for x in ("single", "thread", "proc")), o.message
        assert "train mode" in o.message, o.message
        # the step-0 eval identity is judged where it holds (params/pilot_cells.py eval_identity)
        assert (o.message.count("eval at step 0") == 3) == (cell != "base"), o.message
    record = index(correct)
    assert record["proc_restarts"] == 0
    assert all(r == {"status": "ok"} for c in cells for r in record["runs"][c].values()), record["runs"]
    assert not list((correct / "runs" / "pilot").glob("*/*/checkpoints")), "checkpoints are not artifacts"
    resumed = json.loads((correct / "runs" / "pilot" / "resume" / "proc" / "metrics.json").read_text())
    assert resumed["resumed_from_step"] == 3


def test_a_cell_the_profile_does_not_run_is_a_skip_with_the_reason(correct: Path) -> None:
    for cell in ("compile", "bf16"):
        o = verdict(correct, cell)
        assert o.status == "skip" and "pilot.cells.cpu" in o.message, o.message


def test_runs_of_other_params_are_refused(correct: Path, tmp_path: Path) -> None:
    root = shutil.copytree(correct, tmp_path / "other")
    set_in_file(root / "params.yaml", ["pilot.steps=5"])
    o = verdict(root, "grad_accum")
    assert o.status == "fail" and "Refusing" in o.message, o.message


def test_a_run_recorded_ok_must_have_its_metrics(correct: Path) -> None:
    """Never trusted on the record's word: a run the index calls ok but whose metrics.json is gone is
    an error naming the file, not a pass."""
    (correct / "runs" / "pilot" / "grad_accum" / "thread" / "metrics.json").unlink()
    seal(correct)
    with pytest.raises(ArtifactError, match=r"runs/pilot/grad_accum/thread/metrics\.json: missing"):
        verdict(correct, "grad_accum")


def test_a_recorded_crash_fails_its_cell_and_the_cells_judged_against_it(correct: Path) -> None:
    path = correct / "runs" / "pilot" / "pilot.json"
    record = json.loads(path.read_text())
    record["runs"]["base"]["thread"] = {"status": "failed", "rank": 1, "error": "RuntimeError: boom"}
    path.write_text(json.dumps(record))
    seal(correct)
    o = verdict(correct, "base")
    assert o.status == "fail" and "thread: crashed: rank 1: RuntimeError: boom" in o.message, o.message
    assert "judged and passing: single" in o.message and "proc (" in o.message, o.message
    assert "python -m pipeline.pilot --cells base --launchers thread" in o.message, o.message
    o = verdict(correct, "grad_accum")  # its thread run is fine, but nothing to compare it with
    assert o.status == "fail" and "thread: vs base: not judged: cell base's thread run crashed" in o.message
    assert "judged and passing: single" in o.message and "proc (" in o.message, o.message
    record["runs"]["grad_accum"].pop("proc")
    path.write_text(json.dumps(record))
    seal(correct)
    o = verdict(correct, "grad_accum")
    assert o.status == "fail" and "runs.grad_accum.proc: not recorded" in o.message, o.message
