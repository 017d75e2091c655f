"""gates/reporting/ci_report.py under mutation (docs/judge-mutation.md): the verdict for CI systems.

The JUnit XML and the Markdown summary of one report holding every status, a family, a gate not in
this pipeline and checks not applied, each asserted as the exact text a CI system shows; the
verdict line of each exit code; a Markdown cell's escapes; a number as a cell shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gates.judges.outcome import Outcome
from gates.reporting import ci_report, report

LONG = "cpu: step 0 rel <= 1e-05, max rel <= 0.001"
ARTS = {"runs/b/x.json": {"md5": "b" * 32}, "runs/a/y.json": {"md5": "a" * 32}}
MIXED = {
    "pilot.a": Outcome("pass", 1.8e-7, LONG, "ok a", ARTS),
    "pilot.b": Outcome(
        "fail", 0.0071234, f"{LONG}; vs base: x", "a | b\\c\nd", not_applied={"masks": "not recorded"}
    ),
    "perf": Outcome("inconclusive", "spread 31%", None, "rerun"),
    "scaling": Outcome("skip", None, None, "not run"),
    "finite": Outcome("error", None, 0.5, "bad"),
    "gone": Outcome("skip", None, "t", "absent", not_in_pipeline=["export"]),
    "na": Outcome("pass", 3, 4, "fine", not_applied={"train mode": "not recorded"}),
}


def build(outcomes: dict[str, Outcome], tmp_path: Path, revision: str | None = None) -> dict[str, Any]:
    rep = report.build(outcomes, tmp_path, "params.yaml", "cpu-test")  # schema-validated
    rep["git_revision"] = revision
    return rep


JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="xtrain-gates">
  <testsuite name="xtrain-gates" tests="7" failures="1" errors="1" skipped="3" time="1.750">
    <properties>
      <property name="git_revision" value="0123abc" />
      <property name="training_env_id" value="cpu-test" />
      <property name="exit_code" value="2" />
      <property name="verdict" value="error" />
      <property name="inconclusive" value="1" />
      <property name="strict" value="false" />
    </properties>
    <testcase classname="gates" name="pilot.a" time="0.500">
      <system-out>measured: 1.8e-07
threshold: cpu: step 0 rel &lt;= 1e-05, max rel &lt;= 0.001
ok a
artifacts:
  runs/a/y.json md5 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
  runs/b/x.json md5 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb</system-out>
    </testcase>
    <testcase classname="gates" name="pilot.b" time="0.000">
      <failure message="a | b\\c&#10;d" type="fail">measured: 0.00712
threshold: cpu: step 0 rel &lt;= 1e-05, max rel &lt;= 0.001; vs base: x
a | b\\c
d
not applied: masks: not recorded</failure>
    </testcase>
    <testcase classname="gates" name="perf" time="0.000">
      <skipped message="inconclusive: rerun" />
      <system-out>measured: spread 31%
threshold: -
rerun</system-out>
    </testcase>
    <testcase classname="gates" name="scaling" time="0.000">
      <skipped message="not run" />
    </testcase>
    <testcase classname="gates" name="finite" time="1.250">
      <error message="bad" type="error">measured: -
threshold: 0.5
bad</error>
    </testcase>
    <testcase classname="gates" name="gone" time="0.000">
      <skipped message="absent" />
    </testcase>
    <testcase classname="gates" name="na" time="0.000">
      <system-out>measured: 3
threshold: 4
fine
not applied: train mode: not recorded</system-out>
    </testcase>
  </testsuite>
</testsuites>
"""


def test_junit_of_every_status_exactly(tmp_path: Path) -> None:
    rep = build(MIXED, tmp_path, "0123abc")
    assert ci_report.junit_xml(rep, {"pilot.a": 0.5, "finite": 1.25}) == JUNIT


def test_junit_counts_inconclusive_as_skipped_and_times_zero_when_unknown(tmp_path: Path) -> None:
    outcomes = {
        "a": Outcome("fail", 1, 0, "x"),
        "b": Outcome("fail", 1, 0, "y"),
        "c": Outcome("inconclusive", 1, 0, "z"),
        "d": Outcome("pass", 1.0, 2, "w"),
    }
    xml = ci_report.junit_xml(build(outcomes, tmp_path))
    head = xml.splitlines()[:11]
    assert head == [
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<testsuites name="xtrain-gates">',
        '  <testsuite name="xtrain-gates" tests="4" failures="2" errors="0" skipped="1" time="0.000">',
        "    <properties>",
        '      <property name="git_revision" value="-" />',
        '      <property name="training_env_id" value="cpu-test" />',
        '      <property name="exit_code" value="1" />',
        '      <property name="verdict" value="fail" />',
        '      <property name="inconclusive" value="1" />',
        '      <property name="strict" value="false" />',
        "    </properties>",
    ]
    assert xml.count('time="0.000"') == 5
    assert "<system-out>measured: 1\nthreshold: 2\nw</system-out>" in xml  # no artifacts: no heading


def test_junit_without_a_training_environment(tmp_path: Path) -> None:
    rep = build({"a": Outcome("pass", None, None, "")}, tmp_path)
    del rep["environment"]["training_env_id"]
    xml = ci_report.junit_xml(rep, {"a": 0.0004, "b": 2.0})
    assert '<property name="training_env_id" value="-" />' in xml and 'value="0"' in xml
    assert 'tests="1" failures="0" errors="0" skipped="0" time="2.000"' in xml
    assert '<testcase classname="gates" name="a" time="0.000">' in xml


