"""gates/judges/perf.py's entry points under mutation (docs/judge-mutation.md): judge, run_stages,
baseline_for, throughput, memory and _perf_stages, in-process.

A small reader holding plain metrics records stands in for the artifact tree (runs that did not run
raise StageNotRun, as the real reader does); the baseline is a real sealed, indexed registry entry
(registry.store reads it), built from the committed baseline's provenance. The statistics and the
per-stage checks are tests/unit/test_judge_perf.py's; the real runs, tests/process/test_perf_gates.py's.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_judge_training import record

from conftest import REPO
from contracts.perf_record import StagePerf, shift_ci, stage_perf
from gates.judges import perf
from gates.judges.gate import NothingMeasured
from gates.judges.outcome import Outcome
from gates.judges.perf import BLESS, StageCheck, memory_check, throughput_check
from gates.reading import registry_records
from gates.reading.artifacts import ArtifactError, StageNotRun
from gates.reading.registry_records import PerfRecords, read_perf, run_stages
from params.identity import config_identity
from registry import index
from registry.sealed import seal
from registry.store import Registry, RegistryError, write_once

ENV = "cpu-test-env"
CONFIG = {
    "seed": 1,
    "model": {"vocab_size": 300, "dim": 8},
    "train": {"steps": 4, "eval_every": 2, "lr": 0.1},
}
MIB = 2**20
PROFILE = {"throughput": "judge", "slowdown": 0.1, "memory_growth": 0.2}
THRESHOLDS = {"perf": {"cpu": PROFILE}}


def stage(launcher: str, seconds=(1.0, 1.0, 1.0, 1.0), peak: int = 100 * MIB, **changes: Any) -> dict:
    """A baseline's stage entry: the raw perf fields (10 tokens/step, 10 steps a window, one warm-up)."""
    world = 2 if launcher == "thread" else 1
    windows = [{"first_step": 10 * i, "steps": 10, "seconds": s} for i, s in enumerate(seconds)]
    entry = {
        "launcher": launcher,
        "env_id": ENV,
        "world": world,
        "device": "cpu",
        "config_hash": config_identity(CONFIG),
        "tokens_per_step": 10,
        "perf": {
            "warmup_windows": 1,
            "windows": windows,
            "peak_memory": {"kind": "cpu_max_rss", "scope": "rank",
                            "per_rank": [{"rank": r, "bytes": peak} for r in range(world)]},
        },
    }  # fmt: skip
    entry.update(changes)
    return entry


def metrics(launcher: str, **perf_changes: Any) -> dict:
    """runs/<launcher>/metrics.json: a record consistent with itself, with the perf fields of stage()."""
    base = stage(launcher, **perf_changes)
    return record(
        base["world"],
        launcher,
        device="cpu",
        env={"env_id": base["env_id"]},
        config=copy.deepcopy(CONFIG),
        config_hash=base["config_hash"],
        tokens_per_step=10,
        perf=base["perf"],
    )


class Runs:
    """What the perf gates read: each run's metrics.json by path; a run absent has not run."""

    def __init__(self, root: Path, runs: dict[str, dict]) -> None:
        self.root, self.runs = root, runs
        self.read: list[tuple[str, str, str]] = []

    def json(self, rel: str, schema: str, stage: str) -> dict:
        self.read.append((rel, schema, stage))
        launcher = rel.split("/")[1]
        if launcher not in self.runs:
            raise StageNotRun(f"stage {stage} has not run (dvc repro {stage})")
        return self.runs[launcher]


def bless(root: Path, stages: dict[str, dict], env_id: str = ENV) -> None:
    """The next sealed, indexed perf baseline of `env_id` under root/registry."""
    reg = root / "registry"
    if not (reg / "index.json").exists():
        reg.mkdir(parents=True, exist_ok=True)
        index.create(reg)
    template = json.loads(next((REPO / "registry" / "baselines").glob("cpu-*/v1.json")).read_text())
    path = Registry(reg).next_path(reg / "baselines" / env_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "format": "xtrain-perf-baseline/1",
        "env_id": env_id,
        "version": int(path.stem[1:]),
        "stages": stages,
        "provenance": template["provenance"],
        "reason": "a perf baseline for the judge tests",
    }
    write_once(path, seal(data))
    index.record(reg, [path])


NOT_RUN = {
    "single": "single: stage train_single has not run (dvc repro train_single)",
    "thread": "thread: stage train@thread has not run (dvc repro train@thread)",
    "proc": "proc: stage train@proc has not run (dvc repro train@proc)",
}


