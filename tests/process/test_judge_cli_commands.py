"""gates/__main__.py's commands under mutation (docs/judge-mutation.md), in-process and torch-free.

`check` on a hand-built one-stage pipeline (dvc.yaml, dvc.lock, one out): the report it writes,
what it prints, its exit code, the output paths it refuses before any gate runs; `run_gate`'s
branches on fake gates; `list`, `explain` and `init` by their exact text; `main`'s dispatch and its
one-line errors. `bisect` and `mutate` run for hours: their entry points are replaced by recorders,
since what __main__ owns is the plumbing of the arguments into them.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import PARAMS
from contracts.errors import XtrainError
from contracts.fileio import md5_file
from contracts.validate import ValidationError
from gates import __main__ as cli
from gates import scaffold
from gates.judges import catalogue
from gates.judges.outcome import Outcome
from gates.reading.artifacts import ArtifactError, NonFinite, StageNotRun
from judge_trees import Tree
from params.project import load_judging

THRESHOLDS = {k: v for k, v in load_judging(PARAMS).thresholds.items() if k != "scope"}  # the fixture's
SEALS_THRESHOLD = catalogue.SEALS.threshold(THRESHOLDS)
N_GATES = len(catalogue.GATES)


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A project whose pipeline is one stage, `hello`, that ran and wrote out.txt: every gate but
    the seals has nothing to judge (skip), the seals pass."""
    params = yaml.safe_load(PARAMS.read_text())
    del params["gates"]["scope"]  # not our pipeline: it declares no scope (gates/reading/scope.py)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "dvc.yaml").write_text("stages:\n  hello:\n    cmd: echo hi\n    outs:\n      - out.txt\n")
    (tmp_path / "out.txt").write_text("hi\n")
    md5 = md5_file(tmp_path / "out.txt")
    (tmp_path / "dvc.lock").write_text(
        "schema: '2.0'\nstages:\n  hello:\n    cmd: echo hi\n    outs:\n"
        f"    - path: out.txt\n      hash: md5\n      md5: {md5}\n      size: 3\n"
    )
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- check -------------------------------------------------------------------------------------


def test_check_writes_the_report_and_prints_the_table(root: Path, capsys) -> None:
    code, out, err = run(capsys, "--root", str(root), "check")
    rep = json.loads((root / "reports" / "gates.json").read_text())
    assert code == 0 and rep["exit_code"] == 0
    assert rep["summary"] == {"error": 0, "fail": 0, "inconclusive": 0, "pass": 1, "skip": N_GATES - 1}
    assert rep["thresholds_source"] == "params.yaml"
    assert rep["environment"]["training_env_id"] is None  # runs/single is not in this pipeline
    seals = next(g for g in rep["gates"] if g["id"] == "seals")
    assert seals == {"artifacts": {}, "id": "seals", "measured": 1, "status": "pass",
                     "message": "1 files of 1 stages equal dvc.lock; scope not declared (gates.scope.stages): "
                     "judged the stages dvc.yaml defines", "threshold": SEALS_THRESHOLD}  # fmt: skip
    assert "seals" in out and f"report: {root / 'reports' / 'gates.json'}; exit 0" in out
    assert err.startswith(f"checked {N_GATES} gates in ") and err.endswith("s\n")


def test_check_json_prints_the_report_it_writes(root: Path, capsys) -> None:
    code, out, err = run(
        capsys, "--root", str(root), "check", "--json", "--only", "seals", "--report", "r.json"
    )
    assert code == 0 and err == ""
    assert json.loads(out) == json.loads((root / "r.json").read_text())
    assert [g["id"] for g in json.loads(out)["gates"]] == ["seals"]
    assert out == json.dumps(json.loads(out), indent=2) + "\n"


def test_check_exit_code_is_the_reports(root: Path, capsys) -> None:
    (root / "out.txt").write_text("edited\n")
    code, _, err = run(capsys, "--root", str(root), "check", "--only", "seals")
    rep = json.loads((root / "reports" / "gates.json").read_text())
    assert code == 2 == rep["exit_code"] and rep["summary"]["error"] == 1
    assert err.startswith("checked 1 gates in ")


