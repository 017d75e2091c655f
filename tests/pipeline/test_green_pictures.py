"""Every gate draws its picture in every tier and status it can report (issue #23 item 2).

The real artifact tree of tests/gate_tree.py (tiny config, built by the real code) is changed per
case the way a real run or a real registry would be (a moved loss, a golden of another environment,
a perf baseline blessed by the real bless code, ...). Each case names the gate, the status it must
get and a piece of its message (so the case really is that tier and status), then the gate's card
in the HTML report must hold a picture: an SVG or a file table, never "No picture". A gate whose
stage is not in the pipeline is a skip folded into one row of the verdict table, with no card.
The negative control: a picture function that raises is found by the same check.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gate_tree import bless_golden_as, copy_tree, edit, seal, unbless, write_pipeline
from gates.__main__ import main as gates_main
from gates.judges import catalogue
from registry.__main__ import main as registry_main

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]

Change = Callable[[Path], None]


def set_params(root: Path, change: Callable[[dict], object]) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    change(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def open_scaling(root: Path) -> None:
    """The tiny benchmark's tokens/s is noise on a shared box: its limits wide open (the page is tested)."""
    set_params(
        root,
        lambda p: p["gates"]["scaling"].update(cpu={"floors": {"2": 1e-6}, "band": 1.0, "max_spread": 100.0}),
    )


def run(name: str, change: Callable[[dict], object]) -> Change:
    return lambda root: edit(root / f"runs/{name}/metrics.json", change)


def step_times(root: Path, seconds: Callable[[int], float]) -> None:
    """Every training stage's timed windows set to `seconds(i)` (a machine of known speed)."""
    for name in ("single", "thread", "proc"):
        edit(
            root / f"runs/{name}/metrics.json",
            lambda m: [w.update(seconds=seconds(i)) for i, w in enumerate(m["perf"]["windows"])],
        )


def peaks(root: Path, factor: float) -> None:
    for name in ("single", "thread", "proc"):
        edit(
            root / f"runs/{name}/metrics.json",
            lambda m: [
                r.update(bytes=int(r["bytes"] * factor)) for r in m["perf"]["peak_memory"]["per_rank"]
            ],
        )


def perf_baseline(then: Callable[[Path], None] | None = None) -> Change:
    """A perf baseline blessed by the real bless code from steady 0.1 s windows, throughput judged."""

    def apply(root: Path) -> None:
        step_times(root, lambda i: 0.1)
        assert (
            registry_main(
                [
                    "--root",
                    str(root / "registry"),
                    "--params",
                    str(root / "params.yaml"),
                    "bless",
                    "--perf",
                    "--runs",
                    str(root / "runs"),
                    "--reason",
                    "picture test",
                ]
            )
            == 0
        )
        set_params(root, lambda p: p["gates"]["perf"]["cpu"].pop("throughput", None))
        if then:
            then(root)

    return apply


def other_env_golden_only(then: Callable[[Path], None] | None = None) -> Change:
    """The golden only under another environment's name: the approximate tier."""

    def apply(root: Path) -> None:
        own = next((root / "registry" / "goldens").iterdir())
        bless_golden_as(root, "cpu-made-up-env-for-tests")
        unbless(root, own)  # the registry's index must not know it either (issue #27)
        if then:
            then(root)

    return apply


def no_golden(policy: str) -> Change:
    def apply(root: Path) -> None:
        unbless(root, root / "registry" / "goldens")
        set_params(root, lambda p: p["gates"]["fresh_train"].update(unblessed=policy))

    return apply


def golden_of_another_config(root: Path) -> None:
    """This environment's golden, blessed (by the real bless code) for another config hash."""
    unbless(root, root / "registry" / "goldens")
    m = json.loads((root / "runs/single/metrics.json").read_text())
    m["config_hash"] = "0123456789abcdef"
    other = root / "other-config-metrics.json"
    other.write_text(json.dumps(m))
    assert (
        registry_main(
            [
                "--root",
                str(root / "registry"),
                "--params",
                str(root / "params.yaml"),
                "bless",
                "--golden",
                "--metrics",
                str(other),
                "--export",
                str(root / "exports/fresh"),
                "--reason",
                "another config",
            ]
        )
        == 0
    )
    other.unlink()


def export_file(folder: str, name: str, change: Callable[[bytes], bytes]) -> Change:
    """An export file changed and its manifest updated to match: a consistent export, other bytes."""

    def apply(root: Path) -> None:
        path = root / "exports" / folder / name
        data = change(path.read_bytes())
        path.chmod(0o644)
        path.write_bytes(data)
        edit(
            root / "exports" / folder / "manifest.json",
            lambda m: m["files"][name].update(md5=hashlib.md5(data).hexdigest(), bytes=len(data)),
        )

    return apply


