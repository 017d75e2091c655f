"""`gates check --html`: a picture per gate, failing gates first, deterministic, rendered by a real browser.

Uses the real artifact tree of tests/pipeline/test_gates.py (tiny config, built by the real code) and breaks one
thing per test, as those tests do. The browser test needs Debian's chromium (`apt-get install chromium`)
and skips with that reason without it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import test_gates
import yaml
from PIL import Image, ImageStat

from gate_tree import edit, seal
from gates.__main__ import main as gates_main
from gates.judges.outcome import Outcome
from gates.reporting import html_report, report
from params.config import load_params
from params.pilot_cells import CELLS, cells_for

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]
# the real artifact tree of tests/gate_tree.py (built once per session), copied per test
work = test_gates.work
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


@pytest.fixture()
def steady(work: Path) -> Path:
    """The tree with the scaling gate's timing limits opened: on a shared 2-core box the tiny
    benchmark's tokens/s is noise (seen: 86 vs 1,974 tok/s), and these tests are about the page."""
    path = work / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["gates"]["scaling"]["cpu"] = {"floors": {"2": 1e-6}, "band": 1.0, "max_spread": 100.0}
    path.write_text(yaml.safe_dump(params))
    return work


def page(root: Path, name: str = "page.html") -> tuple[int, str]:
    seal(root)  # the tree as the test edited it, judged by the gates' recomputation (not the seals)
    code = gates_main(["--root", str(root), "check", "--html", name])
    return code, (root / name).read_text()


def cards(html: str) -> dict[str, str]:
    """Each gate's card, by gate id, in page order."""
    found = re.findall(r"<section class='card (\w+)' id='gate-[^']*'><h2>([^<]+)<(.*?)</section>", html, re.S)
    return {gid: f"{status} {body}" for status, gid, body in found}


def test_every_gate_has_its_picture_on_the_real_tree(steady: Path) -> None:
    code, html = page(steady)
    assert code == 0
    by_id = cards(html)
    assert len(by_id) == 17 + len(CELLS)
    # the perf gates skip on a tree with no blessed perf baseline, the pilot cells the CPU profile does
    # not run skip too; every other gate passes
    cpu_cells = {f"pilot.{c}" for c in cells_for(load_params(steady / "params.yaml"))}
    skips = {
        gid for gid in by_id if gid.startswith("perf.") or (gid.startswith("pilot.") and gid not in cpu_cells)
    }
    assert all(c.startswith("skip " if gid in skips else "pass ") for gid, c in by_id.items())
    for gid, card in by_id.items():
        assert "<svg" in card or "<table class='files'>" in card, gid
        caption = re.search(r"<figcaption>(.*?)</figcaption>", card, re.S)
        assert caption and "Pass" in caption.group(1), gid
    assert "No picture" not in html
    # self-contained: no script, nothing fetched from a network
    assert "<script" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "svg.hashsalt" not in html and "<dc:date>" not in html


def test_a_failing_gate_is_shown_first_with_the_failure_marked(steady: Path) -> None:
    _, clean = page(steady, "clean.html")
    assert "first over" not in cards(clean)["loss_match.thread"]
    edit(
        steady / "runs/thread/metrics.json",
        lambda m: m["train_loss"].__setitem__(5, m["train_loss"][5] * 1.01),
    )
    code, html = page(steady)
    assert code == 1
    by_id = cards(html)
    first = next(iter(by_id))
    assert by_id[first].startswith("fail ")
    # all three fail (consistency: loss.csv no longer matches); catalogue order kept
    assert list(by_id)[:3] == ["consistency", "loss_match.thread", "launcher_parity"]
    verdict = html.split("<table class='verdict'>")[1].split("</table>")[0]
    assert verdict.index("FAIL") < verdict.index("PASS")
    card = by_id["loss_match.thread"]
    assert "first over: 5" in card  # drawn on the chart (SVG text)
    assert "First step over the line: 5." in card