def test_check_reads_params_under_root_or_absolute(root: Path, capsys) -> None:
    (root / "params.yaml").rename(root / "mine.yaml")
    assert run(capsys, "--root", str(root), "--params", "mine.yaml", "check", "--only", "seals")[0] == 0
    assert json.loads((root / "reports" / "gates.json").read_text())["thresholds_source"] == "mine.yaml"
    absolute = str(root / "mine.yaml")
    assert run(capsys, "--root", str(root), "--params", absolute, "check", "--only", "seals")[0] == 0
    assert json.loads((root / "reports" / "gates.json").read_text())["thresholds_source"] == absolute


def test_check_without_dvc_lock_leaves_no_earlier_verdict(root: Path, capsys) -> None:
    assert run(capsys, "--root", str(root), "check", "--only", "seals")[0] == 0
    (root / "dvc.lock").unlink()
    code, out, err = run(capsys, "--root", str(root), "check")
    assert code == 2 and out == "" and not (root / "reports" / "gates.json").exists()
    assert err.startswith(f"error: {root / 'dvc.lock'}: missing: ") and err.count("\n") == 1


def test_check_without_dvc_lock_and_no_earlier_report(root: Path, capsys) -> None:
    (root / "dvc.lock").unlink()
    code, out, err = run(capsys, "--root", str(root), "check")
    assert (code, out) == (2, "") and not (root / "reports").exists()
    assert err.startswith(f"error: {root / 'dvc.lock'}: missing: ")


@pytest.mark.parametrize(("flags", "code"), [([], 3), (["--strict"], 1)])
def test_check_inconclusive_is_exit_3_and_1_under_strict(
    root: Path, monkeypatch, capsys, flags, code
) -> None:
    """No gate failed, one could not judge: exit 3 and no "failure" anywhere; --strict: exit 1."""
    gate_judge = cli.judge_gate
    noisy = Outcome("inconclusive", "spread 52%", None, "too noisy to judge: rerun on a quiet machine")
    monkeypatch.setattr(
        cli, "judge_gate", lambda g, r, t: noisy if g.id == "scaling" else gate_judge(g, r, t)
    )
    got, out, _ = run(capsys, "--root", str(root), "check", *flags, "--junit", "j.xml", "--markdown", "m.md")
    rep = json.loads((root / "reports" / "gates.json").read_text())
    assert got == code == rep["exit_code"] and (rep["verdict"], rep["strict"]) == (
        "inconclusive",
        bool(flags),
    )
    last = out.splitlines()[-1]
    assert last.startswith("no gate failed, 1 inconclusive") and last.endswith(f"; exit {code}")
    assert "failure" not in out and "failure" not in (root / "m.md").read_text()
    assert ("<failure" in (root / "j.xml").read_text()) == bool(flags)


def test_check_seals_only_the_selected_gates_stages(root: Path, capsys) -> None:
    """--only scaling: the seals judge the scaling stage (absent here), not hello's edited out."""
    (root / "out.txt").write_text("edited\n")
    code, out, err = run(capsys, "--root", str(root), "check", "--only", "scaling", "--json")
    seals = json.loads(out)["gates"][0]
    assert (seals["status"], seals["message"]) == ("skip", "no stage in dvc.yaml or dvc.lock")
    assert code == 2 and json.loads(out)["verdict"] == "nothing judged"  # every gate skipped: an error
    assert err == (
        "error: nothing judged: 1 not in this pipeline (stages scaling); 1 skipped: no stage in dvc.yaml or "
        "dvc.lock; exit 2\n"
    )
    assert run(capsys, "--root", str(root), "check", "--only", "seals")[0] == 2  # all stages: hello's edit


def test_check_hands_the_gates_their_params_scope_and_the_report_its_env(
    root: Path, monkeypatch, capsys
) -> None:
    seen, gate_read = [], cli.read_gate
    monkeypatch.setattr(cli, "read_gate", lambda g, a, t: seen.append((g.id, a, t)) or gate_read(g, a, t))
    monkeypatch.setattr(cli, "run_env_id", lambda a: seen.append(("env", a, None)) or "e1")
    assert run(capsys, "--root", str(root), "check", "--only", "scaling", "perf.memory")[0] == 2  # all skip
    (_, a, t), *_ = seen
    assert [s[0] for s in seen] == ["seals", "scaling", "perf.memory", "env"] and t == THRESHOLDS
    assert all(s[1] is a for s in seen) and a.scope == [
        "scaling",
        "train@proc",
        "train@thread",
        "train_single",
    ]
    assert (a.root, a.params.thresholds, sorted(a.lock.stages)) == (root, THRESHOLDS, ["hello"])
    assert json.loads((root / "reports" / "gates.json").read_text())["environment"]["training_env_id"] == "e1"


