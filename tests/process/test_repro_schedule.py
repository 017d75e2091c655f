"""pipeline/schedule.py and pipeline/repro.py without DVC: stages side by side only when their inputs
are built, never more than --jobs at once, a timed stage alone, nothing new after a failure; DVC's own
words parsed into ran / restored / unchanged. Each rule has a control in which it is broken."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.repro import stage_of
from pipeline.schedule import Plan, run_plan

CHAIN = {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"a"}, "e": {"b", "c"}, "t": {"a"}}


def sleeper(seconds: float, code: int = 0):
    def start(stage: str) -> subprocess.Popen[str]:
        prog = f"import time; print('{stage}'); time.sleep({seconds}); raise SystemExit({code if stage == 'b' else 0})"
        return subprocess.Popen([sys.executable, "-c", prog], stdout=subprocess.PIPE, text=True)

    return start


def intervals(done: dict[str, dict]) -> dict[str, tuple[float, float]]:
    return {s: (d["start_s"], d["start_s"] + d["wall_s"]) for s, d in done.items()}


def overlaps(iv: dict[str, tuple[float, float]], stage: str) -> list[str]:
    lo, hi = iv[stage]
    return [s for s, (a, b) in iv.items() if s != stage and a < hi - 0.05 and b > lo + 0.05]


def max_concurrency(iv: dict[str, tuple[float, float]]) -> int:
    return max(sum(a <= t < b - 0.02 for a, b in iv.values()) for t, _ in iv.values())  # 2-decimal times


def test_independent_stages_overlap_within_jobs_and_after_their_inputs() -> None:
    lines: list[tuple[str, str]] = []
    done = run_plan(Plan(CHAIN, jobs=3, exclusive={"t"}), sleeper(0.4), lambda s, x: lines.append((s, x)))
    iv = intervals(done)
    assert set(done) == set(CHAIN) and all(d["exit_code"] == 0 for d in done.values())
    for stage, ups in CHAIN.items():
        assert all(iv[u][1] <= iv[stage][0] + 0.05 for u in ups), (stage, iv)
    assert max_concurrency(iv) == 3  # b, c, d side by side
    assert overlaps(iv, "t") == [], iv  # the timed stage ran alone
    assert ("b", "b\n") in lines


def test_controls_without_the_rules_the_measures_do_fail() -> None:
    """The same checks see the overlap when nothing is exclusive, and one-at-a-time with jobs 1."""
    iv = intervals(run_plan(Plan(CHAIN, jobs=3), sleeper(0.4), lambda s, x: None))
    assert overlaps(iv, "t"), iv
    iv1 = intervals(run_plan(Plan(CHAIN, jobs=1), sleeper(0.1), lambda s, x: None))
    assert max_concurrency(iv1) == 1


def test_a_stage_that_does_not_contend_overlaps_a_timed_one() -> None:
    """On a GPU run the CPU-only stages overlap a timed training; a GPU stage never does."""
    graph = {"a": set(), "t": {"a"}, "c": {"a"}, "g": {"a"}, "z": {"t"}}  # t leads the longer chain
    plan = Plan(graph, jobs=3, exclusive={"t"}, contending={"g", "z"})
    iv = intervals(run_plan(plan, sleeper(0.4), lambda s, x: None))
    assert "c" in overlaps(iv, "t") and "g" not in overlaps(iv, "t"), iv


def test_nothing_new_starts_after_a_failure_and_the_running_finish() -> None:
    done = run_plan(Plan(CHAIN, jobs=3), sleeper(0.2, code=3), lambda s, x: None)
    assert done["b"]["exit_code"] == 3
    assert "e" not in done  # e needs b
    assert {"c", "d"} <= set(done)  # started beside b: they finish


@pytest.mark.parametrize(
    ("line", "want"),
    [
        ("Running stage 'train@proc':", ("train@proc", "ran")),
        ("Stage 'export' is cached - skipping run, checking out outputs", ("export", "restored")),
        ("Stage 'corpus' didn't change, skipping", ("corpus", "unchanged")),
        ("[single w1] step 3/12 loss 7.5", None),
        ("Running stage 'x' now", None),
    ],
)
def test_dvc_lines_name_the_stage_and_what_was_done(line: str, want: tuple[str, str] | None) -> None:
    assert stage_of(line) == want


def test_a_stage_whose_outs_the_pull_brought_is_restored_not_unchanged(tmp_path, monkeypatch) -> None:
    from pipeline.repro import missing_outs, restored_by_pull

    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.txt").write_text("x")
    (tmp_path / "dvc.lock").write_text(
        "schema: '2.0'\nstages:\n  a:\n    outs:\n    - path: here.txt\n  b:\n    outs:\n    - path: gone\n"
        "  c:\n    cmd: x\n"
    )
    missing = missing_outs()
    assert missing == {"b"}
    seen = {"a": "unchanged", "b": "unchanged", "c": "ran"}
    assert restored_by_pull(seen, missing) == {"a": "unchanged", "b": "restored", "c": "ran"}
    assert restored_by_pull({"b": "ran"}, missing) == {"b": "ran"}  # control: a stage that ran stays ran


def test_a_missing_uncached_out_names_its_stage(tmp_path, monkeypatch) -> None:
    from pipeline.repro import uncached_missing

    monkeypatch.chdir(tmp_path)
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  fresh:\n    cmd: x\n    outs:\n    - runs/single/m.json:\n        cache: false\n"
        "  cached:\n    cmd: y\n    outs:\n    - gone.txt\n"
    )
    assert uncached_missing() == ["fresh"]  # a cached out that is missing is the pull's to restore
    (tmp_path / "runs/single").mkdir(parents=True)
    (tmp_path / "runs/single/m.json").write_text("{}")
    assert uncached_missing() == []  # control: present, nothing to run again


def test_the_repro_record_is_sealed_and_names_the_dvc_lock_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #51: reports/repro.json is written outside DVC: sealed, provenance refuses a hand edit."""
    from contracts.fileio import md5_file
    from gates.reading.run_origins import repro_record
    from pipeline import repro

    monkeypatch.chdir(tmp_path)
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    monkeypatch.setattr(repro, "default_remote", lambda: None)
    monkeypatch.setattr(repro, "missing_outs", lambda: set())
    monkeypatch.setattr(repro, "repro_serial", lambda targets, extra=(): (0, {"env": "ran"}, {}))
    assert repro.run([], True, Path("reports/repro.json"), 1) == 0
    rec = repro_record(tmp_path)
    assert rec["stages"] == {"env": "ran"} and rec["dvc_lock_md5"] == md5_file(tmp_path / "dvc.lock")
    assert len(rec["content_sha256"]) == 64
