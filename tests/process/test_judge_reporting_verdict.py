"""gates/reporting/verdict.py under mutation (docs/judge-mutation.md): inconclusive is not failure.

The check's verdict and exit code from every mix of statuses (error 2 > fail 1 > inconclusive 3 >
pass 0; every gate skipped: nothing judged, 2; --strict: inconclusive exits 1), the headline no report
words as a failure when no gate failed, the one line that says why nothing was judged, and the report
format: /2 records the verdict and strict, /1 reports (written before exit 3) stay readable by `gates
diff`. Each test fails on main 52a4e5f, where an inconclusive gate exited 1 as "gate failure" and a
check whose gates all skipped exited 0 as "all gates pass".
"""

from __future__ import annotations

import io
import json
from itertools import product
from pathlib import Path

import pytest
from rich.console import Console

from conftest import REPO
from contracts import artifact_table
from contracts.validate import ValidationError
from gates.__main__ import main as gates_main
from gates.judges.outcome import STATUSES, Outcome
from gates.reporting import report, verdict

OLD_REPORT = REPO / "docs/data/h200-2026-12-01/gates.json"  # format /1, written by the nightly


def reference(statuses: tuple[str, ...], strict: bool) -> int:
    """The rule as the issue states it, written apart from the code under test."""
    if "error" in statuses:
        return 2
    if "fail" in statuses:
        return 1
    if "inconclusive" in statuses:
        return 1 if strict else 3
    return 0 if "pass" in statuses else 2


@pytest.mark.parametrize("strict", [False, True])
def test_the_exit_code_of_every_mix_of_up_to_three_statuses(strict: bool) -> None:
    for n in range(4):
        for statuses in product(STATUSES, repeat=n):
            word = verdict.of(statuses)
            assert verdict.exit_code(word, strict) == reference(statuses, strict), (statuses, strict)


@pytest.mark.parametrize(
    ("statuses", "word"),
    [
        ((), "nothing judged"),
        (("skip", "skip"), "nothing judged"),
        (("skip", "pass"), "pass"),
        (("skip", "inconclusive"), "inconclusive"),
        (("pass", "inconclusive"), "inconclusive"),
        (("inconclusive", "fail"), "fail"),
        (("fail", "error"), "error"),
        (("skip", "error"), "error"),
    ],
)
def test_the_verdict_word(statuses: tuple[str, ...], word: str) -> None:
    assert verdict.of(statuses) == word
    assert verdict.of(iter(statuses)) == word  # any iterable, read once


def test_the_exit_codes_and_their_meanings() -> None:
    assert verdict.EXIT == {"pass": 0, "fail": 1, "error": 2, "nothing judged": 2, "inconclusive": 3}
    assert [verdict.exit_code(w, False) for w in verdict.WORDS] == [0, 1, 2, 2, 3]
    assert [verdict.exit_code(w, True) for w in verdict.WORDS] == [0, 1, 2, 2, 1]
    assert sorted(verdict.MEANING) == [0, 1, 2, 3]
    assert verdict.MEANING[3].startswith("inconclusive: no gate failed")


SUMMARY = {"pass": 20, "fail": 0, "inconclusive": 1, "skip": 6, "error": 0}


@pytest.mark.parametrize(
    ("word", "strict", "text"),
    [
        ("pass", False, "all gates pass"),
        ("fail", False, "gate failure"),
        ("fail", True, "gate failure"),
        ("error", False, "missing or invalid artifact"),
        ("nothing judged", False, "nothing judged: every gate skipped"),
        ("inconclusive", False, "no gate failed, 1 inconclusive"),
        ("inconclusive", True, "no gate failed, 1 inconclusive: not a pass under --strict"),
    ],
)
def test_the_headline_says_failure_only_when_a_gate_failed(word: str, strict: bool, text: str) -> None:
    assert verdict.headline(word, SUMMARY, strict) == text
    assert ("failure" in text) == (word == "fail")


def test_the_headline_counts_the_inconclusive_gates() -> None:
    assert verdict.headline("inconclusive", {"inconclusive": 3}, False) == "no gate failed, 3 inconclusive"
    assert verdict.headline("inconclusive", {}, False) == "no gate failed, 0 inconclusive"