def test_check_names_the_roots_git_revision(root: Path, capsys) -> None:
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout
    assert run(capsys, "--root", str(root), "check", "--only", "seals")[0] == 0
    assert json.loads((root / "reports" / "gates.json").read_text())["git_revision"] == head.strip()


def test_check_writes_junit_and_markdown_under_root(root: Path, capsys) -> None:
    code, _, _ = run(
        capsys, "--root", str(root), "check", "--only", "seals", "--junit", "j.xml", "--markdown", "m.md"
    )
    assert code == 0
    assert "<testcase" in (root / "j.xml").read_text() and "seals" in (root / "m.md").read_text()


class Clock:
    """gates.__main__'s time: each perf_counter() call is one second after the last (from 10:
    a duration computed as a sum instead of a difference shows)."""

    def __init__(self) -> None:
        self.now = 9.0

    def perf_counter(self) -> float:
        self.now += 1.0
        return self.now


PAGE = "<!DOCTYPE html>\n<html lang='en'>a page</html>\n"  # what the HTML kind recognises as its own


def test_check_writes_every_format_under_root(root: Path, monkeypatch, capsys) -> None:
    """--junit, --markdown, --html: each the renderer's text for this report (the page's renderer,
    matplotlib, is tests/pipeline/test_html_report.py's: replaced by a recorder), twice: over its own output."""
    from gates import reporting
    from gates.reporting import ci_report

    drawn = []
    page = types.SimpleNamespace(render=lambda *a: drawn.append(a) or PAGE)
    monkeypatch.setitem(sys.modules, "gates.reporting.html_report", page)
    monkeypatch.setattr(reporting, "html_report", page, raising=False)
    gate_judge = cli.judge_gate  # a bare-number threshold: the Markdown table shows the catalogue's label
    monkeypatch.setattr(cli, "judge_gate", lambda *a: dataclasses.replace(gate_judge(*a), threshold=0.5))
    labels = {g.id: g.threshold(THRESHOLDS) for g in catalogue.GATES}
    argv = ["--root", str(root), "check", "--only", "seals", "--junit", "j.xml", "--markdown", "m.md", "--html", "p.html"]  # fmt: skip
    for _ in range(2):
        monkeypatch.setattr(cli, "time", Clock())
        code, out, err = run(capsys, *argv)
        rep = json.loads((root / "reports" / "gates.json").read_text())
        assert code == 0 and err == "checked 1 gates in 5.00s\nwrote p.html in 1.00s\n"
        assert "every file equal to dvc.lock" in out and "0.5" not in out  # the table's label too
        seconds = {"seals": 2.0}  # reading 1 s + judging 1 s
        assert (root / "j.xml").read_text() == ci_report.junit_xml(rep, seconds)
        assert (root / "m.md").read_text() == ci_report.markdown(rep, labels) != ci_report.markdown(rep)
        assert (root / "p.html").read_text() == PAGE
    (r, where, thresholds, labelled, params), _ = drawn
    assert (r, where, thresholds, labelled, params.thresholds) == (rep, root, THRESHOLDS, labels, THRESHOLDS)


def test_check_writes_no_format_unasked(root: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli, "time", Clock())
    assert run(capsys, "--root", str(root), "check", "--only", "seals")[2] == "checked 1 gates in 5.00s\n"
    assert sorted(p.name for p in root.iterdir()) == [
        "dvc.lock",
        "dvc.yaml",
        "out.txt",
        "params.yaml",
        "reports",
    ]


@pytest.mark.parametrize("flag", ["report", "html", "junit", "markdown"])
def test_check_refuses_a_folder_as_an_output_before_any_gate(root: Path, flag: str, capsys) -> None:
    (root / "out").mkdir()
    code, out, err = run(capsys, "--root", str(root), "check", f"--{flag}", "out")
    assert code == 2 and out == "" and not (root / "reports").exists()
    assert err == (f"error: {root / 'out'}: --{flag}: is a folder: refusing to write a report file over it"
                   " (rule: a file path, e.g. reports/gates.html)\n")  # fmt: skip


