"""The verdict's rows as people read them, one rule for the table, the Markdown and the HTML page.

- Order: fail, error, inconclusive, pass, skip (what needs attention first; catalogue order within a
  status). The JSON report keeps every gate in catalogue order: it is for machines.
- Gates whose stages this project's pipeline does not have (a project of its own: no thread launcher,
  export or pilot) are one line, "not in this pipeline: N gates", not N rows naming commands that do
  not exist there.
- A family (`pilot.*`, `loss_match.*`) states the threshold its members share once, in a legend; a
  row keeps only what is its own ("pilot.* + vs base: bitwise equal to the reference").
- A check a gate could not apply to the records is named in its row ("not applied: train mode: not
  recorded ..."), never passed over.
Works on the report's gate entries (dicts, contracts/schemas/gates_report.schema.json). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SEVERITY = {"fail": 0, "error": 1, "inconclusive": 2, "pass": 3, "skip": 4}
SEP = "; "
MIN_SHARED = 40  # a shared threshold head shorter than this is left in every row


def by_severity(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stable: catalogue order within a status."""
    return sorted(entries, key=lambda g: SEVERITY.get(g["status"], 0))


@dataclass(frozen=True)
class Rows:
    shown: list[dict[str, Any]]  # in display order
    absent: list[dict[str, Any]]  # not in this pipeline (collapsed into one line)
    thresholds: dict[str, str]  # per shown gate: its threshold as the row shows it
    legend: list[tuple[str, str]]  # (family, the threshold its rows share), stated once

    def absent_line(self) -> str | None:
        if not self.absent:
            return None
        stages = sorted({s for g in self.absent for s in g.get("not_in_pipeline", [])})
        n = len(self.absent)
        return (
            f"not in this pipeline: {n} gate{'s' if n != 1 else ''} (stages {', '.join(stages)}: not in "
            "dvc.yaml or dvc.lock, nothing to judge)"
        )


def family(gate_id: str) -> str:
    return gate_id.split(".", 1)[0]


def threshold_text(g: dict[str, Any], labels: dict[str, str] | None) -> str:
    """The gate's threshold as people read it: the catalogue's text where the report has a bare number."""
    t = g["threshold"]
    if isinstance(t, str):
        return t
    return (labels or {}).get(g["id"], "-" if t is None else f"{t:.3g}" if isinstance(t, float) else str(t))


def _parts(text: str) -> list[str]:
    """`text` split at "; " outside parentheses (a part's own "(...; ...)" stays whole)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0 and text.startswith(SEP, i):
            out.append(text[start:i])
            start = i + len(SEP)
    return [*out, text[start:]]


def _shared_head(texts: list[str]) -> list[str]:
    parts = [_parts(t) for t in texts]
    head: list[str] = []
    for column in zip(*parts, strict=False):
        if len(set(column)) != 1:
            break
        head.append(column[0])
    return head


def _thresholds_once(
    shown: list[dict[str, Any]], labels: dict[str, str] | None
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    text = {g["id"]: threshold_text(g, labels) for g in shown}
    members: dict[str, list[str]] = {}
    for g in shown:
        members.setdefault(family(g["id"]), []).append(g["id"])
    legend = []
    for fam, ids in members.items():
        head = _shared_head([text[i] for i in ids]) if len(ids) > 1 else []
        shared = SEP.join(head)
        if len(shared) < MIN_SHARED:
            continue
        legend.append((f"{fam}.*", shared))
        for i in ids:
            tail = text[i][len(shared) :].removeprefix(SEP)
            text[i] = f"{fam}.* (below)" + (f" + {tail}" if tail else "")
    return text, legend


def rows(entries: list[dict[str, Any]], labels: dict[str, str] | None = None) -> Rows:
    ordered = by_severity(entries)
    absent = [g for g in ordered if g.get("not_in_pipeline")]
    shown = [g for g in ordered if not g.get("not_in_pipeline")]
    thresholds, legend = _thresholds_once(shown, labels)
    return Rows(shown, absent, thresholds, legend)


def not_applied(g: dict[str, Any]) -> str:
    """'not applied: train mode: not recorded ...; dropout masks: ...', or '' when every check applied."""
    items = g.get("not_applied") or []
    return ("not applied: " + SEP.join(f"{i['check']}: {i['why']}" for i in items)) if items else ""


def entry(gid: str, outcome: Any) -> dict[str, Any]:
    """One gate's report entry from its Outcome (gates/outcome.py): the optional keys only where set."""
    out = {
        "id": gid,
        "status": outcome.status,
        "measured": outcome.measured,
        "threshold": outcome.threshold,
        "message": outcome.message,
        "artifacts": outcome.artifacts,
    }
    if outcome.not_applied:
        out["not_applied"] = [{"check": k, "why": v} for k, v in outcome.not_applied.items()]
    if outcome.not_in_pipeline:
        out["not_in_pipeline"] = list(outcome.not_in_pipeline)
    return out