def judge(a: Any, t: dict, check: StageCheck, what: str) -> Outcome:
    """perf.judge on what read_perf reads from `a` (gates/reading/registry_records.py)."""
    return perf.judge(read_perf(a, t), t, check, what)


def throughput(a: Any, t: dict) -> Outcome:
    return perf.throughput(read_perf(a, t), t)


def memory(a: Any, t: dict) -> Outcome:
    return perf.memory(read_perf(a, t), t)


def _perf_stages(a: Any) -> tuple[dict, dict | None]:
    return perf._perf_stages(read_perf(a, {}))


# -- run_stages ------------------------------------------------------------------------------------


def test_run_stages_reads_each_launchers_metrics_and_notes_those_not_run(tmp_path: Path) -> None:
    a = Runs(tmp_path, {"thread": metrics("thread")})
    runs, notes = run_stages(a)
    assert runs == {"thread": a.runs["thread"]}
    assert notes == [NOT_RUN["single"], NOT_RUN["proc"]]
    assert a.read == [
        ("runs/single/metrics.json", "metrics.schema.json", "train_single"),
        ("runs/thread/metrics.json", "metrics.schema.json", "train@thread"),
        ("runs/proc/metrics.json", "metrics.schema.json", "train@proc"),
    ]
    all_three = Runs(tmp_path, {k: metrics(k) for k in ("single", "thread", "proc")})
    assert run_stages(all_three) == (all_three.runs, [])
    assert list(run_stages(all_three)[0]) == ["single", "thread", "proc"]


def test_a_run_without_perf_is_an_error_naming_the_stage(tmp_path: Path) -> None:
    old = {k: v for k, v in metrics("proc").items() if k != "perf"}
    with pytest.raises(ArtifactError) as e:
        run_stages(Runs(tmp_path, {"single": metrics("single"), "proc": old}))
    assert str(e.value) == (
        "runs/proc/metrics.json: perf: missing (written before perf recording; dvc repro -f train@proc)"
    )


# -- baseline_for ----------------------------------------------------------------------------------


def test_baseline_for_is_the_latest_of_the_first_runs_environment(tmp_path: Path) -> None:
    runs = {"single": metrics("single"), "thread": {**metrics("thread"), "env": {"env_id": "other"}}}
    a = Runs(tmp_path, runs)
    bless(tmp_path, {"single": stage("single")})
    bless(tmp_path, {"single": stage("single"), "thread": stage("thread")})
    bless(tmp_path, {"single": stage("single")}, env_id="other")
    r = read_perf(a, {})
    base = r.baseline
    assert r.env_id == ENV and base.version == 2 and base.env_id == ENV
    assert sorted(base.stages) == ["single", "thread"] and base.rel == f"registry/baselines/{ENV}/v2.json"
    assert read_perf(Runs(tmp_path, {"thread": runs["thread"]}), {}).baseline.env_id == "other"
    assert read_perf(Runs(tmp_path, {}), {}) == PerfRecords({}, tuple(NOT_RUN.values()))  # none read


def test_no_baseline_is_none_and_a_registry_error_is_an_artifact_error(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "registry").mkdir()
    index.create(tmp_path / "registry")
    runs = {"single": metrics("single")}
    r = read_perf(Runs(tmp_path, runs), {})
    assert (r.env_id, r.baseline, r.baseline_problem) == (ENV, None, None)

    class Broken:
        def __init__(self, root: Path) -> None:
            assert root == tmp_path / "registry"

        def baseline(self, env_id: str) -> None:
            raise RegistryError(f"registry/baselines/{env_id}: unreadable")

    monkeypatch.setattr(registry_records, "Registry", Broken)
    r = read_perf(Runs(tmp_path, runs), {})
    assert (r.baseline, r.baseline_problem) == (None, f"registry/baselines/{ENV}: unreadable")
    with pytest.raises(ArtifactError) as e:  # said where the gate looks at the baseline
        perf.judge(r, THRESHOLDS, throughput_check, "throughput")
    assert str(e.value) == f"registry/baselines/{ENV}: unreadable" and e.value.__cause__ is None


# -- judge: the frame before any stage is compared -------------------------------------------------


def recorder(status: str = "pass"):
    """A StageCheck that records what it was given and answers `status`."""
    seen: list[tuple[StagePerf, StagePerf, dict]] = []

    def check(run: StagePerf, base: StagePerf, profile: dict) -> tuple[str, str, str]:
        seen.append((run, base, profile))
        return status, f"v-{run.launcher}", f"m-{run.launcher}"

    return check, seen