@pytest.mark.parametrize("flag", ["report", "html", "junit", "markdown"])
def test_check_refuses_a_file_it_did_not_write(root: Path, flag: str, capsys) -> None:
    (root / "notes.txt").write_text("mine\n")
    code, out, err = run(capsys, "--root", str(root), "check", f"--{flag}", "notes.txt")
    assert code == 2 and out == "" and (root / "notes.txt").read_text() == "mine\n"
    assert err.startswith(f"error: {root / 'notes.txt'}") and not (root / "reports").exists()


def test_refuse_folder_outputs_passes_files_and_absent_paths(root: Path) -> None:
    (root / "f.json").write_text("{}")
    args = argparse.Namespace(report="f.json", html=None, junit="absent.xml", markdown="")
    assert cli.refuse_folder_outputs(args, root) is None


# --- run_gate ----------------------------------------------------------------------------------


def fake_gate(run: Any, gate_id: str = "seals", reader: Any = None) -> catalogue.Gate:
    """The seals gate with this id, `run` as its judge handed the gate's own view (a test double's reader:
    `reader`, or the view itself); its threshold text read from the thresholds given."""
    read = reader or (lambda view, t: view)
    return dataclasses.replace(
        catalogue.SEALS, id=gate_id, judge=run, read=read, threshold=lambda t: t["label"]
    )


GATE_THRESHOLDS = {"label": "T"}


def raising(exc: Exception) -> Any:
    def run(view, thresholds):
        raise exc

    return run


@pytest.mark.parametrize(
    "exc, status, measured, message",
    [
        (StageNotRun("stage x has not run"), "skip", None, "stage x has not run"),
        (NonFinite("a.json: loss = nan"), "fail", "non-finite", "a.json: loss = nan: non-finite values fail"),
        (ArtifactError("a.json: missing"), "error", None, "a.json: missing"),
        (ValidationError("a.json", "k", "bad"), "error", None, "a.json: k: bad"),
    ],
)
def test_run_gate_turns_each_reading_failure_into_its_status(
    tmp_path, exc, status, measured, message
) -> None:
    for gate in (fake_gate(raising(exc)), fake_gate(lambda r, t: Outcome("pass"), reader=raising(exc))):
        o = cli.run_gate(gate, Tree(tmp_path).artifacts(), GATE_THRESHOLDS)  # judging, then reading
        assert (o.status, o.measured, o.threshold, o.message) == (status, measured, "T", message)
        assert o.not_in_pipeline == [] and o.artifacts == {}


def test_run_gate_keeps_the_gates_outcome_and_what_it_read(tmp_path) -> None:
    seen = []

    def run(view, thresholds):
        seen.append(thresholds)
        view.read["a.json"] = {"md5": "m"}
        return Outcome("fail", 3.0, "own", "too big")

    art = Tree(tmp_path).artifacts()
    o = cli.run_gate(fake_gate(run), art, GATE_THRESHOLDS)
    assert (o.status, o.measured, o.threshold, o.message) == ("fail", 3.0, "own", "too big")
    assert o.artifacts == {"a.json": {"md5": "m"}} and art.read == {}  # the gate's own view
    assert seen == [GATE_THRESHOLDS]
    o = cli.run_gate(fake_gate(lambda v, t: Outcome("pass", 1.0)), art, GATE_THRESHOLDS)
    assert o.threshold == "T"  # none given: the gate's


@pytest.mark.parametrize(
    "gate_id, absent",
    [
        ("scaling", ["scaling"]),  # the one stage it reads
        ("finite", ["train_single", "train@thread", "train@proc"]),  # every stage it reads
        ("loss_match.thread", ["train@thread"]),  # the stage it needs (NEEDS)
        ("launcher_parity", ["train@thread", "train@proc"]),
    ],
)
def test_run_gate_skips_a_gate_whose_stages_the_pipeline_lacks(tmp_path, gate_id, absent) -> None:
    gate = fake_gate(raising(AssertionError("must not run")), gate_id)
    o = cli.run_gate(gate, Tree(tmp_path).artifacts(), GATE_THRESHOLDS)
    assert (o.status, o.measured, o.threshold) == ("skip", None, "T")
    said = f"stage {absent[0]} has" if len(absent) == 1 else f"stages {', '.join(absent)} have"
    assert (
        o.message == f"{said} not run: not in this project's pipeline (dvc.yaml, dvc.lock), nothing to judge"
    )
    assert o.not_in_pipeline == absent


