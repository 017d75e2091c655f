"""gates/reporting/html_report.py under mutation (docs/judge-mutation.md): the page, in-process.

The verdict table, the cards and the page are compared with the exact HTML a reader's browser gets
(every text escaped), built from small hand-written report entries; the pictures come from a recording
stand-in for pictures.draw (the drawing is tests/unit/test_judge_pictures_unit.py's; the real tree's page,
tests/pipeline/test_html_report.py's), except where the real gate's own refusal is the point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gates.judges import pictures
from gates.judges.gate import NoPicture, NothingMeasured, Picture
from gates.reading.artifacts import Artifacts
from gates.reading.dvclock import DvcLock
from gates.reporting import html_report, rows
from gates.reporting.html_report import (
    CSS,
    _anchor,
    _badge,
    _card,
    _figure,
    _not_applied_mark,
    _verdict_table,
)
from judge_trees import Tree


def gate(
    gid: str, status: str = "pass", measured: Any = 1, threshold: Any = "t", message: str = "m", **more
) -> dict:
    return {"id": gid, "status": status, "measured": measured, "threshold": threshold, "message": message,
            "artifacts": [], **more}  # fmt: skip


class Draw:
    """pictures.draw's stand-in: records (gate id, artifacts, thresholds); answers `result` or raises it."""

    def __init__(self, result: Picture | Exception) -> None:
        self.result, self.seen = result, []

    def __call__(self, g, a, t) -> Picture:
        self.seen.append((g.id, a, t))
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.fixture()
def draw(monkeypatch: pytest.MonkeyPatch) -> Draw:
    d = Draw(Picture("<svg>pic</svg>", "a <caption> & more"))
    monkeypatch.setattr(pictures, "draw", d)
    return d


# -- the small pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gid", "anchor"),
    [("seals", "gate-seals"), ("loss_match.thread", "gate-loss-match-thread"), ("a b/c<9", "gate-a-b-c-9")],
)
def test_an_anchor_keeps_letters_and_digits_and_dashes_the_rest(gid: str, anchor: str) -> None:
    assert _anchor(gid) == anchor


@pytest.mark.parametrize(
    ("status", "html"),
    [
        ("fail", "<span class='badge fail'>FAIL</span>"),
        ("in<x>", "<span class='badge in&lt;x&gt;'>IN&lt;X&gt;</span>"),
    ],
)
def test_a_badge_is_the_status_upper_cased_and_escaped(status: str, html: str) -> None:
    assert _badge(status) == html


@pytest.mark.parametrize(
    ("more", "mark"),
    [
        ({}, ""),
        ({"not_applied": None}, ""),
        ({"not_applied": []}, ""),
        ({"not_applied": [{"check": "a", "why": "b"}]}, " <span class='notapplied'>(1 not applied)</span>"),
        (
            {"not_applied": [{"check": "a", "why": "b"}] * 2},
            " <span class='notapplied'>(2 not applied)</span>",
        ),
    ],
)
def test_the_not_applied_mark_counts_the_checks_not_applied(more: dict, mark: str) -> None:
    assert _not_applied_mark(gate("g", **more)) == mark


# -- the verdict table --------------------------------------------------------------------------------

HEAD = "<table class='verdict'><tr><th>status</th><th>gate</th><th>measured</th><th>threshold</th></tr>"
SHARED = "cpu: loss within 1e-6 of the <reference> run"