def test_nothing_run_is_a_skip_naming_every_stage(tmp_path: Path) -> None:
    check, seen = recorder()
    o = judge(Runs(tmp_path, {}), THRESHOLDS, check, "throughput")
    assert (o.status, o.measured, o.threshold) == ("skip", None, None)
    assert o.message == "no training stage has run: " + "; ".join(NOT_RUN.values())
    assert seen == []


def test_a_record_contradicting_itself_fails_before_any_baseline(tmp_path: Path) -> None:
    bad = {**metrics("thread"), "config_hash": "0" * 16}
    bless(tmp_path, {"single": stage("single"), "thread": stage("thread")})
    check, seen = recorder()
    o = judge(Runs(tmp_path, {"single": metrics("single"), "thread": bad}), THRESHOLDS, check, "throughput")
    assert (o.status, o.measured, o.threshold) == ("fail", None, None)
    problem = (
        f"config_hash: {'0' * 16} is not the identity of the record's own config "
        f"({config_identity(CONFIG)}): a hand-edited or mislabelled record"
    )
    assert o.message == f"runs/thread/metrics.json: {problem}. Refusing to judge: rerun the stage"
    both = {"single": {**metrics("single"), "config_hash": "0" * 16}, "thread": bad}
    o = judge(Runs(tmp_path, both), THRESHOLDS, check, "throughput")
    assert o.message == (
        f"runs/single/metrics.json: {problem}; runs/thread/metrics.json: {problem}. Refusing to judge: "
        "rerun the stage"
    )
    assert seen == []


@pytest.mark.parametrize("thresholds", [{}, {"perf": None}, {"perf": {"cuda": PROFILE}}])
def test_a_device_without_thresholds_fails(tmp_path: Path, thresholds: dict) -> None:
    check, _ = recorder()
    o = judge(Runs(tmp_path, {"single": metrics("single")}), thresholds, check, "peak memory")
    assert (o.status, o.measured, o.threshold) == ("fail", None, None)
    assert o.message == "params.yaml gates.perf has no thresholds for device 'cpu'"


def test_throughput_skip_skips_throughput_only(tmp_path: Path) -> None:
    t = {"perf": {"cpu": {**PROFILE, "throughput": "skip"}}}
    check, seen = recorder()
    a = Runs(tmp_path, {"single": metrics("single")})
    o = judge(a, t, check, "throughput")
    assert (o.status, o.measured, o.threshold) == ("skip", None, None)
    assert o.message == (
        "gates.perf.cpu.throughput is skip: window spreads on a shared cpu are too large to judge "
        "(python -m gates explain perf.throughput); peak memory is still judged"
    )
    bless(tmp_path, {"single": stage("single")})
    assert judge(a, t, check, "peak memory").status == "pass" and len(seen) == 1
    assert (
        judge(a, {"perf": {"cpu": {**PROFILE, "throughput": "judge"}}}, check, "throughput").status == "pass"
    )


def test_no_baseline_is_a_skip_saying_how_to_bless(tmp_path: Path) -> None:
    (tmp_path / "registry").mkdir()
    index.create(tmp_path / "registry")
    check, seen = recorder()
    o = judge(Runs(tmp_path, {"single": metrics("single")}), THRESHOLDS, check, "peak memory")
    assert (o.status, o.measured, o.threshold) == ("skip", None, None)
    assert o.message == (
        f"no perf baseline for environment {ENV} (registry/baselines/{ENV}/): peak memory not judged. "
        f"After a run you trust: {BLESS}"
    )
    assert BLESS == "python -m registry bless --perf --reason '...'" and seen == []


# -- judge: each stage against the baseline --------------------------------------------------------


def test_each_comparable_stage_is_checked_against_its_baseline_entry(tmp_path: Path) -> None:
    bless(tmp_path, {"single": stage("single", peak=1), "thread": stage("thread")})
    bless(tmp_path, {"single": stage("single"), "thread": stage("thread", seconds=(1.0, 2.0, 2.0, 2.0))})
    runs = {"single": metrics("single"), "thread": metrics("thread")}
    check, seen = recorder()
    o = judge(Runs(tmp_path, runs), THRESHOLDS, check, "throughput")
    assert (o.status, o.measured, o.threshold) == ("pass", "single v-single, thread v-thread", None)
    assert o.message == f"single: m-single; thread: m-thread; {NOT_RUN['proc']} (vs baseline {ENV} v2)"
    assert [(r, b, p) for r, b, p in seen] == [
        (stage_perf(runs["single"]), stage_perf(stage("single")), PROFILE),
        (stage_perf(runs["thread"]), stage_perf(stage("thread", seconds=(1.0, 2.0, 2.0, 2.0))), PROFILE),
    ]