def test_run_gate_runs_a_gate_whose_stage_is_in_the_pipeline(tmp_path) -> None:
    gate = fake_gate(lambda v, t: Outcome("pass", 1.0, None, "ok"), "scaling")
    o = cli.run_gate(gate, Tree(tmp_path, stages={"scaling": {}}).artifacts(), GATE_THRESHOLDS)
    assert (o.status, o.message, o.not_in_pipeline) == ("pass", "ok", [])


def test_run_env_id_reads_runs_single_even_non_finite(tmp_path, monkeypatch) -> None:
    from contracts import artifact_table

    metrics = tmp_path / "runs" / "single" / "metrics.json"
    assert cli.run_env_id(Tree(tmp_path).artifacts()) is None  # train_single has not run
    assert (
        cli.run_env_id(Tree(tmp_path, stages={"train_single": {}}).artifacts()) is None
    )  # ran, file missing
    metrics.parent.mkdir(parents=True)
    metrics.write_text("{}")
    read = []
    data = {"launcher": "single", "env": {"env_id": "e1"}, "loss": float("nan")}
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: read.append((kind, path)) or data)
    assert cli.run_env_id(Tree(tmp_path, stages={"train_single": {}}).artifacts()) == "e1"
    assert read == [(artifact_table.kind_of_schema("metrics.schema.json"), metrics)]
    monkeypatch.setattr(artifact_table, "read", raising_args(ValidationError(str(metrics), "env", "bad")))
    assert cli.run_env_id(Tree(tmp_path, stages={"train_single": {}}).artifacts()) is None


# --- list, explain, init, diff -----------------------------------------------------------------


def test_list_prints_every_gate_with_its_threshold_and_checks(capsys) -> None:
    """The thresholds as this config's runs are judged: the cpu prefix capped by train.steps (issue #52:
    `gates list` said "over 64 steps" of a 12-step run)."""
    from gates.reporting.threshold_docs import capped_for_run
    from params.project import load_judging

    capped = capped_for_run(load_judging(PARAMS))
    assert THRESHOLDS["loss_match"]["cpu"]["prefix_steps"] > capped["loss_match"]["cpu"]["prefix_steps"]
    width = max(len(g.id) for g in catalogue.GATES)
    expected = "".join(
        f"{g.id.ljust(width)}  {g.threshold(capped)}\n{' ' * width}  {g.checks}\n" for g in catalogue.GATES
    )
    assert run(capsys, "--root", str(PARAMS.parent), "list") == (0, expected, "")
    assert any(len(g.id) == width for g in catalogue.GATES) and "finite" in expected
    assert "cpu: step 0 rel <= 1e-05, max rel <= 0.001 over 12 steps" in expected


def test_list_of_a_project_file_prints_its_thresholds_as_given(tmp_path: Path, capsys) -> None:
    """A project's own params (no train:) has no steps to cap by: its thresholds as written."""
    (tmp_path / "params.yaml").write_text("gates:\n  scope: {stages: [train_single]}\n")
    code, out, _ = run(capsys, "--root", str(tmp_path), "list")
    assert code == 0 and "over 64 steps" in out


def test_list_and_explain_read_the_params_under_root(tmp_path, capsys) -> None:
    for argv in (["list"], ["explain", "seals"]):
        code, out, err = run(capsys, "--root", str(tmp_path), *argv)
        assert code == 2 and out == "" and str(tmp_path / "params.yaml") in err


def test_explain_prints_what_why_and_how(capsys) -> None:
    g = catalogue.get("perf.throughput")
    expected = (
        f"{g.id}\n\nchecks:      {g.checks}\nthreshold:   {g.threshold(THRESHOLDS)}\n"
        f"why:         {g.why}\ninvestigate: {g.investigate}\n"
    )
    assert run(capsys, "--root", str(PARAMS.parent), "explain", "perf.throughput") == (0, expected, "")


def test_explain_an_unknown_gate_is_one_line(capsys) -> None:
    code, out, err = run(capsys, "explain", "nope")
    assert code == 2 and out == ""
    assert err.startswith("error: unknown gate nope (known: seals, ") and err.count("\n") == 1