def test_the_verdict_table_rows_in_severity_order_with_the_absent_line_and_the_legend() -> None:
    entries = [
        gate("pilot.a", measured=0.123456, threshold=f"{SHARED}; vs base: equal"),
        gate("pilot.b", measured=None, threshold=f"{SHARED}; vs base: other"),
        gate("export_md5", "skip", threshold=None, not_in_pipeline=["export"]),
        gate("x<y", "fail", measured="3 & 4", threshold=0.5, not_applied=[{"check": "c", "why": "w"}]),
    ]
    assert _verdict_table(rows.rows(entries, {"x<y": "at most <1> & no more"})) == (
        HEAD
        + "<tr class='fail'><td><span class='badge fail'>FAIL</span></td><td><a href='#gate-x-y'>x&lt;y</a> "
        "<span class='notapplied'>(1 not applied)</span></td><td>3 &amp; 4</td><td>at most &lt;1&gt; &amp; no more"
        "</td></tr>"
        "<tr class='pass'><td><span class='badge pass'>PASS</span></td><td><a href='#gate-pilot-a'>pilot.a</a></td>"
        "<td>0.123</td><td>pilot.* (below) + vs base: equal</td></tr>"
        "<tr class='pass'><td><span class='badge pass'>PASS</span></td><td><a href='#gate-pilot-b'>pilot.b</a></td>"
        "<td>-</td><td>pilot.* (below) + vs base: other</td></tr>"
        "<tr class='skip'><td><span class='badge skip'>SKIP</span></td><td colspan='3'>not in this pipeline: 1 gate "
        "(stages export: not in dvc.yaml or dvc.lock, nothing to judge)</td></tr></table>"
        "<p class='legend'>Threshold of <code>pilot.*</code>: cpu: loss within 1e-6 of the &lt;reference&gt; run</p>"
    )


def test_each_familys_shared_threshold_is_one_legend_line_in_row_order() -> None:
    own = "max rel 1e-5 against the single run, every step"
    entries = [gate("pilot.a", threshold=f"{SHARED}; vs base: equal"), gate("pilot.b", threshold=SHARED)]
    entries += [gate("loss_match.thread", threshold=own), gate("loss_match.proc", threshold=own)]
    table = _verdict_table(rows.rows(entries))
    assert table.endswith(
        "<td>loss_match.* (below)</td></tr></table>"
        "<p class='legend'>Threshold of <code>pilot.*</code>: cpu: loss within 1e-6 of the &lt;reference&gt; run</p>"
        f"<p class='legend'>Threshold of <code>loss_match.*</code>: {own}</p>"
    )


def test_a_verdict_table_without_absent_gates_or_a_family_is_its_rows_only() -> None:
    assert _verdict_table(rows.rows([gate("seals", "error", measured=2.0, threshold=3)])) == (
        HEAD
        + "<tr class='error'><td><span class='badge error'>ERROR</span></td><td><a href='#gate-seals'>seals</a>"
        "</td><td>2</td><td>3</td></tr></table>"
    )


# -- the cards ---------------------------------------------------------------------------------------


def test_a_card_shows_status_measured_threshold_message_and_the_picture(tmp_path: Path, draw: Draw) -> None:
    g = gate("seals", "inconclusive", measured=0.123456, threshold=1, message="noisy <windows> & more")
    a = tree(tmp_path)
    html = _card(g, a, {"t": 1}, rows.rows([g], {"seals": "a <label>"}))
    assert html == (
        "<section class='card inconclusive' id='gate-seals'><h2>seals<span class='badge inconclusive'>INCONCLUSIVE"
        "</span></h2><dl><dt>measured</dt><dd>0.123</dd><dt>threshold</dt><dd>a &lt;label&gt;</dd><dt>message</dt>"
        "<dd>noisy &lt;windows&gt; &amp; more</dd></dl><figure><svg>pic</svg><figcaption>a &lt;caption&gt; &amp; "
        "more</figcaption></figure></section>\n"
    )
    assert draw.seen == [("seals", a, {"t": 1})]


def test_a_card_names_the_checks_not_applied(draw: Draw) -> None:
    g = gate("x.y", "pass", measured="<m>", not_applied=[{"check": "train mode", "why": "not <recorded>"}])
    html = _card(g, "A", {}, rows.rows([g]))  # type: ignore[arg-type]
    assert html == (
        "<section class='card pass' id='gate-x-y'><h2>x.y<span class='badge pass'>PASS</span></h2><dl>"
        "<dt>measured</dt><dd>&lt;m&gt;</dd><dt>threshold</dt><dd>t</dd><dt>message</dt><dd>m</dd>"
        "<dt>checks</dt><dd class='notapplied'>not applied: train mode: not &lt;recorded&gt;</dd></dl>"
        "<p class='nopic'>No picture for this gate yet: its status, measured value, threshold and message are "
        "above.</p></section>\n"
    )
    assert draw.seen == []