def closed_loop_logits(root: Path) -> None:
    def change(r: dict) -> None:
        for e in r["engines"].values():
            e["check"]["samples"][0]["logits_max_abs_diff"] = 0.5

    edit(root / "reports/closed_loop.json", change)


def loss(name: str, step: int, factor: float, count: int = 1) -> Change:
    """`count` train losses from `step` on multiplied by `factor`."""
    return run(
        name,
        lambda m: [
            m["train_loss"].__setitem__(s, m["train_loss"][s] * factor) for s in range(step, step + count)
        ],
    )


def cut(m: dict) -> None:
    for key in ("train_loss", "grad_norm", "lr"):
        m[key] = m[key][:10]
    m["steps"] = 10


def claim_world_1(root: Path) -> None:
    set_params(root, lambda p: p["launchers"]["thread"].update(world=1))

    def one(m: dict) -> None:
        m["world"] = 1
        m["cross_rank"]["per_rank"] = m["cross_rank"]["per_rank"][:1]
        m["cross_rank"]["max_abs_diff"] = 0.0
        # every per-rank list of a world-1 run has one rank (the gates check the world against them)
        m["perf"]["peak_memory"]["per_rank"] = m["perf"]["peak_memory"]["per_rank"][:1]

    edit(root / "runs/thread/metrics.json", one)


def scaling_slow(s: dict) -> None:
    r1, r = s["results"]["proc"]["1"], s["results"]["proc"]["2"]
    r["windows"] = [x * 0.01 for x in r1["windows"]]
    r.update(tokens_per_s=r1["tokens_per_s"] * 0.01, speedup=0.01, efficiency=0.005)


def scaling_spread(root: Path) -> None:
    def spread(s: dict) -> None:
        r1, r = s["results"]["thread"]["1"], s["results"]["thread"]["2"]
        base = r1["tokens_per_s"]
        r["windows"] = [base * 0.62, base * 4.58]
        med = base * 2.6
        r.update(tokens_per_s=med, speedup=med / base, spread=(r["windows"][1] - r["windows"][0]) / med)

    edit(root / "bench/scaling.json", spread)
    set_params(root, lambda p: p["gates"]["scaling"]["cpu"].update(max_spread=0.5))


def scaling_never_ran(root: Path) -> None:
    """A pipeline without the scaling stage (dvc.yaml and dvc.lock), its folder gone: skip, not error
    (a stage dvc.yaml defines but dvc.lock lacks is an error since the seals, issue #27)."""
    shutil.rmtree(root / "bench")
    write_pipeline(root, ["train_single", "train@thread", "train@proc", "export", "closed_loop"])


def dropout_unscaled(r: dict) -> None:
    d = r["dropout_mean"]
    d["sum_out"] = float(d["n"] - d["dropped"])  # kept elements stay 1: no 1/(1-p)


def dropout_6_sigma(r: dict) -> None:
    d = r["dropout_mean"]
    d["dropped"] = round(d["n"] * d["p"] + 6 * (d["n"] * d["p"] * (1 - d["p"])) ** 0.5)
    d["sum_out"] = (d["n"] - d["dropped"]) / (1 - d["p"])  # the mean of a correct dropout of that draw


def nothing(root: Path) -> None:
    pass


def other_machine(m: dict) -> None:
    m["env"]["dispatch_facts"]["cpu"]["model_name"] = "Other CPU"  # a run restored from another machine


