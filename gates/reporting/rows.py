"""The verdict's rows as people read them, one rule for the table, the Markdown and the HTML page.

- Order: fail, error, inconclusive, pass, skip (what needs attention first; catalogue order within a
  status). The JSON report keeps every gate in catalogue order: it is for machines.
- Gates whose stages this project's pipeline does not have (a project of its own: no thread launcher,
  export or pilot) are one line, "not in this pipeline: N gates", not N rows naming commands that do
  not exist there.
- A family (`pilot.*`, `loss_match.*`) states its threshold once, in a legend: per bound (the text
  before a colon: "cpu", "cuda", "vs base"), what most members state; a row keeps only what is its
  own ("pilot.* (below) + vs base: bitwise equal to the reference", "... + no vs base").
- A check a gate could not apply to the records is named in its row ("not applied: train mode: not
  recorded ..."), never passed over.
Works on the report's gate entries (dicts, contracts/schemas/gates_report.schema.json). Torch-free.
"""

from __future__ import annotations

from collections import Counter
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
    return gate_id.partition(".")[0]


def threshold_text(g: dict[str, Any], labels: dict[str, str] | None) -> str:
    """The gate's threshold as people read it: the catalogue's text where the report has a bare number."""
    t = g["threshold"]
    if isinstance(t, str):
        return t
    return (labels or {}).get(g["id"], "-" if t is None else f"{t:.3g}" if isinstance(t, float) else str(t))


def _parts(text: str) -> list[tuple[str, str]]:
    """`text` split at every "; " into (key, part): the key is what a part states a bound for (the text
    before its first colon: "cpu", "vs base"), or the part itself."""
    out = []
    for part in text.split(SEP):
        head, colon, _ = part.partition(":")
        out.append((head if colon and len(head) <= 40 else part, part))
    return out


def _balanced(part: str) -> str:
    """A part shown alone: a parenthesis opened or closed in a neighbouring part dropped."""
    opened, closed = part.count("("), part.count(")")
    part = part[::-1].replace(")", "", max(closed - opened, 0))[::-1]  # the last closing ones
    part = part.replace("(", "", max(opened - closed, 0))  # the first opening ones
    return part.strip()


def _shared(texts: list[str]) -> list[tuple[str, str]]:
    """The family's threshold: per key, the bound that more than half of the members state word for
    word (each member counted once); keys without one stay in the rows."""
    counts: dict[str, Counter[str]] = {}
    for text in texts:
        for key, part in dict(_parts(text)).items():  # a key stated twice in one text counts once
            counts.setdefault(key, Counter())[part] += 1
    majority = [(key, c.most_common()[0]) for key, c in counts.items()]
    return [(key, part) for key, (part, n) in majority if n * 2 > len(texts)]


def _own(text: str, shared: list[tuple[str, str]]) -> str:
    """What a member states beyond the family's threshold: its other bounds, and the keys it lacks."""
    mine = _parts(text)
    keys = {k for k, _ in mine}
    common = dict(shared)
    differs = [_balanced(p) for k, p in mine if common.get(k) != p]
    lacks = [k for k, _ in shared if k not in keys]
    return SEP.join(differs + ([f"no {', '.join(lacks)}"] if lacks else []))


def _thresholds_once(
    shown: list[dict[str, Any]], labels: dict[str, str] | None
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    text = {g["id"]: threshold_text(g, labels) for g in shown}
    members: dict[str, list[str]] = {}
    for g in shown:
        members.setdefault(family(g["id"]), []).append(g["id"])
    legend = []
    for fam, ids in members.items():
        shared = _shared([text[i] for i in ids]) if len(ids) > 1 else []
        said = SEP.join(p for _, p in shared)
        if len(said) < MIN_SHARED:
            continue
        legend.append((f"{fam}.*", said))
        for i in ids:
            own = _own(text[i], shared)
            text[i] = f"{fam}.* (below)" + (f" + {own}" if own else "")
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
    """One gate's report entry from its Outcome (gates/judges/outcome.py): the optional keys only where set."""
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
