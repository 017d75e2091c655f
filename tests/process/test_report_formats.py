"""The gates report as JUnit XML, Markdown, and `gates diff` between two reports.

Reports are built by the real report code (gates.report.build, schema-validated) from outcomes of
every status; the CLI tests run `python -m gates` on a real repository layout whose dvc.lock says no
stage ran (every gate skips). A second, independent reader (junitparser) parses the JUnit XML.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from junitparser import Error, Failure, JUnitXml, Skipped

from conftest import PARAMS
from gates.__main__ import main as gates_main
from gates.judges.outcome import Outcome
from gates.reporting import ci_report, report

MIXED = {
    "loss_match.thread": Outcome("pass", 1.8e-7, 1e-3, "max rel 1.8e-07 at step 131"),
    "launcher_parity": Outcome("fail", 0.007, 1e-3, "first step over 0.001: step 100 | rel 0.0011"),
    "perf.throughput": Outcome(
        "inconclusive", 0.31, "spread < 0.1", "window spread 31%: rerun on a quiet machine"
    ),
    "scaling": Outcome("skip", None, None, "stage scaling has not run (dvc repro scaling)"),
    "finite": Outcome("error", None, None, "runs/thread/metrics.json: world: 'two' is invalid"),
}


def build(outcomes: dict[str, Outcome], root: Path) -> dict:
    return report.build(outcomes, root, "params.yaml", "cpu-test")


def test_junit_has_one_testcase_per_gate_with_the_right_result(tmp_path: Path) -> None:
    rep = build(MIXED, tmp_path)
    xml = ci_report.junit_xml(rep, {gid: 0.01 for gid in MIXED})
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "5",
        "failures": "1",  # the fail; an inconclusive gate did not fail (exit 3, not 1)
        "errors": "1",
        "skipped": "2",  # the skip, and the inconclusive gate with its own message
    }
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == list(MIXED)
    assert cases["launcher_parity"].find("failure").get("message") == MIXED["launcher_parity"].message
    assert cases["launcher_parity"].find("failure").get("type") == "fail"
    assert cases["perf.throughput"].find("failure") is None
    assert (
        cases["perf.throughput"].find("skipped").get("message")
        == f"inconclusive: {MIXED['perf.throughput'].message}"
    )
    assert cases["finite"].find("error") is not None
    assert cases["scaling"].find("skipped").get("message").startswith("stage scaling has not run")
    assert [c.tag for c in cases["loss_match.thread"]] == ["system-out"]  # a pass has no result element
    assert all(c.get("time") == "0.010" for c in cases.values())


@pytest.mark.parametrize(
    ("strict", "inconclusive", "counts"), [(False, Skipped, (5, 1, 1, 2)), (True, Failure, (5, 2, 1, 1))]
)
def test_an_independent_reader_sees_the_same_results(
    tmp_path: Path, strict: bool, inconclusive: type, counts: tuple
) -> None:
    """An inconclusive gate is a skipped test with its message, a failure only under --strict (exit 1)."""
    rep = report.build(MIXED, tmp_path, "params.yaml", "cpu-test", strict)
    xml = JUnitXml.fromstring(
        ci_report.junit_xml(rep).encode()
    )  # bytes: lxml refuses a str with a declaration
    suite = next(iter(xml))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == counts
    kinds = {case.name: [type(r).__name__ for r in case.result] for case in suite}
    assert kinds == {
        "loss_match.thread": [],
        "launcher_parity": [Failure.__name__],
        "perf.throughput": [inconclusive.__name__],
        "scaling": [Skipped.__name__],
        "finite": [Error.__name__],
    }
    unsure = next(case for case in suite if case.name == "perf.throughput").result[0]
    assert unsure.message.endswith(MIXED["perf.throughput"].message)
    failure = next(case for case in suite if case.name == "launcher_parity").result[0]
    assert failure.message == MIXED["launcher_parity"].message
    assert "measured: 0.007" in failure.text


def test_junit_of_an_all_pass_report_has_no_failures(tmp_path: Path) -> None:
    rep = build({"finite": Outcome("pass", 0, 0, "all finite")}, tmp_path)
    suite = ET.fromstring(ci_report.junit_xml(rep)).find("testsuite")
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("0", "0", "0")
    assert suite.find("testcase/failure") is None


def test_markdown_lists_failing_gates_first_and_escapes_cells(tmp_path: Path) -> None:
    md = ci_report.markdown(build(MIXED, tmp_path), {"loss_match.thread": "max rel < 0.001"})
    assert md.startswith("## xtrain-gates: ❌ missing or invalid artifact (exit 2)")
    rows = [line for line in md.splitlines() if line.startswith("| `")]
    order = [r.split("`")[1] for r in rows]
    # what needs attention first: fail, error, inconclusive, then pass, then skip (gates/reporting/rows.py)
    assert order == ["launcher_parity", "finite", "perf.throughput", "loss_match.thread", "scaling"]
    assert "step 100 \\| rel 0.0011" in rows[0]  # a pipe in a message does not break the table
    assert all(r.count(" | ") == 4 for r in rows)
    assert "max rel < 0.001" in rows[-2]  # the catalogue's text where the report has a bare number


def _skip_tree(tmp_path: Path) -> Path:
    """A repository layout whose pipeline has one stage of none of the gates': every gate but the
    seals skips (a real exit-0 check; an empty pipeline is an error, issue #51)."""
    root = tmp_path / "repo"
    root.mkdir()
    params = yaml.safe_load(PARAMS.read_text())
    del params["gates"]["scope"]  # not our pipeline: it declares no scope
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    (root / "dvc.yaml").write_text("stages:\n  hello:\n    cmd: echo hi\n")
    (root / "dvc.lock").write_text("schema: '2.0'\nstages:\n  hello:\n    cmd: echo hi\n")
    return root


def test_check_writes_junit_and_markdown(tmp_path: Path) -> None:
    root = _skip_tree(tmp_path)
    code = gates_main(["--root", str(root), "check", "--junit", "out/j.xml", "--markdown", "out/g.md"])
    # the seals judged the tree (an empty pipeline is their error: tests/process/test_scope.py)
    assert code == 0
    n = len(json.loads((root / "reports/gates.json").read_text())["gates"])
    suite = next(iter(JUnitXml.fromfile(str(root / "out/j.xml"))))
    assert (suite.tests, suite.skipped, suite.failures) == (n, n - 1, 0)  # the seals pass
    md = (root / "out/g.md").read_text()
    # no stage in this pipeline: the gates that read stages are one line, not n rows (gates/reporting/rows.py)
    shown = md.count("⏭️ skip |") + md.count("✅ pass |")
    folded = int(md.split("not in this pipeline: ")[1].split(" gate")[0])
    assert shown + folded == n and folded >= n - 1
    assert md.startswith("## xtrain-gates: ✅ all gates pass (exit 0)")


def write(tmp_path: Path, name: str, outcomes: dict[str, Outcome]) -> str:
    path = tmp_path / name
    report.write(build(outcomes, tmp_path), path)
    return str(path)


@pytest.mark.parametrize(
    ("before", "after", "code", "word"),
    [
        ("pass", "pass", 0, "0 got worse; no change"),
        ("fail", "pass", 0, "0 got worse; 1 better"),
        ("pass", "fail", 1, "1 got worse"),
        ("pass", "inconclusive", 1, "1 got worse"),
        ("pass", "skip", 1, "1 got worse"),  # a gate no longer checked is a loss
        ("fail", "error", 0, "0 got worse; 1 changed"),
    ],
)
def test_diff_exit_code_says_whether_a_gate_got_worse(
    tmp_path: Path, capsys, before: str, after: str, code: int, word: str
) -> None:
    a = write(tmp_path, "a.json", {"loss_match.thread": Outcome(before, 1e-7, 1e-3, "before")})
    b = write(tmp_path, "b.json", {"loss_match.thread": Outcome(after, 1e-7, 1e-3, "after")})
    assert gates_main(["diff", a, b]) == code
    out = capsys.readouterr().out
    assert word in out and f"exit {code}" in out


def test_diff_shows_measured_values_side_by_side_and_added_removed_gates(tmp_path: Path, capsys) -> None:
    a = write(
        tmp_path,
        "a.json",
        {"loss_match.thread": Outcome("pass", 1e-7, 1e-3, "m"), "old_gate": Outcome("pass", 1, 1, "m")},
    )
    b = write(
        tmp_path,
        "b.json",
        {
            "loss_match.thread": Outcome("pass", 4e-7, 1e-3, "m"),
            "perf.memory": Outcome("fail", 2.0, 1.1, "peak RSS grew 2x"),
        },
    )
    assert gates_main(["diff", a, b]) == 1  # the new gate fails
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "loss_match.thread" in x)
    assert "1e-07" in line and "4e-07" in line and "measured" in line and "x4" in line
    assert "removed" in next(x for x in out.splitlines() if "old_gate" in x)
    assert "added" in next(x for x in out.splitlines() if "perf.memory" in x)
    assert "WORSE perf.memory: peak RSS grew 2x" in out


def test_diff_of_a_bad_file_is_exit_2_naming_it(tmp_path: Path, capsys) -> None:
    good = write(tmp_path, "good.json", {"finite": Outcome("pass", 0, 0, "m")})
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps({**json.loads(Path(good).read_text()), "exit_code": 7}))
    for bad, words in (
        (tmp_path / "missing.json", "file not found"),
        (broken, "not valid JSON"),
        (invalid, "exit_code"),
    ):
        assert gates_main(["diff", good, str(bad)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and str(bad) in err and words in err
