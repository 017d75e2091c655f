"""The verdict itself under mutation (docs/judge-mutation.md): gates/__main__.py run_gate and gates/reporting/report.py.

How a gate's exceptions become statuses (a stage not run: skip; a NaN: fail; a bad artifact: error),
which gates a project without their stages skips, the exit code from the statuses (error 2 beats fail 1,
which beats inconclusive 3, which beats pass 0; every gate skipped is 2), and the report and table built
from them.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from contracts.validate import ValidationError
from gates.__main__ import run_env_id, run_gate
from gates.judges.gate import Gate
from gates.judges.outcome import Outcome, failed, passed
from gates.reading.artifacts import ArtifactError, Artifacts, NonFinite, StageNotRun
from gates.reading.dvclock import DvcLock
from gates.reporting import report


def gate(run, gid: str = "finite") -> Gate:
    """A test double: `run` judges the gate's own view, which its reader hands over as is."""
    return Gate(
        gid, "checks", lambda t: "THRESHOLD", run, "why", "investigate", (), lambda a, t: None, lambda a, t: a
    )


def artifacts(tmp_path: Path, stages: dict | None = None) -> Artifacts:
    return Artifacts(
        tmp_path, DvcLock(tmp_path, {"train_single": {}} if stages is None else stages, set(), {})
    )


def raising(e: Exception):
    def run(a, t):
        raise e

    return run


def test_a_gates_outcome_gets_its_threshold_and_what_it_read(tmp_path: Path) -> None:
    a = artifacts(tmp_path)

    def run(view, t):
        assert view is not a and view.read == {} and t == {"x": 1}
        view.read["runs/single/metrics.json"] = {"md5": "m", "matches_dvc_lock": True}
        return passed(0, None, "fine")

    o = run_gate(gate(run), a, {"x": 1})
    assert (o.status, o.threshold, o.message) == ("pass", "THRESHOLD", "fine")
    assert (
        o.artifacts == {"runs/single/metrics.json": {"md5": "m", "matches_dvc_lock": True}} and a.read == {}
    )
    assert run_gate(gate(lambda v, t: failed(1, 0.5, "m")), a, {}).threshold == 0.5


@pytest.mark.parametrize(
    ("error", "status", "measured", "message"),
    [
        (StageNotRun("stage x has not run"), "skip", None, "stage x has not run"),
        (
            NonFinite("runs/a: loss[2] = nan"),
            "fail",
            "non-finite",
            "runs/a: loss[2] = nan: non-finite values fail",
        ),
        (ArtifactError("runs/a: missing"), "error", None, "runs/a: missing"),
        (ValidationError("f.json", "k", "bad"), "error", None, "f.json: k: bad"),
    ],
)
def test_each_reading_exception_is_its_status(
    tmp_path: Path, error: Exception, status: str, measured, message: str
) -> None:
    o = run_gate(gate(raising(error)), artifacts(tmp_path), {})
    assert (o.status, o.measured, o.threshold, o.message) == (status, measured, "THRESHOLD", message)