@pytest.mark.parametrize(
    ("change", "gate", "clean", "broken"),
    [
        (
            lambda w: edit(
                w / "runs/single/metrics.json",
                lambda m: m["train_loss"].__setitem__(7, m["train_loss"][7] + 1e-6),
            ),
            "fresh_train",
            "0 of 12 steps differ",
            "1 of 12 steps differ",
        ),
        (
            lambda w: edit(
                w / "runs/proc/metrics.json", lambda m: m["grad_norm"].__setitem__(4, float("nan"))
            ),
            "finite",
            "grad norm): 0 here",
            "grad norm): 1 here",
        ),
    ],
    ids=["fresh_train", "finite"],
)
def test_pictures_are_drawn_from_the_artifacts(
    work: Path, change, gate: str, clean: str, broken: str
) -> None:
    _, html = page(work)
    assert clean in cards(html)[gate]
    change(work)
    _, html = page(work)
    by_id = cards(html)
    assert broken in by_id[gate] and by_id[gate].startswith("fail ")
    # failing gates come first (a NaN fails every gate that reads that run, not only `finite`)
    failing = [g for g, c in by_id.items() if c.startswith("fail ")]
    assert gate in failing and list(by_id)[: len(failing)] == failing


def test_a_gate_without_a_picture_gets_a_generic_card(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "dvc.yaml").write_text("stages: {}\n")
    (root / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    outcomes = {  # the failing gate last in the report, first on the page
        "scaling": Outcome("skip", None, None, "stage scaling has not run"),
        "mystery.gate": Outcome("fail", 0.81, 0.85, "steady tokens/s 19% below the baseline"),
    }
    rep = report.build(outcomes, root, "params.yaml", None)
    html = html_report.render(rep, root, {"scaling": {}})
    by_id = cards(html)
    assert list(by_id) == ["mystery.gate", "scaling"]
    assert "steady tokens/s 19% below the baseline" in by_id["mystery.gate"]
    assert "No picture for this gate yet" in by_id["mystery.gate"]
    assert "Nothing measured to draw: stage scaling has not run" in by_id["scaling"]


def test_the_page_is_deterministic(work: Path) -> None:
    page(work, "a.html")
    page(work, "b.html")
    assert (work / "a.html").read_bytes() == (work / "b.html").read_bytes()


def screenshot(url: str, out: Path, tmp: Path) -> Image.Image:
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        f"--screenshot={out}",
        "--window-size=1200,2000",
        url,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-2000:]
    return Image.open(out).convert("RGB")


def red_pixels(im: Image.Image) -> int:
    """Pixels of the FAIL colour (#c62828) in the top of the page, where the verdict table is."""
    rgb = np.asarray(im.crop((0, 0, im.width, 500))).astype(int)
    return int(((rgb[..., 0] > 170) & (rgb[..., 1] < 80) & (rgb[..., 2] < 80)).sum())


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} absent (apt-get install chromium)")
def test_the_page_renders_in_a_real_browser(steady: Path, tmp_path: Path) -> None:
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    control = screenshot(blank.as_uri(), tmp_path / "blank.png", tmp_path)
    assert ImageStat.Stat(control.convert("L")).var[0] < 1.0  # the measure can tell a blank page
    page(steady, "pass.html")
    passing = screenshot((steady / "pass.html").as_uri(), tmp_path / "pass.png", tmp_path)
    assert ImageStat.Stat(passing.convert("L")).var[0] > 500
    assert red_pixels(passing) == 0
    edit(
        steady / "runs/thread/metrics.json",
        lambda m: m["train_loss"].__setitem__(5, m["train_loss"][5] * 1.01),
    )
    page(steady, "fail.html")
    failing = screenshot((steady / "fail.html").as_uri(), tmp_path / "fail.png", tmp_path)
    assert red_pixels(failing) > 1000  # the FAIL badges and card border are visible at the top
