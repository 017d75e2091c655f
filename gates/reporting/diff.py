"""`python -m gates diff A.json B.json`: what changed between two gate reports.

Each gate's status and measured value side by side, gates added and removed. A gate got worse when
its status moved down pass > skip > inconclusive > fail = error (pass -> skip counts: the gate is no
longer checked), when a gate new in B does not pass or skip, or when B no longer has it at all: a
removed gate is no longer checked, and one that did not pass in A is a failure hidden, not fixed,
named first of all (`gates diff` of a report with 25 of 27 gates gone said "0 got worse; exit 0").
Exit 0 nothing got worse, 1 something did, 2 a report is missing or invalid (one line naming the file).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from contracts import artifact_table
from contracts.errors import shown
from contracts.validate import ValidationError
from gates.reporting.ci_report import short
from gates.reporting.report import COLORS, stdout_console

RANK = {"pass": 0, "skip": 1, "inconclusive": 2, "fail": 3, "error": 3}


@dataclass(frozen=True)
class Change:
    id: str
    before: dict[str, Any] | None  # None: the gate is new in B
    after: dict[str, Any] | None  # None: the gate was removed

    @property
    def worse(self) -> bool:
        if self.after is None:  # B does not judge it: coverage lost, or a failure hidden
            return True
        if self.before is None:
            return RANK[self.after["status"]] >= RANK["inconclusive"]
        return RANK[self.after["status"]] > RANK[self.before["status"]]

    @property
    def hides_failure(self) -> bool:
        """Removed from B while it did not pass in A: the worst change a diff can show."""
        return (
            self.after is None
            and self.before is not None
            and RANK[self.before["status"]] >= RANK["inconclusive"]
        )

    @property
    def kind(self) -> str:
        if self.before is None or self.after is None:
            return "added" if self.before is None else "removed"
        b, a = RANK[self.before["status"]], RANK[self.after["status"]]
        if a != b:
            return "worse" if a > b else "better"
        if self.before["status"] != self.after["status"]:
            return "changed"
        return "same" if _same(self.before["measured"], self.after["measured"]) else "measured"


def _same(x: Any, y: Any) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))


def load(path: str) -> dict[str, Any]:
    report = artifact_table.read("gates_report", path)
    ids = [g["id"] for g in report["gates"]]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValidationError(path, "gates", f"duplicate gate id {', '.join(dup)}", "one entry per gate")
    return report


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """One change per gate in A or B, in A's order then B's new gates."""
    before = {g["id"]: g for g in a["gates"]}
    after = {g["id"]: g for g in b["gates"]}
    ids = list(before) + [i for i in after if i not in before]
    return [Change(i, before.get(i), after.get(i)) for i in ids]


def _delta(x: Any, y: Any) -> str:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
    if not numbers or x == y:
        return ""
    if x and math.isfinite(x) and math.isfinite(y):
        return f"{y - x:+.3g} (x{y / x:.3g})"
    return f"{y - x:+.3g}"


def _status(status: str) -> str:
    return f"[{COLORS[status]}]{status.upper()}[/]" if status in COLORS else shown(status, markup=True)


def print_diff(changes: list[Change], a_path: str, b_path: str, console: Console | None = None) -> None:
    console = console or stdout_console()
    table = Table(title=f"gates diff: {shown(a_path, True)} -> {shown(b_path, True)}")  # paths, not markup
    for col in ("gate", "A", "B", "A measured", "B measured", "change"):
        table.add_column(
            col,
            overflow="fold",  # pragma: no mutate -- equivalent: rich folds a cell whose overflow is None
            no_wrap=col in ("gate", "A", "B"),
        )
    for c in changes:
        sa = c.before["status"] if c.before else "-"
        sb = c.after["status"] if c.after else "-"
        ma = c.before["measured"] if c.before else None
        mb = c.after["measured"] if c.after else None
        kind = c.kind + (f" {_delta(ma, mb)}" if c.kind == "measured" else "")
        table.add_row(  # a report's own text: neither markup nor terminal escapes (contracts.errors.shown)
            shown(c.id, markup=True),
            _status(sa),
            _status(sb),
            shown(short(ma), markup=True),
            shown(short(mb), markup=True),
            f"[bold red]{kind}[/]" if c.worse else kind,
        )
    console.print(table)
    for c in sorted((c for c in changes if c.worse), key=_severity):  # a hidden failure first
        console.print(f"[bold red]WORSE[/] {shown(c.id, True)}: {_why(c)}")
    worse = sum(c.worse for c in changes)
    hidden = sum(c.hides_failure for c in changes)
    kinds = ("better", "changed", "measured", "added", "removed")
    counts = {k: sum(c.kind == k for c in changes) for k in kinds}
    summary = ", ".join(f"{n} {k}" for k, n in counts.items() if n) or (
        "nothing else" if worse else "no change"
    )
    hides = f" ({hidden} removed while not passing: failures hidden, not fixed)" if hidden else ""
    console.print(f"{worse} got worse{hides}; {summary}; exit {1 if worse else 0}")


def _severity(c: Change) -> int:
    """WORSE lines in this order: failures hidden by removal, gates that got worse, gates removed."""
    return 0 if c.hides_failure else 2 if c.after is None else 1  # pragma: no mutate -- equivalent: any 2 < n


def _why(c: Change) -> str:
    """The WORSE line's reason: B's message, or what removing the gate lost (rich markup escaped)."""
    if c.after is not None:
        return shown(c.after["message"], True)
    assert c.before is not None  # a change has at least one side (compare)
    was = f"{c.before['status'].upper()} in A"
    if c.hides_failure:
        return f"removed from B while {was}: its failure is hidden, not fixed ({shown(c.before['message'], True)})"
    return f"removed from B ({was}): B no longer checks it"


def run(a_path: str, b_path: str) -> int:
    changes = compare(load(a_path), load(b_path))
    print_diff(changes, a_path, b_path)
    return 1 if any(c.worse for c in changes) else 0