def test_any_other_exception_is_a_bug_and_propagates(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        run_gate(gate(raising(KeyError("x"))), artifacts(tmp_path), {})


def test_a_gate_whose_stages_the_project_lacks_is_skipped_unrun(tmp_path: Path) -> None:
    from gates.campaigns.bisect import stages_for

    called = []
    g = gate(lambda a, t: called.append(1), gid="closed_loop")
    o = run_gate(g, artifacts(tmp_path, {}), {})
    stages = stages_for("closed_loop")
    assert called == [] and (o.status, o.measured, o.threshold) == ("skip", None, "THRESHOLD")
    one = len(stages) == 1
    assert o.message == (
        f"{'stage' if one else 'stages'} {', '.join(stages)} {'has' if one else 'have'} not run: not in this "
        "project's pipeline (dvc.yaml, dvc.lock), nothing to judge"
    )
    o = run_gate(gate(lambda a, t: called.append(1), gid="scaling"), artifacts(tmp_path, {}), {})
    assert o.message.startswith("stage scaling has not run: not in this project's pipeline")
    o = run_gate(
        gate(lambda a, t: called.append(1) or passed(1, 1, "ran"), gid="scaling"),
        artifacts(tmp_path, {"scaling": {}}),
        {},
    )
    assert called == [1] and o.status == "pass"  # the pipeline has the stage: the gate judges


def test_run_env_id_reads_runs_single_or_says_none(tmp_path: Path, monkeypatch) -> None:
    assert run_env_id(artifacts(tmp_path, {})) is None  # not run
    assert run_env_id(artifacts(tmp_path)) is None  # ran, but missing: an error
    from contracts import artifact_table

    (tmp_path / "runs" / "single").mkdir(parents=True)
    (tmp_path / "runs" / "single" / "metrics.json").write_text(
        '{"launcher": "single", "env": {"env_id": "e1"}}'
    )
    monkeypatch.setattr(
        artifact_table,
        "read",
        lambda kind, path: {"launcher": "single", "env": {"env_id": "e1"}, "x": float("nan")},
    )
    assert run_env_id(artifacts(tmp_path)) == "e1"  # non-finite numbers do not hide the environment


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        ((), 2), (("pass",), 0), (("pass", "skip"), 0), (("skip",), 2), (("pass", "fail"), 1),
        (("inconclusive", "pass"), 3), (("fail", "inconclusive"), 1), (("error", "pass"), 2),
        (("fail", "error"), 2), (("error", "inconclusive", "skip"), 2),
    ],
)  # fmt: skip
def test_the_exit_code_is_the_worst_status(statuses: tuple, code: int) -> None:
    assert report.exit_code({str(i): Outcome(s) for i, s in enumerate(statuses)}) == code


OUTCOMES = {
    "seals": passed(3, "every file", "3 files"),
    "finite": Outcome("fail", 2, 0, "runs/single: loss[2] = nan", {"runs/single/metrics.json": {"md5": "m", "matches_dvc_lock": True}}),
    "scaling": Outcome("skip", None, None, "stage scaling has not run"),
    "perf.memory": Outcome("inconclusive", "thread +5.0%", None, "noisy"),
}  # fmt: skip


def test_the_report_holds_every_outcome_and_the_summary(tmp_path: Path) -> None:
    rep = report.build(OUTCOMES, tmp_path, "params.yaml", "cpu-e1")
    assert rep["format"] == "xtrain-gates-report/2" and rep["exit_code"] == 1
    assert (rep["verdict"], rep["strict"]) == ("fail", False)
    assert rep["summary"] == {"pass": 1, "fail": 1, "inconclusive": 1, "skip": 1, "error": 0}
    assert rep["thresholds_source"] == "params.yaml" and rep["environment"]["training_env_id"] == "cpu-e1"
    assert rep["git_revision"] is None  # not a git repository
    assert rep["gates"][1] == {
        "id": "finite",
        "status": "fail",
        "measured": 2,
        "threshold": 0,
        "message": "runs/single: loss[2] = nan",
        "artifacts": {"runs/single/metrics.json": {"md5": "m", "matches_dvc_lock": True}},
    }
    assert [g["id"] for g in rep["gates"]] == list(OUTCOMES)
    report.write(rep, tmp_path / "reports" / "gates.json")
    import json

    assert json.loads((tmp_path / "reports" / "gates.json").read_text()) == rep


def test_the_table_names_every_gate_and_the_non_passing_messages(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None, highlight=False)
    report.print_table(
        OUTCOMES, {"seals": "S", "finite": "F", "scaling": "SC", "perf.memory": "PM"}, Path("r.json"), console
    )
    text = out.getvalue()
    for line in (
        "FAIL finite: runs/single: loss[2] = nan",
        "SKIP scaling: stage scaling has not run",
        "INCONCLUSIVE perf.memory: noisy",
    ):
        assert line in text
    assert "PASS seals:" not in text and "runs/single" in text and "every file" in text and " SC " in text
    assert text.rstrip().endswith(
        "gate failure (1 pass, 1 fail, 1 inconclusive, 1 skip); report: r.json; exit 1"
    )
    out = io.StringIO()
    report.print_table(
        {"seals": OUTCOMES["seals"]}, {"seals": "S"}, None, Console(file=out, width=200, color_system=None)
    )
    assert out.getvalue().rstrip().endswith("all gates pass (1 pass); exit 0")
    out = io.StringIO()
    report.print_table(
        {"x": Outcome("error", None, None, "bad")},
        {"x": "X"},
        None,
        Console(file=out, width=200, color_system=None),
    )
    assert out.getvalue().rstrip().endswith("missing or invalid artifact (1 error); exit 2")