# -- the picture of a card ----------------------------------------------------------------------------


def tree(tmp_path: Path, *stages: str) -> Any:
    return Tree(tmp_path, stages={s: {"cmd": "true", "outs": []} for s in stages}).artifacts()


def test_a_gate_this_code_does_not_know_has_no_picture(tmp_path: Path, draw: Draw) -> None:
    assert _figure("no.such.gate", tree(tmp_path), {}) == (
        "<p class='nopic'>No picture for this gate yet: its status, measured value, threshold and message are "
        "above.</p>"
    )
    assert draw.seen == []


@pytest.mark.parametrize(
    ("gid", "stages", "absent"),
    [
        ("loss_match.thread", ["train_single"], "train@thread"),
        ("launcher_parity", ["train_single"], "train@thread, train@proc"),
        ("launcher_parity", ["train@thread"], "train@proc"),
        ("export_md5", ["train_single"], "export"),
    ],
)
def test_a_gate_whose_stages_are_not_in_the_pipeline_has_nothing_to_draw(
    tmp_path: Path, draw: Draw, gid: str, stages: list[str], absent: str
) -> None:
    assert _figure(gid, tree(tmp_path, *stages), {}) == (
        f"<p class='nopic'>Nothing measured to draw: stage {absent} has not run: not in this project&#x27;s "
        "pipeline</p>"
    )
    assert draw.seen == []


def test_a_gate_in_the_pipeline_is_drawn_with_its_artifacts_and_thresholds(
    tmp_path: Path, draw: Draw
) -> None:
    a = tree(tmp_path, "train@thread", "train@proc")
    assert _figure("launcher_parity", a, {"t": 2}) == (
        "<figure><svg>pic</svg><figcaption>a &lt;caption&gt; &amp; more</figcaption></figure>"
    )
    assert draw.seen == [("launcher_parity", a, {"t": 2})]


@pytest.mark.parametrize(
    ("error", "html"),
    [
        (
            NothingMeasured("stage <x> has not run"),
            "<p class='nopic'>Nothing measured to draw: stage &lt;x&gt; has not run</p>",
        ),
        (
            NoPicture("artifact unreadable: <y>"),
            "<p class='nopic'>No picture: artifact unreadable: &lt;y&gt;</p>",
        ),
    ],
)
def test_a_picture_that_cannot_be_drawn_says_why(
    tmp_path: Path, draw: Draw, error: Exception, html: str
) -> None:
    draw.result = error
    assert _figure("seals", tree(tmp_path), {}) == html


def test_the_real_gates_refusal_is_shown_in_place_of_its_picture(tmp_path: Path) -> None:
    """perf.memory's own picture on a project whose dvc.lock lacks the stage dvc.yaml defines."""
    a = Artifacts(tmp_path, DvcLock(tmp_path, {}, pipeline={"train_single": ["runs/single"]}))
    assert _figure("perf.memory", a, {}) == (
        "<p class='nopic'>No picture: artifact unreadable: runs/single/metrics.json: dvc.lock has no entry for "
        "stage train_single, which dvc.yaml defines: restore dvc.lock (git checkout dvc.lock) or dvc repro "
        "train_single</p>"
    )


# -- the page -----------------------------------------------------------------------------------------

DVC_YAML = "stages:\n  train_single:\n    cmd: 'true'\n    outs:\n    - runs/single\n"
DVC_LOCK = "schema: '2.0'\nstages:\n  train_single:\n    cmd: 'true'\n    outs:\n    - path: runs/single\n      md5: 0.dir\n"