def test_init_prints_its_plan_then_writes_where_asked_and_says_what_next(monkeypatch, capsys) -> None:
    """scaffold.plan/apply (git init, dvc init: seconds) are tests/pipeline/test_scaffold.py's; here,
    what init_cmd passes and prints: the plan first, then what was done (nothing with --dry-run)."""
    seen, applied = [], []
    plan = scaffold.Plan(Path("p"), {"dvc.yaml": b""}, ["params.yaml"], True, False)
    monkeypatch.setattr(scaffold, "plan", lambda folder, train: seen.append((folder, train)) or plan)
    monkeypatch.setattr(scaffold, "apply", lambda p: applied.append(p) or ["wrote a", "git init"])
    planned = "plan: write p/dvc.yaml\nplan: keep p/params.yaml (already this content)\nplan: run git init -q (in p)\n"
    assert run(capsys, "init", "some/where") == (
        0,
        f"{planned}some/where: wrote a, git init; next: {scaffold.NEXT}\n",
        "",
    )
    assert run(capsys, "init", "--train", "python3 t.py") == (
        0,
        f"{planned}.: wrote a, git init; next: {scaffold.NEXT}\n",
        "",
    )
    assert seen == [(Path("some/where"), None), (Path("."), "python3 t.py")] and applied == [plan, plan]
    assert run(capsys, "init", "--dry-run", "--train", "python3 t.py") == (0, planned, "")
    assert applied == [plan, plan]  # the dry run applied nothing
    monkeypatch.setattr(scaffold, "apply", lambda p: [])
    assert run(capsys, "init") == (0, f"{planned}.: nothing done; next: {scaffold.NEXT}\n", "")


def test_diff_hands_both_reports_to_the_differ(monkeypatch, capsys) -> None:
    from gates.reporting import diff

    seen = []
    monkeypatch.setattr(diff, "run", lambda a, b: seen.append((a, b)) or 7)
    assert run(capsys, "diff", "a.json", "b.json")[0] == 7 and seen == [("a.json", "b.json")]


# --- main: dispatch and one-line errors ---------------------------------------------------------

COMMAND_FUNCTIONS = {"check": "check", "list": "list_gates", "explain": "explain", "diff": "diff",
                     "bisect": "bisect_cmd", "mutate": "mutate_cmd", "init": "init_cmd"}  # fmt: skip
MINIMAL = {"explain": ["seals"], "diff": ["a", "b"], "bisect": ["g", "b"]}


@pytest.mark.parametrize("cmd", COMMAND_FUNCTIONS)
def test_main_dispatches_each_command(cmd: str, monkeypatch, capsys) -> None:
    seen = []
    for name in COMMAND_FUNCTIONS.values():
        monkeypatch.setattr(cli, name, lambda args, name=name: seen.append((name, args.cmd)) or 5)
    assert run(capsys, cmd, *MINIMAL.get(cmd, []))[0] == 5
    assert seen == [(COMMAND_FUNCTIONS[cmd], cmd)]


@pytest.mark.parametrize(
    "exc, line",
    [
        (ValidationError("p.yaml", "gates", "bad"), "error: p.yaml: gates: bad\n"),
        (XtrainError("a known failure"), "error: a known failure\n"),
        (KeyError("unknown gate x"), "error: unknown gate x\n"),
    ],
)
def test_main_reports_known_failures_in_one_line(exc: Exception, line: str, monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli, "list_gates", raising_args(exc))
    assert run(capsys, "list") == (2, "", line)


def raising_args(exc: Exception) -> Any:
    def command(*args):
        raise exc

    return command


