"""gates/reporting/diff.py under mutation (docs/judge-mutation.md): the diff people read.

The whole table of every kind of change (measured, better, removed, same, changed, worse, added),
the WORSE lines and the summary, exactly as printed; the colours of each status; paths and ids that
look like markup kept as written; duplicate ids refused naming each once; the exit code of `run`.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from contracts.validate import ValidationError
from gates.judges.outcome import Outcome
from gates.reporting import diff, report


def g(status: str, measured: Any = None, gid: str = "x", message: str | None = None) -> dict[str, Any]:
    return {
        "id": gid,
        "status": status,
        "measured": measured,
        "threshold": None,
        "message": message or f"{gid} {status}",
        "artifacts": {},
    }


A = {
    "gates": [
        g("pass", 2.0, "a"),
        g("fail", None, "b"),
        g("pass", None, "c"),
        g("skip", "x", "e"),
        g("fail", 1, "f"),
        g("inconclusive", "nan", "h"),
        g("pass", 5, "[red]m"),
        g("pass", 0, "z"),
    ]
}
B = {
    "gates": [
        g("pass", 3.0, "a"),
        g("pass", None, "b"),
        g("skip", "x", "e"),
        g("error", 1, "f", "f [bold]broke"),
        g("fail", 1.5, "h", "h [bold]over[/]"),
        g("pass", 5, "[red]m"),
        g("pass", 2, "z"),
        g("inconclusive", None, "d"),
    ]
}
TABLE = """\
                            gates diff: A.json -> B[x].json
┏━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┓
┃ gate   ┃ A            ┃ B            ┃ A measured ┃ B measured ┃ change             ┃
┡━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━┩
│ a      │ PASS         │ PASS         │ 2          │ 3          │ measured +1 (x1.5) │
│ b      │ FAIL         │ PASS         │ -          │ -          │ better             │
│ c      │ PASS         │ -            │ -          │ -          │ removed            │
│ e      │ SKIP         │ SKIP         │ x          │ x          │ same               │
│ f      │ FAIL         │ ERROR        │ 1          │ 1          │ changed            │
│ h      │ INCONCLUSIVE │ FAIL         │ nan        │ 1.5        │ worse              │
│ [red]m │ PASS         │ PASS         │ 5          │ 5          │ same               │
│ z      │ PASS         │ PASS         │ 0          │ 2          │ measured +2        │
│ d      │ -            │ INCONCLUSIVE │ -          │ -          │ added              │
└────────┴──────────────┴──────────────┴────────────┴────────────┴────────────────────┘
WORSE h: h [bold]over[/]
WORSE d: d inconclusive
WORSE c: removed from B (PASS in A): B no longer checks it
3 got worse; 1 better, 1 changed, 2 measured, 1 added, 1 removed; exit 1
"""


def printed(changes: list[diff.Change], b_path: str = "B[x].json", width: int = 120) -> str:
    out = io.StringIO()
    diff.print_diff(changes, "A.json", b_path, Console(file=out, width=width, color_system=None))
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())  # the title is padded


def test_the_diff_of_every_kind_of_change_exactly() -> None:
    assert printed(diff.compare(A, B)) == TABLE


def test_no_change_at_all() -> None:
    lines = printed(diff.compare(A, A)).splitlines()
    assert lines[-1] == "0 got worse; no change; exit 0" and "WORSE" not in "".join(lines)


@pytest.mark.parametrize(
    ("after", "summary"),
    [
        ([g("pass", 2.0, "a")], "1 got worse; 1 removed; exit 1"),
        ([g("skip", 2.0, "a"), g("pass", 1, "n")], "2 got worse; 1 added, 1 removed; exit 1"),
        ([g("pass", 2.5, "a"), g("skip", None, "n")], "1 got worse; 1 measured, 1 added, 1 removed; exit 1"),
        ([g("pass", 2.0, "a"), g("pass", 1, "r")], "0 got worse; no change; exit 0"),
    ],
)
def test_the_summary_counts_each_kind(after: list[dict[str, Any]], summary: str) -> None:
    before = {"gates": [g("pass", 2.0, "a"), g("pass", 1, "r")]}
    assert printed(diff.compare(before, {"gates": after})).splitlines()[-1] == summary


def test_a_failing_gate_removed_is_named_first_of_all() -> None:
    """main: "0 got worse; exit 0" for B without a failing gate of A (and without 25 of 27 gates)."""
    before = {
        "gates": [g("pass", 1, "p"), g("pass", 2, "q"), g("fail", 3, "bad", "loss 3 > 2"), g("pass", 4, "r")]
    }
    after = {"gates": [g("pass", 1, "p"), g("fail", 9, "q", "q broke")]}
    lines = printed(diff.compare(before, after)).splitlines()
    assert lines[-4:] == [
        "WORSE bad: removed from B while FAIL in A: its failure is hidden, not fixed (loss 3 > 2)",
        "WORSE q: q broke",
        "WORSE r: removed from B (PASS in A): B no longer checks it",
        "3 got worse (1 removed while not passing: failures hidden, not fixed); 2 removed; exit 1",
    ]


def test_twenty_five_of_twenty_seven_gates_gone_is_worse() -> None:
    before = {"gates": [g("pass", i, f"g{i}") for i in range(27)]}
    after = {"gates": before["gates"][:2]}
    assert printed(diff.compare(before, after)).splitlines()[-1] == "25 got worse; 25 removed; exit 1"


def test_a_gate_id_and_message_with_terminal_escapes_are_printed_escaped() -> None:
    """A gate id with ESC in a report was printed raw (recolouring, or clearing, the terminal)."""
    esc = "x\x1b[2J\x1b]0;pwned\x07"
    before = {"gates": [g("pass", 1, esc)]}
    after = {"gates": [g("fail", 1, esc, "m\x1b[31m\nforged: 0 got worse; exit 0")]}
    out = printed(diff.compare(before, after), width=200)
    assert "\x1b" not in out and "\x07" not in out
    assert "WORSE x\\x1b[2J\\x1b]0;pwned\\x07: m\\x1b[31m\\nforged: 0 got worse; exit 0" in out.splitlines()
    assert out.splitlines()[-1] == "1 got worse; nothing else; exit 1"


def test_every_text_of_the_reports_is_shown_as_written_not_as_markup() -> None:
    """Paths, measured values, ids and a hidden failure's message holding rich markup: all literal."""
    before = {"gates": [g("pass", "[bold]a", "[red]p"), g("fail", 1, "[red]f", "[bold]loss[/] 3")]}
    after = {"gates": [g("fail", "[bold]b", "[red]p", "[red]broke[/]")]}
    out = io.StringIO()
    diff.print_diff(
        diff.compare(before, after),
        "A[bold].json",
        "B[red].json",
        Console(file=out, width=200, color_system=None),
    )
    text = out.getvalue()
    assert "gates diff: A[bold].json -> B[red].json" in text
    assert "│ [bold]a " in text and "│ [bold]b " in text
    assert (
        "WORSE [red]f: removed from B while FAIL in A: its failure is hidden, not fixed ([bold]loss[/] 3)"
        in text
    )
    assert "WORSE [red]p: [red]broke[/]" in text


