"""The verdict of `python -m gates check`: one word, its exit code and its headline, for every report.

A gate's outcome is one of three words kept apart, beside pass and error: `skip` (not applicable to this
profile or tree: counts as neither pass nor failure), `inconclusive` (a measurement that could not judge:
rerun on a quiet machine) and `fail`. The check's verdict, by precedence:

    error > fail > inconclusive > pass; a check in which every gate skipped judged nothing: an error

and its exit code (docs/reports.md, CHANGELOG.md): 0 pass, 1 a gate failed, 2 error (a bad or missing
artifact, a stale tree, nothing judged), 3 no gate failed but one or more were inconclusive. `--strict`
turns inconclusive into 1. The table, JSON, HTML, JUnit and Markdown reports all take their words here,
so none says "failure" when no gate failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from contracts.errors import clip

# the check's verdict -> its exit code (without --strict)
EXIT = {"pass": 0, "fail": 1, "error": 2, "nothing judged": 2, "inconclusive": 3}
WORDS = tuple(EXIT)  # the report's `verdict` (contracts/schemas/gates_report.schema.json)
MEANING = {
    0: "pass: every gate that judged passed (skips count as neither)",
    1: "fail: a gate failed (with --strict also: a gate was inconclusive)",
    2: "error: a missing or invalid artifact, a stale tree, or nothing judged (every gate skipped)",
    3: "inconclusive: no gate failed, one or more could not judge (rerun on a quiet machine)",
}


def of(statuses: Iterable[str]) -> str:
    """The check's verdict from its gates' statuses (precedence above)."""
    seen = set(statuses)
    for word in ("error", "fail", "inconclusive"):
        if word in seen:
            return word
    return "pass" if seen - {"skip"} else "nothing judged"


def exit_code(word: str, strict: bool) -> int:
    """The exit code of a verdict; --strict counts an inconclusive gate as a failure."""
    return 1 if strict and word == "inconclusive" else EXIT[word]


def headline(word: str, summary: Mapping[str, int], strict: bool) -> str:
    """The verdict in words (the table's last line, the HTML title, the Markdown heading)."""
    n = summary.get("inconclusive", 0)
    return {
        "pass": "all gates pass",
        "fail": "gate failure",
        "error": "missing or invalid artifact",
        "nothing judged": "nothing judged: every gate skipped",
        "inconclusive": f"no gate failed, {n} inconclusive"
        + (": not a pass under --strict" if strict else ""),
    }[word]


def of_report(report: Mapping[str, Any]) -> tuple[str, bool]:
    """(verdict, strict) of a report; one of format /1 (before both keys) is read as it was judged then:
    its inconclusive gates counted as failures, which is --strict's rule."""
    if "verdict" in report:
        return report["verdict"], report["strict"]
    return of(s for s, n in report["summary"].items() if n), True


def nothing_judged(entries: list[dict[str, Any]]) -> str:
    """Why every gate skipped, in one line: the stages missing from the pipeline, the skips' reasons."""
    absent = [g for g in entries if g.get("not_in_pipeline")]
    stages = sorted({s for g in absent for s in g["not_in_pipeline"]})
    reasons = list(dict.fromkeys(clip(g["message"], 160) for g in entries if not g.get("not_in_pipeline")))
    parts = [f"{len(absent)} not in this pipeline (stages {', '.join(stages)})"] if absent else []
    parts += [f"{len(entries) - len(absent)} skipped: {'; '.join(reasons[:2])}"] if reasons else []
    more = f" (+{len(reasons) - 2} other reasons)" if len(reasons) > 2 else ""
    return "; ".join(parts or ["no gate was selected"]) + more