MARKDOWN = """## xtrain-gates: ❌ missing or invalid artifact (exit 2)

2 pass, 1 fail, 1 inconclusive, 2 skip, 1 error; revision `0123abc`, environment `cpu-test`

| gate | status | measured | threshold | message |
|---|---|---|---|---|
| `pilot.b` | ❌ fail | 0.00712 | pilot.* (below) + vs base: x | a \\| b\\\\c d |
| `finite` | 💥 error | - | finite label | bad |
| `perf` | ⚠️ inconclusive | spread 31% | - | rerun |
| `pilot.a` | ✅ pass | 1.8e-07 | pilot.* (below) | ok a |
| `na` | ✅ pass | 3 | 4 | not applied: train mode: not recorded |
| `scaling` | ⏭️ skip | - | - | not run |

⏭️ not in this pipeline: 1 gate (stages export: not in dvc.yaml or dvc.lock, nothing to judge)

Threshold of `pilot.*`: cpu: step 0 rel <= 1e-05, max rel <= 0.001
"""


def test_markdown_of_every_status_exactly(tmp_path: Path) -> None:
    assert ci_report.markdown(build(MIXED, tmp_path, "0123abc"), {"finite": "finite label"}) == MARKDOWN


@pytest.mark.parametrize(
    ("outcomes", "head"),
    [
        ({"a": Outcome("pass", 0.5, None, "m")}, "## xtrain-gates: ✅ all gates pass (exit 0)"),
        (
            {"a": Outcome("inconclusive", 0.5, None, "m")},
            "## xtrain-gates: ⚠️ no gate failed, 1 inconclusive (exit 3)",
        ),
        ({"a": Outcome("fail", 0.5, None, "m")}, "## xtrain-gates: ❌ gate failure (exit 1)"),
    ],
)
def test_markdown_with_nothing_absent_and_no_family(outcomes: dict, head: str, tmp_path: Path) -> None:
    rep = build(outcomes, tmp_path)
    del rep["environment"]["training_env_id"]
    status = outcomes["a"].status
    mark = ci_report.MARK[status]
    assert ci_report.markdown(rep) == "\n".join(
        [
            head,
            "",
            f"1 {status}; revision `-`, environment `-`",
            "",
            "| gate | status | measured | threshold | message |",
            "|---|---|---|---|---|",
            f"| `a` | {mark} {status} | 0.5 | - | m |",
            "",
        ]
    )


def test_markdown_shows_the_message_of_a_pass_whose_checks_all_applied_and_unknown_statuses(
    tmp_path: Path,
) -> None:
    rep = build({"a": Outcome("pass", 1, None, "all good")}, tmp_path)
    rep["gates"].append(
        {**rep["gates"][0], "id": "b", "status": "odd", "not_applied": [{"check": "c", "why": "w"}]}
    )
    lines = ci_report.markdown(rep).splitlines()
    assert lines[6:8] == ["| `b` |  odd | 1 | - | all good |", "| `a` | ✅ pass | 1 | - | all good |"]


@pytest.mark.parametrize(
    ("x", "cell"),
    [
        ("a|b", "a\\|b"),
        ("a\\b", "a\\\\b"),
        ("a\\|b", "a\\\\\\|b"),  # the backslash escaped first, then the pipe
        ("one\ntwo\nthree", "one two three"),
        (None, "-"),
        (0.000123456, "0.000123"),
        (12, "12"),
    ],
)
def test_a_markdown_cell_is_one_line_with_pipes_escaped(x: Any, cell: str) -> None:
    assert ci_report._cell(x) == cell


@pytest.mark.parametrize(
    ("x", "text"),
    [(None, "-"), (1234.5678, "1.23e+03"), (0.5, "0.5"), (3, "3"), (True, "True"), ("nan", "nan"), ("", "")],
)
def test_short(x: Any, text: str) -> None:
    assert ci_report.short(x) == text


def test_markdown_of_a_check_that_judged_nothing_says_why(tmp_path: Path) -> None:
    outcomes = {
        "seals": Outcome("skip", None, None, "no stage | here"),
        "scaling": Outcome("skip", None, None, "absent", not_in_pipeline=["scaling"]),
    }
    assert ci_report.markdown(build(outcomes, tmp_path)) == "\n".join(
        [
            "## xtrain-gates: ❌ nothing judged: every gate skipped (exit 2)",
            "",
            "2 skip; revision `-`, environment `cpu-test`",
            "",
            "Nothing judged: 1 not in this pipeline (stages scaling); 1 skipped: no stage \\| here",
            "",
            "| gate | status | measured | threshold | message |",
            "|---|---|---|---|---|",
            "| `seals` | ⏭️ skip | - | - | no stage \\| here |",
            "",
            "⏭️ not in this pipeline: 1 gate (stages scaling: not in dvc.yaml or dvc.lock, nothing to judge)",
            "",
        ]
    )


def test_markdown_of_an_inconclusive_check_under_strict(tmp_path: Path) -> None:
    outcomes = {"a": Outcome("inconclusive", 0.5, None, "m"), "b": Outcome("pass", 1, None, "ok")}
    rep = report.build(outcomes, tmp_path, "params.yaml", "cpu-test", True) | {"git_revision": None}
    assert ci_report.markdown(rep).splitlines()[:3] == [
        "## xtrain-gates: ⚠️ no gate failed, 1 inconclusive: not a pass under --strict (exit 1)",
        "",
        "1 pass, 1 inconclusive; revision `-`, environment `cpu-test`",
    ]