# case -> (change, gate id, status, a piece of the gate's message naming the tier or cause)
CASES: dict[str, tuple[Change, str, str, str]] = {
    "loss_match.thread pass": (nothing, "loss_match.thread", "pass", ""),
    "loss_match.thread fail": (loss("thread", 5, 1.01), "loss_match.thread", "fail", ""),
    "loss_match.proc pass": (nothing, "loss_match.proc", "pass", ""),
    "loss_match.proc fail, 10 of 12 steps": (run("proc", cut), "loss_match.proc", "fail", "steps 10"),
    "launcher_parity pass": (nothing, "launcher_parity", "pass", ""),
    "launcher_parity fail": (loss("proc", 5, 1.01), "launcher_parity", "fail", ""),
    "cross_rank.thread pass": (nothing, "cross_rank.thread", "pass", ""),
    "cross_rank.thread fail": (run("thread", lambda m: [r.update(max_abs_diff=0.5) for r in m["cross_rank"]["per_rank"][1:]] and m["cross_rank"].update(max_abs_diff=0.5)), "cross_rank.thread", "fail", ""),
    "cross_rank.thread skip, world 1": (claim_world_1, "cross_rank.thread", "skip", "world 1"),
    "cross_rank.proc pass": (nothing, "cross_rank.proc", "pass", ""),
    "export_md5 pass": (nothing, "export_md5", "pass", ""),
    "export_md5 fail": (export_file("pinned", "config.json", lambda b: b.replace(b"{", b"{ ", 1)), "export_md5", "fail", ""),
    "fresh_train exact pass": (nothing, "fresh_train", "pass", "exact tier"),
    "fresh_train exact fail": (loss("single", 7, 1 + 1e-6), "fresh_train", "fail", "exact tier"),
    "fresh_train approximate pass": (other_env_golden_only(), "fresh_train", "pass", "approximate tier"),
    "fresh_train approximate fail": (other_env_golden_only(loss("single", 5, 1.01, count=3)), "fresh_train", "fail", "approximate tier"),
    "fresh_train unblessed fail": (no_golden("fail"), "fresh_train", "fail", "unblessed"),
    "fresh_train unblessed skip": (no_golden("skip"), "fresh_train", "skip", "unblessed"),
    "fresh_train golden of another config": (golden_of_another_config, "fresh_train", "fail", "needs a new golden"),
    "closed_loop pass": (nothing, "closed_loop", "pass", ""),
    "closed_loop fail": (closed_loop_logits, "closed_loop", "fail", ""),
    "finite pass": (nothing, "finite", "pass", ""),
    "finite fail": (loss("proc", 4, float("nan")), "finite", "fail", ""),
    "scaling pass": (open_scaling, "scaling", "pass", ""),
    "scaling fail": (lambda root: edit(root / "bench/scaling.json", scaling_slow), "scaling", "fail", ""),
    "scaling inconclusive": (scaling_spread, "scaling", "inconclusive", "quiet machine"),
    "export_gguf pass": (nothing, "export_gguf", "pass", ""),
    "export_gguf fail": (export_file("fresh", "model.gguf", lambda b: b[:-64] + bytes(64)), "export_gguf", "fail", ""),
    "model_probes pass": (nothing, "model_probes", "pass", ""),
    "model_probes fail": (lambda root: edit(root / "runs/probes.json", dropout_unscaled), "model_probes", "fail", "Dropout"),
    "model_probes inconclusive": (lambda root: edit(root / "runs/probes.json", dropout_6_sigma), "model_probes", "inconclusive", "between z"),
    "perf.throughput skip, CPU policy": (nothing, "perf.throughput", "skip", "throughput is skip"),
    "perf.throughput skip, no baseline": (lambda root: set_params(root, lambda p: p["gates"]["perf"]["cpu"].pop("throughput")), "perf.throughput", "skip", "no perf baseline"),
    "perf.throughput pass": (perf_baseline(), "perf.throughput", "pass", ""),
    "perf.throughput fail": (perf_baseline(lambda root: step_times(root, lambda i: 1.0)), "perf.throughput", "fail", ""),
    "perf.throughput inconclusive": (perf_baseline(lambda root: step_times(root, lambda i: 0.1 if i % 2 else 0.3)), "perf.throughput", "inconclusive", ""),
    "perf.memory skip, no baseline": (nothing, "perf.memory", "skip", "no perf baseline"),
    "perf.memory pass": (perf_baseline(), "perf.memory", "pass", ""),
    "perf.memory fail": (perf_baseline(lambda root: peaks(root, 2.0)), "perf.memory", "fail", ""),
    "provenance pass": (nothing, "provenance", "pass", ""),
    "provenance fail": (lambda root: edit(root / "runs/thread/metrics.json", other_machine), "provenance", "fail", "was made on machine"),
}  # fmt: skip

# What each gate can report, by the gates' code (stage-not-run skips aside: nothing was measured).
REPORTS = {
    "loss_match.thread": {"pass", "fail"},
    "loss_match.proc": {"pass", "fail"},
    "launcher_parity": {"pass", "fail"},
    "cross_rank.thread": {"pass", "fail", "skip"},
    "cross_rank.proc": {"pass"},  # its fail and skip are the thread cases' code path
    "export_md5": {"pass", "fail"},
    "fresh_train": {"pass", "fail", "skip"},
    "closed_loop": {"pass", "fail"},
    "finite": {"pass", "fail"},
    "scaling": {"pass", "fail", "inconclusive"},
    "export_gguf": {"pass", "fail"},
    "model_probes": {"pass", "fail", "inconclusive"},
    "provenance": {"pass", "fail"},
    "perf.throughput": {"pass", "fail", "inconclusive", "skip"},
    "perf.memory": {"pass", "fail", "skip"},
}
TIERS = {"exact tier", "approximate tier", "unblessed"}  # fresh_train's, each with pass and fail