def report(
    code: int = 1, env_id: str | None = "linux-<env>", word: str = "fail", strict: bool = False
) -> dict:
    env = {"platform": "linux & x86", "python": "3.11.<7>"} | ({"training_env_id": env_id} if env_id else {})
    return {
        "exit_code": code,
        "verdict": word,
        "strict": strict,
        "summary": {"pass": 1, "fail": 1, "error": 0, "inconclusive": 2, "skip": 0},
        "environment": env,
        "git_revision": "abc<1>",
        "thresholds_source": "params.yaml & defaults",
        "gates": [
            gate("seals", threshold=0.25),
            gate("finite", "fail", measured=0.5, message="a NaN"),
        ],
    }


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    (tmp_path / "dvc.lock").write_text(DVC_LOCK)
    return tmp_path


def test_the_page_is_the_title_the_meta_line_the_table_and_a_card_per_gate(project: Path, draw: Draw) -> None:
    params = object()
    page = html_report.render(report(), project, {"t": 3}, {"seals": "<labelled>"}, params)
    view = rows.rows(report()["gates"], {"seals": "<labelled>"})
    assert page == (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>xtrain-gates: gate failure (exit 1)"
        f"</title><style>{CSS}</style></head><body>\n<h1>xtrain-gates: gate failure (exit 1)</h1>"
        "<p class='meta'>1 pass, 1 fail, 2 inconclusive · revision abc&lt;1&gt; · environment linux-&lt;env&gt; (linux &amp; x86, "
        "Python 3.11.&lt;7&gt;) · thresholds from params.yaml &amp; defaults</p>\n"
        f"{_verdict_table(view)}\n"
        + _card(report()["gates"][1], draw.seen[0][1], {"t": 3}, view)
        + _card(report()["gates"][0], draw.seen[0][1], {"t": 3}, view)
        + "</body></html>\n"
    )
    assert "<td>&lt;labelled&gt;</td>" in page and page.index("id='gate-finite'") < page.index(
        "id='gate-seals'"
    )
    assert [(gid, t) for gid, _, t in draw.seen] == [("finite", {"t": 3}), ("seals", {"t": 3})] * 2
    a = draw.seen[0][1]
    assert all(s[1] is a for s in draw.seen[:2]), "one Artifacts (one validation cache) per page"
    assert (a.root, a.params, list(a.lock.stages), a.lock.pipeline) == (
        project, params, ["train_single"], {"train_single": ["runs/single"]})  # fmt: skip


@pytest.mark.parametrize(
    ("code", "word", "strict", "verdict"),
    [
        (0, "pass", False, "all gates pass"),
        (1, "fail", False, "gate failure"),
        (2, "error", False, "missing or invalid artifact"),
        (2, "nothing judged", False, "nothing judged: every gate skipped"),
        (3, "inconclusive", False, "no gate failed, 2 inconclusive"),
        (1, "inconclusive", True, "no gate failed, 2 inconclusive: not a pass under --strict"),
    ],
)
def test_the_title_is_the_verdict_of_the_exit_code(
    project: Path, draw: Draw, code: int, word: str, strict: bool, verdict: str
) -> None:
    page = html_report.render(report(code, word=word, strict=strict), project, {})
    assert f"<title>xtrain-gates: {verdict} (exit {code})</title>" in page
    assert f"<h1>xtrain-gates: {verdict} (exit {code})</h1>" in page


def test_no_revision_and_no_environment_id_are_dashes_and_the_labels_default_to_none(
    project: Path, draw: Draw
) -> None:
    page = html_report.render(report(env_id=None) | {"git_revision": None}, project, {})
    assert (
        "1 pass, 1 fail, 2 inconclusive · revision - · environment - (linux &amp; x86, Python 3.11.&lt;7&gt;) · "
        in page
    )
    assert "<td>0.25</td>" in page and draw.seen[0][1].params is None


def test_without_dvc_lock_there_is_no_page(tmp_path: Path, draw: Draw) -> None:
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    with pytest.raises(Exception, match=r"dvc.lock: missing"):
        html_report.render(report(), tmp_path, {})
    assert draw.seen == []
