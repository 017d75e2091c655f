"""The gates report in the formats CI systems read: JUnit XML and a Markdown table.

JUnit: one <testcase> per gate (GitHub, GitLab and Jenkins render it as a test list); a failed gate is a
<failure> whose message is the gate's message, an error an <error>, a skip <skipped/>. An inconclusive
gate did not fail: it is <skipped message="inconclusive: ..."> (every JUnit reader shows a skipped
test with its message and none counts it as a failure; a <failure> would turn the test list red for
a measurement that judged nothing), with its details in <system-out>; the suite's properties carry
the verdict, the count of inconclusive gates and strict. Under --strict (exit 1) it is a
<failure type="inconclusive">, as the exit code says. JUnit keeps every gate, in catalogue order (it
is read by machines). Markdown: a verdict line and a table, meant for
$GITHUB_STEP_SUMMARY, with the rows of gates/reporting/rows.py: fail, error, inconclusive, pass, skip; gates not
in this pipeline in one line; a family's shared threshold once; checks not applied named.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from gates.reporting import rows, verdict

MARK = {"pass": "✅", "fail": "❌", "inconclusive": "⚠️", "skip": "⏭️", "error": "💥"}
# the Markdown heading's mark per verdict
VERDICT_MARK = {"pass": "✅", "fail": "❌", "error": "❌", "nothing judged": "❌", "inconclusive": "⚠️"}


def short(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def _details(g: dict[str, Any]) -> str:
    arts = "".join(f"\n  {path} md5 {info['md5']}" for path, info in sorted(g["artifacts"].items()))
    skipped = f"\n{rows.not_applied(g)}" if g.get("not_applied") else ""
    return (
        f"measured: {short(g['measured'])}\nthreshold: {short(g['threshold'])}\n{g['message']}{skipped}"
        + (f"\nartifacts:{arts}" if arts else "")
    )


def junit_xml(report: dict[str, Any], seconds: dict[str, float] | None = None) -> str:
    """`seconds`: each gate's wall time (JUnit's `time`); 0 where unknown (a report read back from disk)."""
    seconds = seconds or {}
    gates = report["gates"]
    s = report["summary"]
    word, strict = verdict.of_report(report)
    unsure = s["inconclusive"]  # a failure under --strict, else a skipped test with its own message
    suites = ET.Element("testsuites", name="xtrain-gates")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="xtrain-gates",
        tests=str(len(gates)),
        failures=str(s["fail"] + (unsure if strict else 0)),
        errors=str(s["error"]),
        skipped=str(s["skip"] + (0 if strict else unsure)),
        time=f"{sum(seconds.values()):.3f}",
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("git_revision", report["git_revision"]),
        ("training_env_id", report["environment"].get("training_env_id")),
        ("exit_code", report["exit_code"]),
        ("verdict", word),
        ("inconclusive", unsure),
        ("strict", str(strict).lower()),
    ):
        ET.SubElement(props, "property", name=name, value=short(value))
    for g in gates:
        case = ET.SubElement(
            suite, "testcase", classname="gates", name=g["id"], time=f"{seconds.get(g['id'], 0.0):.3f}"
        )
        _outcome(case, g, strict)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _outcome(case: ET.Element, g: dict[str, Any], strict: bool) -> None:
    """The testcase's child for the gate's status (the module's docstring says why inconclusive is
    <skipped> unless --strict)."""
    status, message = g["status"], g["message"]
    if status == "fail" or (status == "inconclusive" and strict):
        ET.SubElement(case, "failure", message=message, type=status).text = _details(g)
    elif status == "error":
        ET.SubElement(case, "error", message=message, type="error").text = _details(g)
    elif status == "skip":
        ET.SubElement(case, "skipped", message=message)
    elif status == "inconclusive":
        ET.SubElement(case, "skipped", message=f"inconclusive: {message}")
        ET.SubElement(case, "system-out").text = _details(g)
    else:
        ET.SubElement(case, "system-out").text = _details(g)


def _cell(x: Any) -> str:
    """A Markdown table cell: one line, pipes escaped."""
    return short(x).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown(report: dict[str, Any], labels: dict[str, str] | None = None) -> str:
    """`labels`: the catalogue's threshold text per gate (python -m gates list)."""
    code = report["exit_code"]
    word, strict = verdict.of_report(report)
    counts = ", ".join(f"{n} {s}" for s, n in report["summary"].items() if n)
    view = rows.rows(report["gates"], labels)
    lines = [
        f"## xtrain-gates: {VERDICT_MARK[word]} {verdict.headline(word, report['summary'], strict)} (exit {code})",
        "",
        f"{counts}; revision `{short(report['git_revision'])}`, "
        f"environment `{short(report['environment'].get('training_env_id'))}`",
        "",
        *(
            [f"Nothing judged: {_cell(verdict.nothing_judged(report['gates']))}", ""]
            if word == "nothing judged"
            else []
        ),
        "| gate | status | measured | threshold | message |",
        "|---|---|---|---|---|",
    ]
    for g in view.shown:
        status = f"{MARK.get(g['status'], '')} {g['status']}"
        said = g["message"] if g["status"] != "pass" or not g.get("not_applied") else rows.not_applied(g)
        lines.append(
            f"| `{g['id']}` | {status} | {_cell(g['measured'])} | {_cell(view.thresholds[g['id']])} "
            f"| {_cell(said)} |"
        )
    if line := view.absent_line():
        lines += ["", f"{MARK['skip']} {line}"]
    if view.legend:
        lines += ["", *(f"Threshold of `{fam}`: {_cell(shared)}" for fam, shared in view.legend)]
    return "\n".join(lines) + "\n"