def test_main_lets_a_bug_through(monkeypatch) -> None:
    monkeypatch.setattr(cli, "list_gates", raising_args(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["list"])


# --- bisect and mutate: the arguments their entry points receive -------------------------------


@pytest.fixture()
def bisected(monkeypatch) -> list:
    from gates.campaigns import bisect

    seen = []
    monkeypatch.setattr(bisect, "bisect", lambda *a: seen.append(a) or 4)
    return seen


def test_bisect_defaults(tmp_path, bisected, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "bisect", "v1", "HEAD") == (4, "", "")
    here = tmp_path.resolve()
    assert bisected == [(here, here, here / "params.yaml", "v1", "HEAD", None, None)]


def test_bisect_passes_every_option(tmp_path, bisected, capsys) -> None:
    argv = [
        "--root",
        str(tmp_path),
        "--params",
        "p.yaml",
        "bisect",
        "a",
        "b",
        "--gate",
        "perf",
        "--cache",
        "c",
    ]
    assert run(capsys, *argv)[0] == 4
    assert bisected == [(tmp_path, tmp_path, tmp_path / "p.yaml", "a", "b", "perf", Path("c"))]


def test_bisect_error_is_one_line(monkeypatch, capsys) -> None:
    from gates.campaigns import bisect

    monkeypatch.setattr(bisect, "bisect", raising_args(bisect.BisectError("no commit between")))
    assert run(capsys, "bisect", "a", "b") == (2, "", "error: no commit between\n")


REPORT = {"mutants": [], "killed": 0, "total": 0, "equivalent": 0, "unexercised": ["m"], "holes": [],
          "control_failures": [], "score": 1.0, "score_strict": 1.0, "score_gates": 1.0, "stage_only": [],
          "wall_s": 1}  # fmt: skip


@dataclasses.dataclass
class Recorded:
    campaign: Any = None
    picked: list[str] = dataclasses.field(default_factory=list)
    jobs: int = 0
    calls: int = 0
    git_asked: list[Path] = dataclasses.field(default_factory=list)


@pytest.fixture()
def campaign(tmp_path, monkeypatch) -> Recorded:
    """mutate's campaign replaced by a recorder (a run is hours); its git dir is tmp_path/git."""
    from gates.campaigns import mutate

    seen = Recorded()

    def run_campaign(c, picked, jobs):
        seen.campaign, seen.picked, seen.jobs = c, [m.id for m in picked], jobs
        seen.calls += 1
        return REPORT

    monkeypatch.setattr(
        mutate, "git_common_dir", lambda root: seen.git_asked.append(root) or tmp_path / "git"
    )
    monkeypatch.setattr(mutate, "run_campaign", run_campaign)
    monkeypatch.setattr(cli_os(), "cpu_count", lambda: 8)
    return seen


def cli_os():
    import os

    return os


@functools.cache
def catalogue_ids(ci_only: bool = False) -> list[str]:
    from gates.campaigns import mutants

    return [m.id for m in mutants.load().mutants if m.ci or not ci_only]


@functools.cache
def catalogue_timeout() -> int:
    from gates.campaigns import mutants

    return mutants.load().timeout_s


def test_mutate_defaults(tmp_path, campaign, capsys) -> None:
    from gates.campaigns import mutants, mutate

    assert run(capsys, "--root", str(tmp_path), "mutate") == (0, mutate.table(REPORT) + "\n", "")
    c = campaign.campaign
    assert (c.root, c.work, c.profile, c.keep) == (
        tmp_path,
        tmp_path / "git/xtrain-mutate/default",
        "default",
        False,
    )
    assert c.cat.source == str(mutants.CATALOGUE) and c.cat.timeout_s == catalogue_timeout()
    assert campaign.picked == catalogue_ids() and campaign.jobs == 4 and campaign.git_asked == [tmp_path]


def test_mutate_passes_every_option(tmp_path, campaign, capsys, monkeypatch) -> None:
    from gates.campaigns import mutants

    monkeypatch.chdir(tmp_path)
    shutil.copy(mutants.CATALOGUE, tmp_path / "cat.yaml")
    first = catalogue_ids()[0]
    argv = ["mutate", "--only", first, "--jobs", "3", "--timeout", "7", "--profile", "tiny", "--json", "r.json",
            "--work", "w", "--catalogue", "cat.yaml", "--keep", "--strict"]  # fmt: skip
    code, out, _ = run(capsys, *argv)
    assert code == 1  # --strict: a mutant left the runs unchanged
    c = campaign.campaign
    assert (c.root, c.work, c.profile, c.keep) == (tmp_path, tmp_path / "w", "tiny", True)
    assert (c.cat.source, c.cat.timeout_s) == ("cat.yaml", 7)
    assert (campaign.picked, campaign.jobs) == ([first], 3)
    assert json.loads((tmp_path / "r.json").read_text()) == REPORT and out.endswith("s\n")


def test_mutate_subset(tmp_path, campaign, capsys) -> None:
    assert run(capsys, "--root", str(tmp_path), "mutate", "--subset", "ci")[0] == 0
    assert campaign.picked == catalogue_ids(ci_only=True) != catalogue_ids()


def test_mutate_skip_stage_leaves_out_the_stage_and_its_gates(tmp_path, campaign, capsys) -> None:
    from conftest import REPO
    from gates.campaigns import mutants, mutate

    argv = [
        "--root",
        str(REPO),
        "mutate",
        "--subset",
        "ci",
        "--work",
        str(tmp_path / "w"),
        "--skip-stage",
        "pilot",
    ]
    assert run(capsys, *argv)[0] == 0
    ci = mutants.load().select(None, "ci")
    assert campaign.campaign.cat == mutate.skipping(mutants.load(), ["pilot"], ci, REPO)
    assert "pilot" in campaign.campaign.cat.skip_stages
    assert run(capsys, *argv[:-2])[0] == 0 and campaign.campaign.cat == mutants.load()  # none asked: none


def test_mutate_skip_stage_refusals_are_one_line(tmp_path, campaign, capsys) -> None:
    from conftest import REPO

    argv = ["--root", str(REPO), "mutate", "--work", str(tmp_path / "w"), "--skip-stage"]
    code, out, err = run(capsys, *argv, "pilott")
    assert (code, out, err) == (2, "", f"error: --skip-stage pilott: not a stage of {REPO / 'dvc.yaml'}\n")
    code, _, err = run(capsys, *argv[:-1], "--only", "rank-reads-other-rank-row", "--skip-stage", "train")
    assert code == 2 and campaign.calls == 0
    assert (
        err
        == "error: mutant rank-reads-other-rank-row: every gate it expects (loss_match) reads a skipped stage\n"
    )


@pytest.mark.parametrize("cores, jobs", [(None, 1), (1, 1), (2, 1), (3, 1), (4, 2), (9, 4)])
def test_mutate_jobs_default_to_half_the_cores(tmp_path, campaign, capsys, monkeypatch, cores, jobs) -> None:
    monkeypatch.setattr(cli_os(), "cpu_count", lambda: cores)
    assert run(capsys, "--root", str(tmp_path), "mutate")[0] == 0 and campaign.jobs == jobs


@pytest.mark.parametrize("error", ["CampaignError", "AnchorError"])
def test_mutate_campaign_errors_are_one_line(tmp_path, campaign, capsys, monkeypatch, error) -> None:
    from gates.campaigns import mutants, mutate

    exc = getattr(mutate, error, None) or getattr(mutants, error)
    monkeypatch.setattr(mutate, "run_campaign", raising_args(exc("the anchor moved")))
    assert run(capsys, "--root", str(tmp_path), "mutate") == (2, "", "error: the anchor moved\n")


def test_mutate_outside_git_is_one_line(tmp_path, campaign, capsys, monkeypatch) -> None:
    from gates.campaigns import mutate

    monkeypatch.setattr(mutate, "git_common_dir", raising_args(mutate.CampaignError("not a git checkout")))
    assert run(capsys, "--root", str(tmp_path), "mutate") == (2, "", "error: not a git checkout\n")
    assert campaign.calls == 0


@pytest.mark.parametrize("flag", ["--json", "--work"])
def test_mutate_refuses_a_foreign_output_before_the_campaign(tmp_path, campaign, capsys, flag) -> None:
    target = tmp_path / "mine"
    if flag == "--work":
        target.mkdir()
        (target / "notes.txt").write_text("mine\n")
    else:
        target.write_text("mine\n")
    code, out, err = run(capsys, "--root", str(tmp_path), "mutate", flag, str(target))
    assert code == 2 and out == "" and err.startswith(f"error: {target}: refusing to write the mutation ")
    assert campaign.calls == 0


# --- a signal to bisect or mutate: one line naming the command, 128+signal (issue #51 item 4) ------


def signalled(*_args: object) -> int:
    """A campaign that gets SIGINT while it runs (its children, none here, end with it)."""
    import os
    import signal
    import time

    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)  # the handler raises before this ends
    return 0


SIGINT_LINE = (
    ": interrupted by SIGINT: 0 running processes ended, none left behind; what finished before is kept\n"
)


def test_a_signal_to_bisect_is_one_line_and_130(monkeypatch, capsys) -> None:
    from gates.campaigns import bisect

    monkeypatch.setattr(bisect, "bisect", signalled)
    assert run(capsys, "bisect", "a", "b") == (130, "", f"error: gates bisect{SIGINT_LINE}")


def test_a_signal_to_mutate_is_one_line_and_130(tmp_path, campaign, capsys, monkeypatch) -> None:
    from gates.campaigns import mutate

    monkeypatch.setattr(mutate, "run_campaign", signalled)
    assert run(capsys, "--root", str(tmp_path), "mutate") == (130, "", f"error: gates mutate{SIGINT_LINE}")
