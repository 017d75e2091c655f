"""gates/reporting/diff.py under mutation (docs/judge-mutation.md): what got worse between two gate reports.

The status order (pass > skip > inconclusive > fail = error), a new gate that does not pass or skip,
a removed gate, the kind of each change, measured deltas, duplicate ids, the table and the exit code.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from contracts.validate import ValidationError
from gates.judges.outcome import Outcome, passed
from gates.reporting.diff import RANK, Change, _delta, _same, compare, load, print_diff, run
from gates.reporting.report import build


def g(status: str, measured=None, gid: str = "x") -> dict:
    return {
        "id": gid,
        "status": status,
        "measured": measured,
        "threshold": None,
        "message": f"{gid} {status}",
        "artifacts": {},
    }


@pytest.mark.parametrize(
    ("before", "after", "worse", "kind"),
    [
        ("pass", "pass", False, "same"), ("pass", "skip", True, "worse"), ("skip", "pass", False, "better"),
        ("skip", "inconclusive", True, "worse"), ("inconclusive", "fail", True, "worse"),
        ("fail", "error", False, "changed"), ("error", "fail", False, "changed"), ("fail", "pass", False, "better"),
    ],
)  # fmt: skip
def test_the_status_order(before: str, after: str, worse: bool, kind: str) -> None:
    c = Change("x", g(before), g(after))
    assert (c.worse, c.kind) == (worse, kind)
    assert RANK == {"pass": 0, "skip": 1, "inconclusive": 2, "fail": 3, "error": 3}


@pytest.mark.parametrize(
    ("status", "worse"),
    [("pass", False), ("skip", False), ("inconclusive", True), ("fail", True), ("error", True)],
)
def test_a_new_gate_is_worse_unless_it_passes_or_skips(status: str, worse: bool) -> None:
    c = Change("x", None, g(status))
    assert (c.worse, c.kind) == (worse, "added")


@pytest.mark.parametrize(
    ("before", "hides"),
    [("pass", False), ("skip", False), ("inconclusive", True), ("fail", True), ("error", True)],
)
def test_a_removed_gate_is_worse_and_a_removed_failure_hides_it(before: str, hides: bool) -> None:
    """main said "0 got worse; exit 0" with 25 of 27 gates gone from B, a failing one among them."""
    c = Change("x", g(before), None)
    assert (c.worse, c.kind, c.hides_failure) == (True, "removed", hides)
    assert not Change("x", g(before), g(before)).hides_failure
    assert not Change("x", None, g("fail")).hides_failure


def test_same_or_measured() -> None:
    assert Change("x", g("pass", 1.0), g("pass", 1.0)).kind == "same"
    assert Change("x", g("pass", 1.0), g("pass", 2.0)).kind == "measured"
    assert Change("x", g("pass", math.nan), g("pass", math.nan)).kind == "same"
    assert _same(math.nan, math.nan) and not _same(math.nan, 1.0) and not _same(1, "1") and _same("a", "a")
    assert not _same(math.nan, "nan")


def test_deltas_of_measured_numbers() -> None:
    assert _delta(2.0, 3.0) == "+1 (x1.5)" and _delta(4, 2) == "-2 (x0.5)"
    assert _delta(0, 2.0) == "+2" and _delta(1.0, math.inf) == "+inf" and _delta(math.inf, 1.0) == "-inf"
    assert (
        _delta(1.0, 1.0) == "" and _delta("a", 1.0) == "" and _delta(True, 2) == "" and _delta(None, 1) == ""
    )


def test_compare_keeps_a_order_then_bs_new_gates() -> None:
    a = {"gates": [g("pass", gid="s"), g("pass", gid="f"), g("pass", gid="gone")]}
    b = {"gates": [g("pass", gid="n"), g("fail", gid="f"), g("pass", gid="s")]}
    changes = compare(a, b)
    assert [(c.id, c.kind) for c in changes] == [
        ("s", "same"),
        ("f", "worse"),
        ("gone", "removed"),
        ("n", "added"),
    ]


def write(tmp_path: Path, name: str, outcomes: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(build(outcomes, tmp_path, "params.yaml", None)))
    return str(path)


def test_run_says_what_got_worse_and_exits_1(tmp_path: Path, capsys) -> None:
    a = write(tmp_path, "a.json", {"seals": passed(3, "t", "ok"), "finite": passed(0, 0, "ok")})
    b = write(
        tmp_path,
        "b.json",
        {"seals": passed(4, "t", "ok"), "finite": Outcome("fail", 1, 0, "runs/single: nan")},
    )
    assert run(a, b) == 1
    out = capsys.readouterr().out
    assert "WORSE finite: runs/single: nan" in out and "1 got worse; 1 measured; exit 1" in out
    assert run(a, a) == 0 and "0 got worse; no change; exit 0" in capsys.readouterr().out


def test_the_table_shows_each_change(tmp_path: Path) -> None:
    changes = compare(
        {"gates": [g("pass", 2.0, "a"), g("fail", None, "b"), g("pass", None, "c")]},
        {"gates": [g("pass", 3.0, "a"), g("pass", None, "b"), g("inconclusive", None, "d")]},
    )
    out = io.StringIO()
    print_diff(changes, "A.json", "B.json", Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert (
        "gates diff: A.json -> B.json" in text
        and "measured +1 (x1.5)" in text
        and "WORSE d: d inconclusive" in text
    )
    assert "WORSE c: removed from B (PASS in A): B no longer checks it" in text
    assert text.rstrip().endswith("2 got worse; 1 better, 1 measured, 1 added, 1 removed; exit 1")


def test_load_refuses_duplicate_gates(tmp_path: Path) -> None:
    path = write(tmp_path, "a.json", {"seals": passed(3, "t", "ok")})
    data = json.loads(Path(path).read_text())
    data["gates"] *= 2
    Path(path).write_text(json.dumps(data))
    with pytest.raises(ValidationError) as e:
        load(path)
    assert str(e.value) == f"{path}: gates: duplicate gate id seals (rule: one entry per gate)"
    with pytest.raises(ValidationError):
        load(str(tmp_path / "none.json"))
