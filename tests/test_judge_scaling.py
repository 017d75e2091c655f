"""gates/judges/scaling.py under mutation (docs/judge-mutation.md): the scaling verdict from its raw windows.

bench/scaling.json written by hand (schema-valid): what params.yaml says was measured, whole rounds,
figures recomputed from the faster half of the windows, floors, the launcher band, noise, and each
verdict's exact message. tests/test_scaling_gate.py and the gate tree cover real measurements.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from contracts.perf_record import judged_spread
from gates.judges.scaling import (
    floor_problems,
    launcher_gaps,
    recompute,
    round_problems,
    rounds_text,
    scaling,
    shape_problems,
)
from judge_trees import Tree


class FakeParams(dict):
    """Resolved params as the gate reads them (later mains read the train section through
    scaling_workload(): the scaling.sets of the profile applied; here none)."""

    def scaling_workload(self) -> FakeParams:
        return self


SC = {"worlds": [1, 2], "launchers": ["thread", "proc"], "per_rank_batch": 4, "windows": 4, "max_rounds": 2}
PARAMS = FakeParams(profile="cpu", scaling=SC, train={"seq_len": 16, "precision": "fp32"})
PROFILES = {"cpu": {"floors": {"2": 1.5}, "band": 0.25, "max_spread": 0.5}}
W1 = [100.0, 101.0, 99.0, 100.0]
W2 = [190.0, 191.0, 189.0, 190.0]


def measurement(windows: list[float], base: float | None, rounds: int = 1) -> dict:
    med, spread = judged_spread(windows)
    speedup = med / base if base else 1.0
    return {"tokens_per_s": med, "speedup": speedup, "efficiency": speedup, "spread": spread, "rounds": rounds,
            "windows": windows}  # fmt: skip


def table(thread2: list[float] = W2, proc2: list[float] = W2) -> dict:
    base = judged_spread(W1)[0]
    return {
        "format": "xtrain-scaling/1",
        "profile": "cpu",
        "device": "cpu",
        "device_count": 2,
        "model": {},
        "per_rank_batch": 4,
        "seq_len": 16,
        "precision": "fp32",
        "worlds_requested": [1, 2],
        "worlds": [1, 2],
        "results": {
            launcher: {"1": measurement(W1, None), "2": measurement(w2, base)}
            for launcher, w2 in (("thread", thread2), ("proc", proc2))
        },
    }


def judged(tmp_path: Path, s: dict, params: FakeParams = PARAMS, profiles: dict = PROFILES):
    t = Tree(tmp_path, params=params)
    (tmp_path / "bench").mkdir(parents=True, exist_ok=True)
    (tmp_path / "bench" / "scaling.json").write_text(json.dumps(s))
    t.record_out("scaling", "bench/scaling.json")
    return scaling(t.artifacts(), profiles)


THRESHOLD = "2:1.5x; band 25%; spread <= 50%"


def test_a_measurement_that_meets_its_floors_passes(tmp_path: Path) -> None:
    o = judged(tmp_path, table())
    assert (o.status, o.measured, o.threshold) == ("pass", "proc 1.90x thread 1.90x @2", THRESHOLD)
    assert o.message == (
        "cpu on cpu: worlds [1, 2] recomputed from the windows, floors met, launchers within 0%; rounds proc 1/1, "
        "thread 1/1 of at most 2 (worlds 1/2)"
    )


def test_a_profile_without_floors_fails(tmp_path: Path) -> None:
    o = judged(tmp_path, table(), profiles={"gpu": PROFILES["cpu"], "a": PROFILES["cpu"]})
    assert (o.status, o.measured, o.threshold) == ("fail", None, None)
    assert o.message == (
        "bench/scaling.json was measured on profile 'cpu', which has no floors in params.yaml gates.scaling "
        "(known: a, gpu)"
    )


def test_a_speedup_below_its_floor_fails(tmp_path: Path) -> None:
    slow = [140.0, 141.0, 139.0, 140.0]
    o = judged(tmp_path, table(slow, slow))
    assert (o.status, o.measured) == ("fail", "proc 1.40x thread 1.40x @2")
    assert o.message == (
        "proc world 2: speedup 1.40x below floor 1.50x (140 tok/s, spread 1%); thread world 2: speedup 1.40x "
        "below floor 1.50x (140 tok/s, spread 1%). Next: bench/scaling.png and python -m pipeline.scaling for "
        "the windows; where the time goes: all-reduce vs compute"
    )


def test_floor_problems_is_inclusive_and_skips_worlds_without_a_floor() -> None:
    t = {"thread": {1: {"speedup": 1.0, "tokens_per_s": 1.0, "spread": 0.0}, 2: {"speedup": 1.5, "tokens_per_s": 2.0, "spread": 0.1}}}  # fmt: skip
    assert floor_problems(t, {2: 1.5}) == []
    assert floor_problems(t, {2: 1.51}) == [
        "thread world 2: speedup 1.50x below floor 1.51x (2 tok/s, spread 10%)"
    ]
    nan = {"proc": {4: {"speedup": float("nan"), "tokens_per_s": 1234.0, "spread": 0.0}}}
    assert floor_problems(nan, {4: 1.0}) == [
        "proc world 4: speedup nanx below floor 1.00x (1,234 tok/s, spread 0%)"
    ]


def test_noisy_windows_are_inconclusive(tmp_path: Path) -> None:
    noisy = [190.0, 60.0, 80.0, 100.0]  # the faster half 190/100: spread 90%
    s = table(noisy, W2)
    o = judged(tmp_path, s)
    assert (o.status, o.threshold) == ("inconclusive", THRESHOLD)
    assert o.message == (
        "thread world 2 spread 62% (faster half of 4 windows) above 50% after re-measuring (rounds proc 1/1, "
        "thread 1/1 of at most 2 (worlds 1/2)): too noisy to judge, rerun on a quiet machine (dvc repro -f scaling)"
    )


def test_launchers_surely_apart_fail_and_maybe_apart_are_inconclusive(tmp_path: Path) -> None:
    o = judged(tmp_path, table(W2, [r * 2 for r in W2]))
    assert o.status == "fail" and "world 2: thread 190 vs proc 381 tok/s, thread/proc -50%" in o.message
    assert "band 25%): the launchers differ. Next: bench/scaling.png" in o.message
    wide = [190.0, 150.0, 140.0, 130.0]
    o = judged(tmp_path / "b", table(wide, [r * 1.2 for r in W2]))
    assert o.status == "inconclusive" and ": may differ by more than the band (rounds proc 1/1" in o.message
    assert o.message.endswith("): too noisy to judge, rerun on a quiet machine")


def test_launcher_gaps_compare_only_worlds_both_measured() -> None:
    s = table()
    s["results"]["proc"]["3"] = measurement(W2, 100.0)
    sure, unsure, worst = launcher_gaps(s, 0.25)
    assert (sure, unsure, worst) == ([], [], 0.0)
    del s["results"]["thread"]
    assert launcher_gaps(s, 0.25) == ([], [], 0.0)


def test_claimed_figures_are_recomputed_from_the_windows(tmp_path: Path) -> None:
    s = table()
    s["results"]["thread"]["2"]["speedup"] = 2.5
    s["results"]["proc"]["1"]["tokens_per_s"] = 150.0
    o = judged(tmp_path, s)
    assert o.status == "fail" and o.measured == "proc 1.90x thread 1.90x @2"
    assert o.message == (
        "bench/scaling.json: proc world 1: tokens_per_s 150 claimed, the windows give 100.5; thread world 2: "
        "speedup 2.5 claimed, the windows give 1.89552. Rerun: dvc repro scaling"
    )


def test_recompute_without_world_1_has_no_speedup() -> None:
    s = table()
    del s["results"]["thread"]["1"]
    table_, wrong = recompute(s)
    assert str(table_["thread"][2]["speedup"]) == "nan"
    assert "thread world 2: speedup 1.89552 claimed, the windows give nan" in wrong
    assert list(table_) == ["proc", "thread"] and list(table_["proc"]) == [1, 2]


def test_what_params_yaml_says_was_measured(tmp_path: Path) -> None:
    s = table()
    s.update(profile="gpu", worlds_requested=[1, 2, 4], per_rank_batch=8, seq_len=32, precision="bf16")
    assert shape_problems(s, PARAMS) == [
        "profile gpu, params.yaml gives cpu",
        "worlds_requested [1, 2, 4], params.yaml gives [1, 2]",
        "per_rank_batch 8, params.yaml gives 4",
        "seq_len 32, params.yaml gives 16",
        "precision bf16, params.yaml gives fp32",
    ]
    s = table()
    del s["results"]["proc"]
    s["results"]["thread"].pop("2")
    assert shape_problems(s, PARAMS) == [
        "launchers ['thread'], params.yaml gives ['proc', 'thread']",
        "thread: world 2 missing from the table",
    ]
    params = FakeParams(copy.deepcopy(dict(PARAMS)))
    params["scaling"]["worlds"] = [1, 2, 4]
    s = table()
    s["worlds_requested"] = [1, 2, 4]
    assert shape_problems(s, params) == []  # world 4 beyond the 2 devices present is not asked for
    o = judged(tmp_path, {**table(), "seq_len": 8})
    assert (
        o.status == "fail"
        and o.message == "bench/scaling.json: seq_len 8, params.yaml gives 16. Rerun: dvc repro scaling"
    )


def test_a_missing_world_is_named() -> None:
    s = table()
    del s["results"]["proc"]["2"]
    assert shape_problems(s, PARAMS) == ["proc: world 2 missing from the table"]


def test_rounds_are_whole_and_capped() -> None:
    assert round_problems("thread world 2", {"windows": [1.0] * 8, "rounds": 2}, SC) == []
    assert round_problems("thread world 2", {"windows": [1.0] * 4}, SC) == []
    assert round_problems("thread world 2", {"windows": [1.0] * 5, "rounds": 1}, SC) == [
        "thread world 2: 5 windows, 1 rounds of params.yaml scaling.windows 4"
    ]
    assert round_problems("w", {"windows": [1.0] * 12, "rounds": 3}, SC) == [
        "w: 3 rounds, params.yaml scaling.max_rounds 2"
    ]
    assert round_problems("w", {"windows": [1.0] * 8, "rounds": 2}, {"windows": 4}) == [
        "w: 2 rounds, params.yaml scaling.max_rounds 1"
    ]


def test_rounds_text_per_launcher_and_world() -> None:
    s = table()
    s["results"]["thread"]["2"]["rounds"] = 2
    del s["results"]["thread"]["1"]["rounds"]
    s["results"]["proc"]["10"] = measurement(W2, 100.0, rounds=3)
    assert rounds_text(s, SC) == "rounds proc 1/1/3, thread 1/2 of at most 2 (worlds 1/2/10)"
    assert rounds_text(s, {}).endswith("of at most 1 (worlds 1/2/10)")


def test_the_measured_field_names_the_top_world(tmp_path: Path) -> None:
    s = table()
    del s["results"]["proc"]["2"]
    o = judged(tmp_path, s)
    assert o.measured == "thread 1.90x @2" and o.status == "fail"