def test_a_report_of_format_2_says_its_verdict_and_one_of_format_1_is_read_as_judged_then() -> None:
    assert verdict.of_report({"verdict": "inconclusive", "strict": False, "summary": {}}) == (
        "inconclusive",
        False,
    )
    assert verdict.of_report({"verdict": "pass", "strict": True, "summary": {"fail": 2}}) == ("pass", True)
    old = {"summary": {"pass": 3, "fail": 0, "inconclusive": 1, "skip": 0, "error": 0}, "exit_code": 1}
    assert verdict.of_report(old) == ("inconclusive", True)  # /1 counted it as a failure: strict's rule
    assert verdict.of_report({"summary": {"pass": 0, "skip": 4}}) == ("nothing judged", True)
    assert verdict.of_report({"summary": {"pass": 1, "skip": 4, "fail": 0}}) == ("pass", True)


def entry(gid: str, message: str, stages: list[str] | None = None) -> dict:
    return {"id": gid, "status": "skip", "message": message} | ({"not_in_pipeline": stages} if stages else {})


def test_why_nothing_was_judged_in_one_line() -> None:
    entries = [
        entry("seals", "no stage in dvc.yaml or dvc.lock"),
        entry("scaling", "stages scaling not in the pipeline", ["scaling"]),
        entry("pilot.a", "stage pilot absent", ["pilot"]),
        entry("pilot.b", "stage pilot absent", ["pilot"]),
        entry("perf.memory", "no baseline: python -m registry bless --perf"),
        entry("perf.throughput", "no baseline: python -m registry bless --perf"),
        entry("x", "y" * 200),
        entry("z", "another reason"),
    ]
    assert verdict.nothing_judged(entries) == (
        "3 not in this pipeline (stages pilot, scaling); 5 skipped: no stage in dvc.yaml or dvc.lock; "
        "no baseline: python -m registry bless --perf (+2 other reasons)"
    )
    assert verdict.nothing_judged(entries[:7]) == (
        "3 not in this pipeline (stages pilot, scaling); 4 skipped: no stage in dvc.yaml or dvc.lock; "
        "no baseline: python -m registry bless --perf (+1 other reasons)"
    )
    assert verdict.nothing_judged(entries[1:3]) == "2 not in this pipeline (stages pilot, scaling)"
    assert verdict.nothing_judged(entries[:1]) == "1 skipped: no stage in dvc.yaml or dvc.lock"
    assert verdict.nothing_judged(entries[4:7]) == (
        f"3 skipped: no baseline: python -m registry bless --perf; {'y' * 159}…"
    )
    assert verdict.nothing_judged([]) == "no gate was selected"


def printed(outcomes: dict[str, Outcome], strict: bool) -> str:
    out = io.StringIO()
    report.print_table(outcomes, {}, Path("r.json"), Console(file=out, width=60, color_system=None), strict)
    return out.getvalue()


def test_the_table_says_nothing_was_judged_in_one_line_and_exits_2() -> None:
    outcomes = {
        "seals": Outcome("skip", message="no stage in dvc.yaml or dvc.lock"),
        "scaling": Outcome("skip", message="absent", not_in_pipeline=["scaling"]),
    }
    last = printed(outcomes, False).splitlines()[-1]  # one line, however narrow the console
    assert last == (
        "nothing judged: every gate skipped (2 skip): 1 not in this pipeline (stages scaling); 1 skipped: "
        "no stage in dvc.yaml or dvc.lock; next: dvc repro the stages these gates read, or --only gates "
        "whose stages ran; report: r.json; exit 2"
    )
    assert report.verdict_line({}, None) == (
        "[bold magenta]nothing judged: every gate skipped[/] (no gate): no gate was selected; next: dvc repro "
        "the stages these gates read, or --only gates whose stages ran; exit 2"
    )


def test_a_message_of_a_skip_is_not_read_as_markup() -> None:
    line = report.verdict_line({"a": Outcome("skip", message="[bold]x[/] y")}, None)
    assert "1 skipped: \\[bold]x\\[/] y; next:" in line