def card(html: str, gid: str) -> str:
    found = re.search(
        rf"<section class='card \w+' id='gate-[^']*'><h2>{re.escape(gid)}<(.*?)</section>", html, re.S
    )
    assert found, f"no card for {gid}"
    return found.group(1)


def holes(html: str) -> list[str]:
    """Gate ids whose card has no picture (an SVG or a file table) or says "No picture"."""
    found = re.findall(r"<section class='card \w+' id='gate-[^']*'><h2>([^<]+)<(.*?)</section>", html, re.S)
    return [
        gid for gid, body in found
        if "No picture" in body or not ("<svg" in body or "<table class='files'>" in body)
    ]  # fmt: skip


def judged(root: Path, gid: str) -> tuple[dict, str]:
    if (root / "dvc.lock").exists():
        seal(root)  # the case's edit is judged by the gate's recomputation, not caught by the seals
    gates_main(["--root", str(root), "check", "--only", gid, "--html", "page.html"])
    report = json.loads((root / "reports" / "gates.json").read_text())
    return next(g for g in report["gates"] if g["id"] == gid), (root / "page.html").read_text()


@pytest.fixture()
def work(gate_tree: Path, tmp_path: Path) -> Path:
    return copy_tree(gate_tree, tmp_path / "tree")


def test_the_cases_cover_every_gate_status_and_tier() -> None:
    """The case table, checked against the catalogue: a new gate needs its cases here."""
    # the gates merged beside this table draw in their own tests: the pilot cells (test_pilot_gate.py,
    # test_html_report.py), seals and consistency (test_seals.py), the statistical tier (its replicas are
    # not in the gate tree: tests/unit/test_judge_stat_gate.py draws it, pass and fail); every other gate
    # needs its cases here
    own = ("seals", "consistency", "loss_match_stat.proc")
    own_tests = {g.id for g in catalogue.GATES if g.id.startswith("pilot.") or g.id in own}
    assert {g.id for g in catalogue.GATES} - own_tests == set(REPORTS)
    covered: dict[str, set[str]] = {}
    for _, gid, status, _ in CASES.values():
        covered.setdefault(gid, set()).add(status)
    assert covered == REPORTS
    fresh = {(status, tier) for _, gid, status, tier in CASES.values() if gid == "fresh_train"}
    assert {t for _, t in fresh} >= TIERS and all(
        (s, t) in fresh for s in ("pass", "fail") for t in TIERS - {"unblessed"}
    )


@pytest.mark.parametrize("case", list(CASES))
def test_every_gate_draws_in_every_tier_and_status(work: Path, case: str) -> None:
    change, gid, status, fragment = CASES[case]
    change(work)
    g, html = judged(work, gid)
    assert g["status"] == status, f"{case}: {g['status']}: {g['message']}"
    assert fragment in g["message"], g["message"]
    assert holes(html) == [], card(html, gid)[:2000]


def test_a_stage_not_in_the_pipeline_is_one_row_with_nothing_to_draw(work: Path) -> None:
    scaling_never_ran(work)
    g, html = judged(work, "scaling")
    assert g["status"] == "skip" and g["not_in_pipeline"] == ["scaling"], g
    # folded into one row of the verdict table (gates/reporting/rows.py), no card claiming a picture is missing
    assert "not in this pipeline: 1 gate (stages scaling: " in html and "No picture" not in html
    assert "id='gate-scaling'" not in html


def test_a_picture_that_raises_is_found(work: Path, monkeypatch) -> None:
    """Negative control: the same check sees a hole when a picture function fails."""

    def broken(a, t):
        raise KeyError("max_steps_out")

    units = [dataclasses.replace(g, picture=broken) if g.id == "finite" else g for g in catalogue.GATES]
    monkeypatch.setattr(catalogue, "GATES", units)
    g, html = judged(work, "finite")
    assert g["status"] == "pass"
    assert holes(html) == ["finite"]
    assert "No picture: cannot draw from these artifacts (KeyError: &#x27;max_steps_out&#x27;)" in card(
        html, "finite"
    )