@pytest.mark.parametrize("status", ["fail", "inconclusive"])
def test_the_worst_stage_is_the_verdict(tmp_path: Path, status: str) -> None:
    bless(tmp_path, {"single": stage("single")})
    check, _ = recorder(status)
    o = judge(Runs(tmp_path, {"single": metrics("single")}), THRESHOLDS, check, "throughput")
    assert (o.status, o.measured) == (status, "single v-single")


def test_stages_the_baseline_cannot_judge_are_notes_and_none_judged_is_a_skip(tmp_path: Path) -> None:
    bless(tmp_path, {"single": stage("single"), "thread": stage("thread", config_hash="f" * 16)})
    runs = {k: metrics(k) for k in ("single", "thread", "proc")}
    check, seen = recorder()
    o = judge(Runs(tmp_path, runs), THRESHOLDS, check, "throughput")
    assert (o.status, o.measured) == ("pass", "single v-single")
    cfg = config_identity(CONFIG)
    assert o.message == (
        f"single: m-single; thread: config_hash {cfg} differs from the baseline's {'f' * 16}: not judged "
        f"(bless a new baseline: {BLESS}); proc: not in the baseline: not judged (bless a new baseline: "
        f"{BLESS}) (vs baseline {ENV} v1)"
    )
    assert [r.launcher for r, _, _ in seen] == ["single"]
    o = judge(Runs(tmp_path, {"proc": metrics("proc")}), THRESHOLDS, check, "throughput")
    assert (o.status, o.measured) == ("skip", None)
    assert o.message == (
        f"no stage comparable with baseline {ENV} v1: {NOT_RUN['single']}; {NOT_RUN['thread']}; "
        f"proc: not in the baseline: not judged (bless a new baseline: {BLESS})"
    )


@pytest.mark.parametrize("ranks", [1, 3])
def test_a_baseline_listing_other_ranks_than_its_world_is_an_error(tmp_path: Path, ranks: int) -> None:
    """Found here: a baseline's peaks were zipped with the run's unchecked (a ValueError traceback)."""
    bad = stage("thread")
    bad["perf"]["peak_memory"]["per_rank"] = [{"rank": r, "bytes": MIB} for r in range(ranks)]
    bless(tmp_path, {"single": stage("single"), "thread": bad})
    a = Runs(tmp_path, {"single": metrics("single"), "thread": metrics("thread")})
    for gate in (memory, throughput):
        with pytest.raises(ArtifactError) as e:
            gate(a, THRESHOLDS)
        assert str(e.value) == (
            f"registry/baselines/{ENV}/v1.json: stages.thread.perf.peak_memory.per_rank: {ranks} ranks for "
            f"world 2 (bless a new baseline: {BLESS})"
        )


# -- throughput and memory: the two gates on the frame ---------------------------------------------


def test_throughput_judges_the_steady_rates(tmp_path: Path) -> None:
    (tmp_path / "registry").mkdir()
    index.create(tmp_path / "registry")
    a = Runs(tmp_path, {"single": metrics("single", seconds=(9.0, 2.0, 2.0, 2.0))})
    o = throughput(a, THRESHOLDS)
    assert o.status == "skip" and ": throughput not judged." in o.message
    o = throughput(a, {"perf": {"cpu": {**PROFILE, "throughput": "skip"}}})
    assert o.message.startswith("gates.perf.cpu.throughput is skip")
    bless(tmp_path, {"single": stage("single")})
    o = throughput(a, THRESHOLDS)
    assert (o.status, o.measured) == ("fail", "single -50.0%")
    assert o.message.startswith("single: slower than tolerated: 50 tok/s vs 100: -50.0%")
    assert throughput(Runs(tmp_path, {"single": metrics("single")}), THRESHOLDS).status == "pass"