def test_run_titles_the_table_with_both_paths(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for path in ("one.json", "two.json"):
        report.write(report.build({}, tmp_path, "params.yaml", None), tmp_path / path)
    assert diff.run("one.json", "two.json") == 0
    assert "gates diff: one.json -> two.json" in capsys.readouterr().out


def test_the_default_console_in_colour(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    before = {"gates": [g("pass", 2.0, "a"), g("fail", 1, "b"), g("inconclusive", 1, "c")]}
    after = {"gates": [g("skip", 2.0, "a", "w" * 170), g("error", 1, "b"), g("pass", 1, "c")]}
    diff.print_diff(diff.compare(before, after), "A.json", "B.json")
    lines = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    red, end = "\x1b[1;31m", "\x1b[0m"
    assert lines[4:7] == [
        f"│ a    │ \x1b[32mPASS{end}         │ \x1b[33mSKIP{end}  │ 2          │ 2          │ {red}worse{end}   │",
        f"│ b    │ {red}FAIL{end}         │ \x1b[1;35mERROR{end} │ 1          │ 1          │ changed │",
        f"│ c    │ \x1b[1;33mINCONCLUSIVE{end} │ \x1b[32mPASS{end}  │ 1          │ 1          │ better  │",
    ]
    assert lines[-4:] == [
        f"{red}WORSE{end} a:",
        "w" * 160,
        "w" * 10,
        "1 got worse; 1 better, 1 changed; exit 1",
    ]


@pytest.mark.parametrize(
    ("status", "shown"),
    [("pass", "[green]PASS[/]"), ("error", "[bold magenta]ERROR[/]"), ("-", "-"), ("[x]", "\\[x]")],
)
def test_a_status_cell(status: str, shown: str) -> None:
    assert diff._status(status) == shown


def write(tmp_path: Path, name: str, outcomes: dict[str, Outcome]) -> str:
    path = tmp_path / name
    report.write(report.build(outcomes, tmp_path, "params.yaml", None), path)
    return str(path)


@pytest.mark.parametrize(
    ("after", "code"),
    [
        ("pass", 0),
        ("skip", 1),
        ("inconclusive", 1),
        ("error", 1),
    ],
)
def test_run_exits_1_when_a_gate_got_worse(after: str, code: int, tmp_path: Path, capsys) -> None:
    a = write(tmp_path, "a.json", {"g": Outcome("pass", 1, None, "ok")})
    b = write(tmp_path, "b.json", {"g": Outcome(after, 1, None, "now")})
    assert diff.run(a, b) == code
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"exit {code}")


def test_load_names_every_duplicate_once(tmp_path: Path) -> None:
    path = write(tmp_path, "a.json", {"s": Outcome("pass"), "b": Outcome("pass"), "a": Outcome("pass")})
    data = json.loads(Path(path).read_text())
    s, b, a = data["gates"]
    data["gates"] = [b, a, s, b, a, b]  # b three times: named once
    Path(path).write_text(json.dumps(data))
    with pytest.raises(ValidationError) as e:
        diff.load(path)
    assert str(e.value) == f"{path}: gates: duplicate gate id a, b (rule: one entry per gate)"
    ok = write(tmp_path, "ok.json", {"s": Outcome("pass")})
    assert [x["id"] for x in diff.load(ok)["gates"]] == ["s"]


NARROW = """\
              gates diff: A.json -> B.json
┏━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━┳━━━━┳━━━━┳━━━━━┓
┃                ┃              ┃      ┃ A  ┃ B  ┃     ┃
┃                ┃              ┃      ┃ me ┃ me ┃     ┃
┃                ┃              ┃      ┃ as ┃ as ┃     ┃
┃                ┃              ┃      ┃ ur ┃ ur ┃ cha ┃
┃ gate           ┃ A            ┃ B    ┃ ed ┃ ed ┃ nge ┃
┡━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━╇━━━━╇━━━━╇━━━━━┩
│ gate.long.name │ PASS         │ SKIP │ mm │ nn │ wor │
│                │              │      │ mm │ nn │ se  │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│                │              │      │ mm │ nn │     │
│ b              │ INCONCLUSIVE │ PASS │ 1  │ 2  │ bet │
│                │              │      │    │    │ ter │
└────────────────┴──────────────┴──────┴────┴────┴─────┘
WORSE gate.long.name: gate.long.name skip
1 got worse; 1 better; exit 1
"""


def test_a_narrow_diff_folds_the_measured_values_and_keeps_gate_and_statuses_whole() -> None:
    a = {"gates": [g("pass", "m" * 30, "gate.long.name"), g("inconclusive", 1, "b")]}
    b = {"gates": [g("skip", "n" * 30, "gate.long.name"), g("pass", 2, "b")]}
    assert printed(diff.compare(a, b), "B.json", width=56) == NARROW


@pytest.mark.parametrize(
    ("x", "y", "same"),
    [
        (math.nan, math.nan, True),
        (1.0, math.nan, False),
        (math.nan, 1.0, False),
        (math.nan, "nan", False),
        ("nan", "nan", True),
        (1, 1.0, True),
        (1, "1", False),
    ],
)
def test_same_treats_two_nans_as_equal(x: Any, y: Any, same: bool) -> None:
    assert diff._same(x, y) is same


@pytest.mark.parametrize(
    ("x", "y", "delta"),
    [
        (2.0, 3.0, "+1 (x1.5)"),
        (4, 2, "-2 (x0.5)"),
        (0, 2.0, "+2"),
        (1.0, math.inf, "+inf"),
        (math.inf, 1.0, "-inf"),
        (-math.inf, 1.0, "+inf"),
        (3.0, math.nan, "+nan"),
        (1.0, 1.0, ""),
        ("a", 1.0, ""),
        (1.0, "a", ""),
        ("a", "b", ""),
        (True, 2, ""),
        (2, False, ""),
        (None, 1, ""),
    ],
)
def test_the_delta_of_two_measured_numbers(x: Any, y: Any, delta: str) -> None:
    assert diff._delta(x, y) == delta
