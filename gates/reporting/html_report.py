"""`python -m gates check --html PATH`: one self-contained page, a picture per gate.

The verdict table on top, rows as gates/reporting/rows.py orders and folds them (fail, error, inconclusive,
pass, skip; the gates not in this pipeline in one row; a family's shared threshold once, under the
table), then one card per gate in the same order: status, measured, threshold, message, the checks
not applied, and the picture of what it judged against its threshold (drawn by the gate's own module:
gates/judges/gate.py `Gate.picture`). Self-contained: inline SVG and CSS, no script, no network. Deterministic:
the same artifacts give the same bytes (no timestamps; see gates/judges/plots.py).
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from gates.judges import catalogue, pictures
from gates.reading.artifacts import Artifacts, DvcLock
from gates.reporting import rows, verdict
from gates.reporting.ci_report import short

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#212121;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:0}
.meta{color:#616161;margin:0 0 14px} table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #e0e0e0;padding:4px 8px;text-align:left;vertical-align:top}
.badge{display:inline-block;min-width:92px;text-align:center;border-radius:4px;font-weight:600;
  color:#fff;padding:1px 6px}
.pass .badge,.badge.pass{background:#2e7d32} .fail .badge,.badge.fail{background:#c62828}
.inconclusive .badge,.badge.inconclusive{background:#f9a825;color:#212121}
.skip .badge,.badge.skip{background:#9e9e9e} .error .badge,.badge.error{background:#6a1b9a}
.card{border:1px solid #e0e0e0;border-left:8px solid #9e9e9e;border-radius:6px;margin:18px 0;padding:12px 16px}
.card.pass{border-left-color:#2e7d32} .card.fail{border-left-color:#c62828}
.card.inconclusive{border-left-color:#f9a825} .card.error{border-left-color:#6a1b9a}
.card h2 .badge{margin-left:10px;font-size:13px} dl{display:grid;grid-template-columns:90px 1fr;margin:8px 0}
dt{color:#616161} dd{margin:0} figure{margin:8px 0 0} svg{width:100%;height:auto}
figcaption{color:#424242;font-size:13px;margin-top:4px} .nopic{color:#757575;font-style:italic}
.files tr.bad td{background:#ffebee} .files tr.ok td:last-child{color:#2e7d32}
.files tr.bad td:last-child{color:#c62828;font-weight:600}
code{font-size:12px} .legend{color:#424242;font-size:13px;margin:6px 0} .notapplied{color:#6d4c41}
"""


def _anchor(gate_id: str) -> str:
    return "gate-" + "".join(c if c.isalnum() else "-" for c in gate_id)


def _badge(status: str) -> str:
    return f"<span class='badge {escape(status)}'>{escape(status.upper())}</span>"


def _verdict_table(view: rows.Rows) -> str:
    body = "".join(
        f"<tr class='{escape(g['status'])}'><td>{_badge(g['status'])}</td>"
        f"<td><a href='#{_anchor(g['id'])}'>{escape(g['id'])}</a>{_not_applied_mark(g)}</td>"
        f"<td>{escape(short(g['measured']))}</td><td>{escape(view.thresholds[g['id']])}</td></tr>"
        for g in view.shown
    )
    if line := view.absent_line():
        body += f"<tr class='skip'><td>{_badge('skip')}</td><td colspan='3'>{escape(line)}</td></tr>"
    head = "<tr><th>status</th><th>gate</th><th>measured</th><th>threshold</th></tr>"
    legend = "".join(
        f"<p class='legend'>Threshold of <code>{escape(fam)}</code>: {escape(shared)}</p>"
        for fam, shared in view.legend
    )
    return f"<table class='verdict'>{head}{body}</table>{legend}"


def _not_applied_mark(g: dict[str, Any]) -> str:
    n = len(g.get("not_applied") or [])
    return f" <span class='notapplied'>({n} not applied)</span>" if n else ""


def _figure(gate_id: str, a: Artifacts, thresholds: dict[str, Any]) -> str:
    gate = catalogue.find(gate_id)
    if gate is None:  # a report of other code, naming a gate this code does not know
        return (
            "<p class='nopic'>No picture for this gate yet: its status, measured value, threshold and "
            "message are above.</p>"
        )
    if absent := catalogue.not_in_pipeline(gate, a.lock.in_pipeline):  # as the check skipped it
        where = f"stage {', '.join(absent)} has not run: not in this project's pipeline"
        return f"<p class='nopic'>Nothing measured to draw: {escape(where)}</p>"
    try:
        pic = pictures.draw(gate, a, thresholds)
    except pictures.NothingMeasured as e:
        return f"<p class='nopic'>Nothing measured to draw: {escape(str(e))}</p>"
    except pictures.NoPicture as e:
        return f"<p class='nopic'>No picture: {escape(str(e))}</p>"
    return f"<figure>{pic.html}<figcaption>{escape(pic.caption)}</figcaption></figure>"


def _card(g: dict[str, Any], a: Artifacts, thresholds: dict[str, Any], view: rows.Rows) -> str:
    skipped = rows.not_applied(g)
    return (
        f"<section class='card {escape(g['status'])}' id='{_anchor(g['id'])}'>"
        f"<h2>{escape(g['id'])}{_badge(g['status'])}</h2><dl>"
        f"<dt>measured</dt><dd>{escape(short(g['measured']))}</dd>"
        f"<dt>threshold</dt><dd>{escape(view.thresholds[g['id']])}</dd>"
        f"<dt>message</dt><dd>{escape(g['message'])}</dd>"
        + (f"<dt>checks</dt><dd class='notapplied'>{escape(skipped)}</dd>" if skipped else "")
        + f"</dl>{_figure(g['id'], a, thresholds)}</section>\n"
    )


def render(
    report: dict[str, Any],
    root: Path,
    thresholds: dict[str, Any],
    labels: dict[str, str] | None = None,
    params: Any = None,
) -> str:
    """The page for a gates report, drawn from the artifacts under `root`; `labels`: the catalogue's
    threshold text per gate, shown where the report has a bare number; `params`: the resolved params
    the gates judged against (the pictures select goldens and versions the way the gates do)."""
    # Artifacts validates each file once per page (its cache), although several pictures read it.
    artifacts = Artifacts(root, DvcLock.read(root), params)
    view = rows.rows(report["gates"], labels)
    code = report["exit_code"]
    counts = ", ".join(f"{n} {s}" for s, n in report["summary"].items() if n)
    env = report["environment"]
    word, strict = verdict.of_report(report)
    title = f"xtrain-gates: {verdict.headline(word, report['summary'], strict)} (exit {code})"
    cards = "".join(_card(g, artifacts, thresholds, view) for g in view.shown)
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{CSS}</style></head><body>\n<h1>{escape(title)}</h1>"
        f"<p class='meta'>{escape(counts)} · revision {escape(short(report['git_revision']))} · "
        f"environment {escape(short(env.get('training_env_id')))} ({escape(env['platform'])}, Python "
        f"{escape(env['python'])}) · thresholds from {escape(report['thresholds_source'])}</p>\n"
        f"{_verdict_table(view)}\n{cards}</body></html>\n"
    )