def test_memory_judges_the_peaks(tmp_path: Path) -> None:
    (tmp_path / "registry").mkdir()
    index.create(tmp_path / "registry")
    a = Runs(tmp_path, {"single": metrics("single", peak=130 * MIB)})
    o = memory(a, {"perf": {"cpu": {**PROFILE, "throughput": "skip"}}})
    assert o.status == "skip" and ": peak memory not judged." in o.message
    bless(tmp_path, {"single": stage("single")})
    o = memory(a, {"perf": {"cpu": {**PROFILE, "throughput": "skip"}}})
    assert (o.status, o.measured) == ("fail", "single +30.0%")
    assert o.message == (
        f"single: grew over the limit: rank 0 peak 130 MiB vs 100 MiB (+30.0%, limit +20%, cpu_max_rss); "
        f"{NOT_RUN['thread']}; {NOT_RUN['proc']} (vs baseline {ENV} v1)"
    )


# -- _perf_stages: what the pictures draw ------------------------------------------------------------


def test_perf_stages_are_the_runs_and_the_baselines_stages(tmp_path: Path) -> None:
    with pytest.raises(NothingMeasured, match=r"^no training stage has run$"):
        _perf_stages(Runs(tmp_path, {}))
    (tmp_path / "registry").mkdir()
    index.create(tmp_path / "registry")
    a = Runs(tmp_path, {"single": metrics("single")})
    assert _perf_stages(a) == (a.runs, None)
    bless(tmp_path, {"single": stage("single"), "proc": stage("proc")})
    assert _perf_stages(a) == (a.runs, {"single": stage("single"), "proc": stage("proc")})


# -- the per-stage checks at their edges (the whole run's survivors, docs/data/judge-mutation-h200-2026-12-02)


def stage_record(rates=(100.0,) * 3, peaks=(100.0 * MIB,), **changes: Any) -> StagePerf:
    return StagePerf("single", ENV, len(peaks), "cfg", list(rates), list(peaks), "rss", "rank", **changes)


def test_a_change_exactly_at_the_tolerated_slowdown_passes() -> None:
    run, base = stage_record((50.0,) * 3), stage_record()
    change, low, high = shift_ci(run.rates, base.rates)
    assert low == high == change  # constant windows: the interval is one point
    assert throughput_check(run, base, {"slowdown": -high})[0] == "pass"
    assert throughput_check(run, base, {"slowdown": -high * 0.999})[0] == "fail"
    spread = stage_record((50.0, 60.0, 70.0))
    change, low, high = shift_ci(spread.rates, base.rates)
    assert low < high
    assert throughput_check(spread, base, {"slowdown": -low})[0] == "pass"
    assert throughput_check(spread, base, {"slowdown": -low * 0.999})[0] == "inconclusive"


def test_rates_and_peaks_below_one_are_still_judged() -> None:
    assert (
        throughput_check(stage_record((0.5,) * 3), stage_record((0.5,) * 3), {"slowdown": 0.1})[0] == "pass"
    )
    assert memory_check(stage_record(peaks=(0.5,)), stage_record(peaks=(0.5,)), {"memory_growth": 0.2})[
        :2
    ] == (
        "pass",
        "+0.0%",
    )


def test_the_message_prints_each_spread_and_the_limit() -> None:
    run, base = stage_record((50.0, 100.0, 150.0)), stage_record((60.0, 100.0, 140.0))
    status, _, text = throughput_check(run, base, {"slowdown": 0.7})
    assert status == "pass"
    assert text.endswith("; window spread 100%, baseline 80%), tolerated slowdown 70%")


def test_memory_growth_exactly_at_the_limit_passes_and_prints_it() -> None:
    run, base = stage_record(peaks=(150.0 * MIB,)), stage_record(peaks=(100.0 * MIB,))
    assert memory_check(run, base, {"memory_growth": 0.5}) == (
        "pass",
        "+50.0%",
        "rank 0 peak 150 MiB vs 100 MiB (+50.0%, limit +50%, rss)",
    )
    assert memory_check(run, base, {"memory_growth": 0.6})[2].endswith("limit +60%, rss)")
    assert memory_check(run, base, {"memory_growth": 0.49})[0] == "fail"


def test_memory_never_judges_fewer_ranks_than_it_was_given() -> None:
    with pytest.raises(ValueError, match="zip"):
        memory_check(stage_record(peaks=(MIB, MIB)), stage_record(peaks=(MIB,)), {"memory_growth": 0.2})
    with pytest.raises(ValueError, match="zip"):
        memory_check(stage_record(peaks=(MIB,)), stage_record(peaks=(MIB, 2 * MIB)), {"memory_growth": 0.2})