@pytest.mark.parametrize(
    ("strict", "last"),
    [
        (False, "no gate failed, 1 inconclusive (1 pass, 1 inconclusive, 1 skip); report: r.json; exit 3"),
        (True, "no gate failed, 1 inconclusive: not a pass under --strict (1 pass, 1 inconclusive, 1 skip); "
               "report: r.json; exit 1"),
    ],
)  # fmt: skip
def test_the_table_of_an_inconclusive_check_never_says_failure(strict: bool, last: str) -> None:
    outcomes = {
        "a": Outcome("pass"),
        "scaling": Outcome("inconclusive", message="spread 52%"),
        "c": Outcome("skip", message="s"),
    }
    assert printed(outcomes, strict).splitlines()[-1] == last
    assert report.verdict_line(outcomes, None, strict).startswith(
        "[bold yellow]no gate failed, 1 inconclusive"
    )


def test_the_report_records_the_verdict_and_strict(tmp_path: Path) -> None:
    outcomes = {"a": Outcome("pass"), "b": Outcome("inconclusive")}
    loose = report.build(outcomes, tmp_path, "params.yaml", None)
    strict = report.build(outcomes, tmp_path, "params.yaml", None, True)
    assert report.FORMAT == "xtrain-gates-report/2"
    assert [(r["format"], r["exit_code"], r["verdict"], r["strict"]) for r in (loose, strict)] == [
        ("xtrain-gates-report/2", 3, "inconclusive", False),
        ("xtrain-gates-report/2", 1, "inconclusive", True),
    ]
    nothing = report.build({"a": Outcome("skip")}, tmp_path, "params.yaml", None, True)
    assert (nothing["exit_code"], nothing["verdict"]) == (2, "nothing judged")


def valid(rep: dict) -> None:
    artifact_table.check("gates_report", rep, "r.json")


@pytest.mark.parametrize(
    "change",
    [
        {"exit_code": 1},  # an inconclusive check is 3 without strict
        {"strict": True},  # ... and 1 with it
        {"verdict": "pass"},
        {"verdict": "fail"},
        {"verdict": "nothing judged"},
        {"verdict": "warn"},
        {"exit_code": 4},
        {"format": "xtrain-gates-report/1"},  # /1 has no verdict, no strict, no exit 3
        {"format": "xtrain-gates-report/3"},
    ],
)
def test_the_schema_holds_the_exit_code_to_the_verdict(tmp_path: Path, change: dict) -> None:
    rep = report.build({"a": Outcome("pass"), "b": Outcome("inconclusive")}, tmp_path, "params.yaml", None)
    valid(rep)
    with pytest.raises(ValidationError):
        valid(rep | change)


def test_the_schema_needs_verdict_and_strict_in_format_2_and_neither_in_format_1(tmp_path: Path) -> None:
    rep = report.build({"a": Outcome("fail")}, tmp_path, "params.yaml", None)
    for key in ("verdict", "strict"):
        with pytest.raises(ValidationError):
            valid({k: v for k, v in rep.items() if k != key})
    old = {k: v for k, v in rep.items() if k not in ("verdict", "strict")} | {
        "format": "xtrain-gates-report/1"
    }
    valid(old)
    valid(old | {"exit_code": 0})
    for code in (2, 1):  # every pairing of verdict and exit code the writer can give
        valid(
            report.build({"a": Outcome("error" if code == 2 else "inconclusive")}, tmp_path, "p", None, True)
        )


def test_gates_diff_reads_a_report_of_format_1_against_one_of_format_2(tmp_path: Path, capsys) -> None:
    old = json.loads(OLD_REPORT.read_text())
    assert old["format"] == "xtrain-gates-report/1" and "verdict" not in old
    outcomes = {
        g["id"]: Outcome(g["status"], g["measured"], g["threshold"], g["message"]) for g in old["gates"]
    }
    outcomes["scaling"] = Outcome("inconclusive", None, None, "spread 52%")
    new = tmp_path / "new.json"
    report.write(report.build(outcomes, tmp_path, "params.yaml", None), new)
    assert gates_main(["diff", str(OLD_REPORT), str(new)]) == 1  # the scaling gate got worse
    out = capsys.readouterr().out
    assert "WORSE scaling: spread 52%" in out and out.rstrip().endswith("exit 1")
    assert gates_main(["diff", str(new), str(OLD_REPORT)]) == 0
