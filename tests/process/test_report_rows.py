"""The verdict's rows for people (issue #34 item 5, gates/reporting/rows.py): fail, error, inconclusive, pass,
skip; gates not in this pipeline in one line; a family's shared threshold stated once; checks that
could not be applied named in the row and in the schema-validated JSON. The same rows in the
terminal table, the Markdown and the HTML page.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from gates.__main__ import main as gates_main
from gates.judges import catalogue
from gates.judges.outcome import Outcome
from gates.reporting import ci_report, html_report, report, rows

PILOT = "per launcher: DDP gate vs single (samples and dropout masks exact; cpu: step 0 rel <= 1e-05, max rel <= 0.001)"
ABSENT = ["train@thread"]
OUTCOMES = {
    "seals": Outcome("pass", 28, None, "28 files equal dvc.lock"),
    "loss_match.thread": Outcome("skip", None, "t", "not in this pipeline", not_in_pipeline=ABSENT),
    "loss_match.proc": Outcome(
        "pass",
        1e-7,
        "samples exact",
        "world 2 vs 1: ...; train mode: not applied: not recorded in runs/proc",
        not_applied={"train mode": "not recorded in runs/proc (runrecord did not see the model)"},
    ),
    "launcher_parity": Outcome("skip", None, "t", "not in this pipeline", not_in_pipeline=["train@thread"]),
    "finite": Outcome("error", None, "all finite", "runs/proc/metrics.json: world: invalid"),
    "perf.throughput": Outcome("inconclusive", 0.3, "spread", "rerun on a quiet machine"),
    "perf.memory": Outcome("skip", None, "growth", "no baseline for this environment"),
    "pilot.base": Outcome("pass", None, PILOT, "ok"),
    "pilot.dropout": Outcome(
        "fail", None, f"{PILOT}; vs base: masks drawn every step", "thread: masks differ"
    ),
    "pilot.bf16": Outcome("skip", None, f"{PILOT}; vs base: bitwise equal to the reference", "cuda only"),
}


def report_of(outcomes: dict[str, Outcome], root: Path) -> dict:
    return report.build(outcomes, root, "params.yaml", "cpu-test")  # schema-validated


def test_rows_are_ordered_fail_error_inconclusive_pass_skip(tmp_path: Path) -> None:
    view = rows.rows(report_of(OUTCOMES, tmp_path)["gates"])
    assert [g["id"] for g in view.shown] == [
        "pilot.dropout",
        "finite",
        "perf.throughput",
        "seals",
        "loss_match.proc",
        "pilot.base",
        "perf.memory",
        "pilot.bf16",
    ]
    assert [g["id"] for g in view.absent] == ["loss_match.thread", "launcher_parity"]
    assert view.absent_line() == (
        "not in this pipeline: 2 gates (stages train@thread: not in dvc.yaml or dvc.lock, nothing to judge)"
    )


def test_a_familys_shared_threshold_is_stated_once(tmp_path: Path) -> None:
    view = rows.rows(report_of(OUTCOMES, tmp_path)["gates"])
    assert view.legend == [("pilot.*", PILOT)]
    assert view.thresholds["pilot.base"] == "pilot.* (below)"
    assert view.thresholds["pilot.dropout"] == "pilot.* (below) + vs base: masks drawn every step"
    assert view.thresholds["perf.memory"] == "growth"  # short, different texts: left alone


def test_checks_not_applied_are_in_the_json_and_every_view(tmp_path: Path) -> None:
    rep = report_of(OUTCOMES, tmp_path)
    entry = next(g for g in rep["gates"] if g["id"] == "loss_match.proc")
    assert entry["not_applied"] == [
        {"check": "train mode", "why": "not recorded in runs/proc (runrecord did not see the model)"}
    ]
    assert "not_applied" not in next(g for g in rep["gates"] if g["id"] == "seals")  # only where set
    said = "not applied: train mode: not recorded in runs/proc"
    md = ci_report.markdown(rep)
    assert said in md and "not in this pipeline: 2 gates" in md and "Threshold of `pilot.*`" in md
    out = io.StringIO()
    report.print_table(OUTCOMES, {}, None, Console(file=out, width=400, color_system=None))
    text = out.getvalue()
    assert "PASS (1 not applied)" in text and f"PASS loss_match.proc: {said}" in text
    assert "not in this pipeline: 2 gates" in text and "loss_match.thread" not in text
    assert text.index("FAIL") < text.index("ERROR") < text.index("INCONCLUSIVE") < text.index("PASS")
    table = html_report._verdict_table(rows.rows(rep["gates"]))
    assert "(1 not applied)" in table and "not in this pipeline: 2 gates" in table
    assert table.index("pilot.dropout") < table.index("finite") < table.index("perf.throughput")
    assert table.index("perf.throughput") < table.index("seals") < table.index("perf.memory")


def test_a_bad_not_applied_entry_is_refused_by_the_schema(tmp_path: Path) -> None:
    from contracts import artifact_table
    from contracts.validate import ValidationError

    rep = report_of(OUTCOMES, tmp_path)
    rep["gates"][2]["not_applied"] = [{"check": "train mode"}]  # no why: a check passed over in silence
    with pytest.raises(ValidationError, match="why"):
        artifact_table.check("gates_report", rep, "gates report")


def test_every_gate_that_reads_a_stage_names_it() -> None:
    """Else a project without that stage gets a row naming a command it cannot run (export_gguf did)."""
    unnamed = [g.id for g in catalogue.GATES if g is not catalogue.SEALS and not catalogue.stages_read(g.id)]
    assert unnamed == []


def test_a_project_of_its_own_folds_the_gates_it_has_no_stages_for(tmp_path: Path) -> None:
    """The real check on a project whose dvc.yaml has only train_single and train@proc (no run yet):
    the gates of stages it has no part of are one line, not rows naming `dvc repro train@thread`."""
    (tmp_path / "params.yaml").write_text("{}\n")
    stage = {"cmd": "true", "outs": ["runs/single"]}
    dvc = {
        "stages": {
            "train_single": stage,
            "train": {"foreach": ["proc"], "do": {**stage, "outs": ["runs/${item}"]}},
        }
    }
    (tmp_path / "dvc.yaml").write_text(json.dumps(dvc))
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    code = gates_main(["--root", str(tmp_path), "check", "--markdown", "g.md"])
    md = (tmp_path / "g.md").read_text()
    n = len(catalogue.GATES)
    folded = int(md.split("not in this pipeline: ")[1].split(" gate")[0])
    assert code in (0, 1, 2) and folded >= n - 8, md
    assert "dvc repro train@thread" not in md and "dvc repro pilot" not in md and "dvc repro export" not in md


def test_a_family_of_different_bounds_is_left_alone(tmp_path: Path) -> None:
    """Two members that share no bound word for word (perf.throughput and perf.memory) keep their rows."""
    outcomes = {
        "perf.throughput": Outcome(
            "skip", None, "cpu: 95% CI slower than 50%: fail; cuda: 95% CI slower than 15%", ""
        ),
        "perf.memory": Outcome(
            "skip", None, "cpu: growth <= 20%; cuda: growth <= 5% of the blessed peak", ""
        ),
    }
    view = rows.rows(report_of(outcomes, tmp_path)["gates"])
    assert view.legend == [] and view.thresholds["perf.memory"] == outcomes["perf.memory"].threshold
