"""The verdict for people (a table) and for machines (reports/gates.json, schema-validated)."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from contracts import artifact_table
from gates.judges.outcome import STATUSES, Outcome
from gates.reporting import rows, verdict
from gates.reporting.ci_report import short

COLORS = {
    "pass": "green",
    "fail": "bold red",
    "inconclusive": "bold yellow",
    "skip": "yellow",
    "error": "bold magenta",
}


FORMAT = artifact_table.artifact("gates_report").format  # /2: exit 3, `verdict`, `strict` (CHANGELOG.md)


def exit_code(outcomes: dict[str, Outcome], strict: bool = False) -> int:
    """gates/reporting/verdict.py: error 2 > fail 1 > inconclusive 3 (1 with --strict) > pass 0; all skip: 2."""
    return verdict.exit_code(verdict.of(o.status for o in outcomes.values()), strict)


def _git_revision(root: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:  # no commit yet: git prints "HEAD" on stdout and fails
        return None
    return out.stdout.strip() or None


def build(
    outcomes: dict[str, Outcome],
    root: Path,
    thresholds_source: str,
    env_id: str | None,
    strict: bool = False,
) -> dict[str, Any]:
    word = verdict.of(o.status for o in outcomes.values())
    report = {
        "format": FORMAT,
        "exit_code": verdict.exit_code(word, strict),
        "verdict": word,
        "strict": strict,
        "summary": {s: sum(o.status == s for o in outcomes.values()) for s in STATUSES},
        "git_revision": _git_revision(root),
        "environment": {
            "platform": f"{sys.platform}-{platform.machine()}",
            "python": platform.python_version(),
            "training_env_id": env_id,
        },
        "thresholds_source": thresholds_source,
        "gates": [rows.entry(gid, o) for gid, o in outcomes.items()],
    }
    artifact_table.check("gates_report", report, "gates report")
    return report


def write(report: dict[str, Any], path: Path) -> None:
    artifact_table.write("gates_report", path, report)


def stdout_console() -> Console:
    """The terminal's width on a terminal, 160 columns in a log (CI); numbers not highlighted."""
    return Console(
        highlight=False,  # pragma: no mutate -- equivalent: mutmut's None is as falsy to rich as False
        width=None if sys.stdout.isatty() else 160,
    )


def print_table(
    outcomes: dict[str, Outcome],
    thresholds: dict[str, str],
    report_path: Path | None,
    console: Console | None = None,
    strict: bool = False,
) -> None:
    """`thresholds`: the catalogue's text per gate, shown where the outcome's threshold is a bare number.
    Rows as gates/reporting/rows.py orders and folds them: fail, error, inconclusive, pass, skip; gates not in
    this pipeline in one line; a family's shared threshold once, below the table."""
    console = console or stdout_console()
    view = rows.rows([rows.entry(gid, o) for gid, o in outcomes.items()], thresholds)
    table = Table(title="xtrain-gates")
    for col in ("gate", "status", "measured", "threshold", "artifacts"):
        table.add_column(
            col,
            overflow="fold",  # pragma: no mutate -- equivalent: rich folds a cell whose overflow is None
            no_wrap=col in ("gate", "status"),
        )
    for g in view.shown:
        arts = sorted({"/".join(p.split("/")[:2]) for p in g["artifacts"]})
        note = f" ({len(g['not_applied'])} not applied)" if g.get("not_applied") else ""
        table.add_row(
            g["id"],
            f"[{COLORS[g['status']]}]{g['status'].upper()}[/]{note}",
            short(g["measured"]),
            view.thresholds[g["id"]],
            ", ".join(arts) or "-",
        )
    console.print(table)
    for fam, shared in view.legend:
        console.print(f"threshold of {fam}: {shared}")
    if line := view.absent_line():
        console.print(f"[{COLORS['skip']}]{line}[/]")
    for g in view.shown:
        said = g["message"] if g["status"] != "pass" else rows.not_applied(g)
        if said:
            console.print(f"[{COLORS[g['status']]}]{g['status'].upper()}[/] {g['id']}: {said}")
    console.print(verdict_line(outcomes, report_path, strict), soft_wrap=True)  # one line, even in a log


VERDICT_STYLE = {
    "pass": "green",
    "fail": "bold red",
    "error": "bold magenta",
    "nothing judged": "bold magenta",
    "inconclusive": "bold yellow",
}


def verdict_line(outcomes: dict[str, Outcome], report_path: Path | None, strict: bool = False) -> str:
    """The table's last line: the verdict in words, the count per status, the report, the exit code;
    when every gate skipped, why, and what to do (exit 2)."""
    word = verdict.of(o.status for o in outcomes.values())
    counts = {s: sum(o.status == s for o in outcomes.values()) for s in STATUSES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no gate"
    said = f"[{VERDICT_STYLE[word]}]{verdict.headline(word, counts, strict)}[/] ({summary})"
    if word == "nothing judged":
        entries = [rows.entry(gid, o) for gid, o in outcomes.items()]  # pragma: no mutate -- equivalent: no id read  # fmt: skip
        why = verdict.nothing_judged(entries)
        said += (
            f": {escape(why)}; next: dvc repro the stages these gates read, or --only gates whose stages ran"
        )
    where = f"; report: {report_path}" if report_path else ""
    return f"{said}{where}; exit {verdict.exit_code(word, strict)}"
