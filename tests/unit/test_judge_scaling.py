"""gates/judges/scaling.py under mutation (docs/judge-mutation.md): the scaling verdict from its raw windows.

bench/scaling.json written by hand (schema-valid): what params.yaml says was measured, whole rounds,
windows taken in turn, figures recomputed from the faster half of the windows, quiet windows found
from the raw contention readings, floors and the launcher band on quiet pairs, noise, and each
verdict's exact message. tests/process/test_measure_remeasure.py covers the producer (turns, re-measuring).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from contracts.perf_record import judged_spread
from gates.judges.scaling import (
    contention_text,
    crowded,
    described,
    recompute,
    round_problems,
    rounds_text,
    scaling,
    shape_problems,
    turn_problems,
    verdicts,
)
from gates.reading.measurements import measured_with, read_scaling
from judge_trees import Tree


class FakeParams(dict):
    """Resolved params as the gate reads them (later mains read the train section through
    scaling_workload(): the scaling.sets of the profile applied; here none)."""

    def scaling_workload(self) -> FakeParams:
        return self


SC = {"worlds": [1, 2], "launchers": ["thread", "proc"], "per_rank_batch": 4, "windows": 4, "max_rounds": 2}
PARAMS = FakeParams(profile="cpu", scaling=SC, train={"seq_len": 16, "precision": "fp32"})
PROFILES = {"cpu": {"floors": {"2": 1.5}, "band": 0.25, "max_spread": 0.5, "max_contention": 0.5}}
W1 = [100.0, 101.0, 99.0, 100.0]
W2 = [190.0, 191.0, 189.0, 190.0]


def readings(n: int, slot: int, shares: list[float] | None = None, runnable: int = 2) -> list[dict]:
    """n windows' readings on 2 CPUs, window i in cycle i (start 100 i + slot s), others holding
    shares[i] of the CPUs: busy = ours (1 s) + share x 2 CPUs x 1 s."""
    shares = shares if shares is not None else [0.0] * n
    return [{"start_s": 100.0 * i + slot, "wall_s": 1.0, "cpu_s": 1.0, "wait_s": 0.25 + share,
             "busy_s": 1.0 + 2 * share, "steal_s": 0.0, "runnable": runnable + i}
            for i, share in enumerate(shares)]  # fmt: skip


def slot(launcher: str, world: int) -> int:
    return 2 * world + (launcher == "thread")


def measurement(
    windows: list[float], base: float | None, rounds: int = 1, at: int = 0, shares: list[float] | None = None
) -> dict:
    med, spread = judged_spread(windows)
    speedup = med / base if base else 1.0
    return {"tokens_per_s": med, "speedup": speedup, "efficiency": speedup, "spread": spread, "rounds": rounds,
            "windows": list(windows), "readings": readings(len(windows), at, shares)}  # fmt: skip


def table(thread2: list[float] = W2, proc2: list[float] = W2, thread1: list[float] = W1) -> dict:
    base = {"thread": judged_spread(thread1)[0], "proc": judged_spread(W1)[0]}
    return {
        "format": "xtrain-scaling/2",
        "profile": "cpu",
        "device": "cpu",
        "device_count": 2,
        "model": {},
        "per_rank_batch": 4,
        "seq_len": 16,
        "precision": "fp32",
        "worlds_requested": [1, 2],
        "worlds": [1, 2],
        "cpus": 2,
        "results": {
            launcher: {
                "1": measurement(w1, None, at=slot(launcher, 1)),
                "2": measurement(w2, base[launcher], at=slot(launcher, 2)),
            }
            for launcher, w1, w2 in (("thread", thread1, thread2), ("proc", W1, proc2))
        },
    }


def busy(s: dict, launcher: str, world: int, shares: list[float]) -> dict:
    """The same table with others holding `shares` of the CPUs in that measurement's windows."""
    r = s["results"][launcher][str(world)]
    r["readings"] = readings(len(shares), slot(launcher, world), shares)
    return s


def judged(tmp_path: Path, s: dict, params: FakeParams = PARAMS, profiles: dict = PROFILES):
    t = Tree(tmp_path, params=params)
    (tmp_path / "bench").mkdir(parents=True, exist_ok=True)
    (tmp_path / "bench" / "scaling.json").write_text(json.dumps(s))
    t.record_out("scaling", "bench/scaling.json")
    return scaling(read_scaling(t.artifacts()), profiles)


THRESHOLD = "2:1.5x; band 25%; spread <= 50%; contention <= 50%"
ROUNDS = "rounds proc 1/1, thread 1/1 of at most 2 (worlds 1/2)"


def test_a_measurement_that_meets_its_floors_passes(tmp_path: Path) -> None:
    o = judged(tmp_path, table())
    assert (o.status, o.measured, o.threshold) == ("pass", "proc 1.90x thread 1.90x @2", THRESHOLD)
    assert o.message == (
        "cpu on cpu: worlds [1, 2] recomputed from the windows, floors met and launchers within the band on "
        f"quiet pairs of windows taken in turn; {ROUNDS}"
    )


def test_without_a_contention_limit_the_threshold_does_not_name_one(tmp_path: Path) -> None:
    profile = {k: v for k, v in PROFILES["cpu"].items() if k != "max_contention"}
    o = judged(tmp_path, busy(table(), "thread", 1, [0.9] * 4), profiles={"cpu": profile})
    assert (o.status, o.threshold) == ("pass", "2:1.5x; band 25%; spread <= 50%")


def test_a_profile_without_floors_fails(tmp_path: Path) -> None:
    o = judged(tmp_path, table(), profiles={"gpu": PROFILES["cpu"], "a": PROFILES["cpu"]})
    assert (o.status, o.measured, o.threshold) == ("fail", None, None)
    assert o.message == (
        "bench/scaling.json was measured on profile 'cpu', which has no floors in params.yaml gates.scaling "
        "(known: a, gpu)"
    )


def test_a_speedup_surely_below_its_floor_fails(tmp_path: Path) -> None:
    slow = [140.0, 141.4, 138.6, 140.0]  # 1.40x of W1 in every cycle
    o = judged(tmp_path, table(slow, slow))
    assert (o.status, o.measured) == ("fail", "proc 1.40x thread 1.40x @2")
    assert o.message == (
        "proc world 2: speedup 1.40x (95% CI 1.40x to 1.40x over 4 quiet pairs; floor 1.50x): below floor; "
        "thread world 2: speedup 1.40x (95% CI 1.40x to 1.40x over 4 quiet pairs; floor 1.50x): below floor "
        f"({ROUNDS}). Next: bench/scaling.png and python -m pipeline.scaling for the windows; where the time "
        "goes: all-reduce vs compute"
    )


def test_a_speedup_that_may_be_below_its_floor_is_inconclusive(tmp_path: Path) -> None:
    near = [140.0, 170.0, 160.0, 150.0]  # 1.40x .. 1.72x of W1: the interval crosses 1.5x
    o = judged(tmp_path, table(near, near))
    assert o.status == "inconclusive"
    assert o.message == (
        "proc world 2: speedup 1.55x (95% CI 1.40x to 1.68x over 4 quiet pairs; floor 1.50x): may be beyond the "
        "bound; thread world 2: speedup 1.55x (95% CI 1.40x to 1.68x over 4 quiet pairs; floor 1.50x): may be "
        f"beyond the bound ({ROUNDS}): not judged, rerun on a quiet machine (dvc repro -f scaling)"
    )


def test_noisy_quiet_windows_are_inconclusive(tmp_path: Path) -> None:
    noisy = [190.0, 60.0, 80.0, 100.0]  # the faster half 190/100: spread 62%
    s = table(W2, W2, [100.0, 100.0, 60.0, 100.0])
    s["results"]["thread"]["2"] = {**measurement(noisy, 100.0, at=slot("thread", 2))}
    s["results"]["thread"]["2"]["speedup"] = judged_spread(noisy)[0] / 100.0
    o = judged(tmp_path, s, profiles={"cpu": {**PROFILES["cpu"], "band": 0.9, "floors": {"2": 0.1}}})
    assert (o.status, o.threshold) == ("inconclusive", "2:0.1x; band 90%; spread <= 50%; contention <= 50%")
    assert o.message == (
        "thread world 2 spread 62% (faster half of its quiet windows) above 50% "
        f"({ROUNDS}): not judged, rerun on a quiet machine (dvc repro -f scaling)"
    )


def test_launchers_surely_apart_fail_and_maybe_apart_are_inconclusive(tmp_path: Path) -> None:
    o = judged(tmp_path, table(W2, [r * 2 for r in W2]))
    assert o.status == "fail"
    assert o.message == (
        "world 2: thread 190 vs proc 381 tok/s, thread/proc -50% (95% CI -50% to -50% over 4 quiet pairs; band "
        f"25%): the launchers differ ({ROUNDS}). Next: bench/scaling.png and python -m pipeline.scaling for the "
        "windows; where the time goes: all-reduce vs compute"
    )
    wide = [190.0, 150.0, 140.0, 130.0]
    o = judged(tmp_path / "b", table(wide, [r * 1.2 for r in W2]))
    assert o.status == "inconclusive"
    assert (
        "world 2: thread 170 vs proc 229 tok/s, thread/proc -36% (95% CI -43% to -17% over 4 quiet pairs"
        in o.message
    )
    assert "band 25%): may be beyond the bound" in o.message


def test_contention_is_inconclusive_and_names_what_held_the_cpus(tmp_path: Path) -> None:
    # thread world 1 was starved in three of four cycles: 1.8x slower there, as a neighbour would make it
    s = table(thread1=[100.0, 55.0, 56.0, 54.0])
    s["results"]["thread"]["2"]["speedup"] = (
        judged_spread(W2)[0] / judged_spread([100.0, 55.0, 56.0, 54.0])[0]
    )
    busy(s, "thread", 1, [0.0, 0.7, 0.75, 0.8])
    o = judged(tmp_path, s)
    assert o.status == "inconclusive"
    assert o.message == (
        "contention: world 1 thread vs proc: 1 of 4 pairs quiet (need 4); thread world 2 vs world 1: 1 of 4 pairs "
        "quiet (need 4); other processes held 75% of the 2 CPUs (median of 3 windows above the 50% limit), up to "
        "5 tasks runnable, the measured threads waited 50% of their runnable time "
        f"({ROUNDS}): not judged, rerun on a quiet machine (dvc repro -f scaling)"
    )
    # a launcher that slow in every window of a quiet machine is judged and failed (the negative control)
    slow = [x * 0.55 for x in W1]
    o = judged(tmp_path / "quiet", table(thread1=slow))
    assert o.status == "fail" and "world 1: thread 55 vs proc 100 tok/s, thread/proc -45%" in o.message


def test_a_failure_on_quiet_pairs_wins_over_contention_elsewhere(tmp_path: Path) -> None:
    s = busy(table(W2, [r * 2 for r in W2]), "thread", 1, [0.9] * 4)
    o = judged(tmp_path, s)
    assert o.status == "fail" and o.message.startswith("world 2: thread 190 vs proc 381 tok/s")


def test_a_real_slowdown_under_contention_still_fails_on_its_quiet_pairs(tmp_path: Path) -> None:
    """Two quiet cycles of four are enough when params ask for two: a launcher at half speed fails."""
    s = table(W2, [r * 2 for r in W2])
    busy(s, "proc", 2, [0.9, 0.0, 0.9, 0.0])
    params = FakeParams(copy.deepcopy(dict(PARAMS)), scaling={**SC, "windows": 2})
    s2 = copy.deepcopy(s)
    for by_world in s2["results"].values():
        for r in by_world.values():
            r["rounds"] = 2
    params["scaling"]["max_rounds"] = 2
    o = judged(tmp_path, s2, params=params)
    assert o.status == "fail" and "thread/proc -50% (95% CI -50% to -50% over 2 quiet pairs" in o.message


def test_the_threshold_percentages_are_rounded(tmp_path: Path) -> None:
    o = judged(tmp_path, table(), profiles={"cpu": {**PROFILES["cpu"], "max_contention": 0.554}})
    assert o.threshold == "2:1.5x; band 25%; spread <= 50%; contention <= 55%"


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
    assert shape_problems(s, measured_with(PARAMS)) == [
        "profile gpu, params.yaml gives cpu",
        "worlds_requested [1, 2, 4], params.yaml gives [1, 2]",
        "per_rank_batch 8, params.yaml gives 4",
        "seq_len 32, params.yaml gives 16",
        "precision bf16, params.yaml gives fp32",
    ]
    s = table()
    del s["results"]["proc"]
    s["results"]["thread"].pop("2")
    assert shape_problems(s, measured_with(PARAMS)) == [
        "launchers ['thread'], params.yaml gives ['proc', 'thread']",
        "thread: world 2 missing from the table",
    ]
    params = FakeParams(copy.deepcopy(dict(PARAMS)))
    params["scaling"]["worlds"] = [1, 2, 4]
    s = table()
    s["worlds_requested"] = [1, 2, 4]
    assert (
        shape_problems(s, measured_with(params)) == []
    )  # world 4 beyond the 2 devices present is not asked for
    o = judged(tmp_path, {**table(), "seq_len": 8})
    assert (
        o.status == "fail"
        and o.message == "bench/scaling.json: seq_len 8, params.yaml gives 16. Rerun: dvc repro scaling"
    )


def test_a_missing_world_is_named() -> None:
    s = table()
    del s["results"]["proc"]["2"]
    assert shape_problems(s, measured_with(PARAMS)) == ["proc: world 2 missing from the table"]


def test_rounds_are_whole_and_capped_and_every_window_has_its_readings() -> None:
    def r(n: int, rounds: int | None = None, m: int | None = None) -> dict:
        out = {"windows": [1.0] * n, "readings": readings(n if m is None else m, 0)}
        return out if rounds is None else {**out, "rounds": rounds}

    assert round_problems("thread world 2", r(8, 2), SC) == []
    assert round_problems("thread world 2", r(4), SC) == []
    assert round_problems("thread world 2", r(5, 1), SC) == [
        "thread world 2: 5 windows, 1 rounds of params.yaml scaling.windows 4"
    ]
    assert round_problems("w", r(12, 3), SC) == ["w: 3 rounds, params.yaml scaling.max_rounds 2"]
    assert round_problems("w", r(8, 2), {"windows": 4}) == ["w: 2 rounds, params.yaml scaling.max_rounds 1"]
    assert round_problems("w", r(4, 1, 3), SC) == ["w: 3 readings for 4 windows"]


def test_windows_must_have_been_taken_in_turn() -> None:
    s = table()
    assert turn_problems(s) == []
    # proc world 2 measured after everyone else, not in turn: its second window began before ...
    s["results"]["proc"]["2"]["readings"] = readings(4, 0)
    for i, x in enumerate(s["results"]["proc"]["2"]["readings"]):
        x["start_s"] = 1000.0 + i
    assert turn_problems(s) == [
        "windows not taken in turn: proc world 1 window 2 began at 102.000 s, before proc world 2 window 1 "
        "(1000.000 s)"
    ]
    s = table()
    s["results"]["thread"]["1"]["readings"][2]["start_s"] = s["results"]["proc"]["2"]["readings"][1][
        "start_s"
    ]
    assert turn_problems(s) == [
        "windows not taken in turn: thread world 1 window 3 began at 104.000 s, before thread world 2 window 2 "
        "(105.000 s)"
    ]
    s = table()
    s["results"]["thread"]["2"]["windows"].append(190.0)
    s["results"]["thread"]["2"]["readings"] = readings(5, 7)
    assert turn_problems(s) == [
        "windows not taken in turn: the measurements have different numbers of readings (proc world 1 4, "
        "proc world 2 4, thread world 1 4, thread world 2 5)"
    ]
    assert turn_problems({"results": {}}) == []


def test_the_gate_refuses_windows_not_taken_in_turn(tmp_path: Path) -> None:
    s = table()
    for i, x in enumerate(s["results"]["proc"]["2"]["readings"]):
        x["start_s"] = 1000.0 + i
    o = judged(tmp_path, s)
    assert o.status == "fail" and o.message.startswith("bench/scaling.json: windows not taken in turn: ")


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


def test_verdicts_sort_what_was_found() -> None:
    th = PROFILES["cpu"]
    assert verdicts(table(), th, 4) == ([], [], [])
    sure, unsure, contended = verdicts(busy(table(W2, [r * 2 for r in W2]), "thread", 1, [0.9] * 4), th, 4)
    assert [x.split(":")[0] for x in sure] == ["world 2"] and unsure == []
    assert contended[:2] == [
        "world 1 thread vs proc: 0 of 4 pairs quiet (need 4)",
        "thread world 2 vs world 1: 0 of 4 pairs quiet (need 4)",
    ]
    assert contended[2].startswith(
        "other processes held 90% of the 2 CPUs (median of 4 windows above the 50%"
    )


def test_contention_text_names_busy_windows_and_uneven_pairs() -> None:
    from contracts.perf_record import Comparison, Judged

    j = Judged(Comparison("band", ("thread", 1), ("proc", 1), 0.25), "contended", 0.0, 0.0, 0.0, 4)
    th = {**PROFILES["cpu"], "max_contention": 0.5}
    assert contention_text(table(), [j], th) == "too few windows (none above the contention limits)"
    s = busy(table(), "proc", 1, [0.6, 0.5, 0.0, 0.8])  # 0.5: at the limit, quiet
    s["results"]["proc"]["1"]["readings"][0]["runnable"] = 9
    assert contention_text(s, [j], th) == (
        "other processes held 70% of the 2 CPUs (median of 2 windows above the 50% limit), up to 9 tasks runnable, "
        "the measured threads waited 49% of their runnable time"
    )
    assert contention_text(s, [j], {**th, "max_contention": 0.654}) == (
        "other processes held 80% of the 2 CPUs (median of 1 windows above the 65% limit), up to 5 tasks runnable, "
        "the measured threads waited 51% of their runnable time"
    )
    # thread world 1's windows 0.5 and 0.6 beside proc's 0.0 and 0.0: uneven pairs, named with their gaps
    s = busy(table(), "thread", 1, [0.5, 0.0, 0.3, 0.6])
    uneven = {**th, "max_contention": 0.7, "max_contention_gap": 0.25}
    assert contention_text(s, [j], uneven) == (
        "in 3 pairs the two windows saw other processes' shares 30-60 points apart (limit 25)"
    )
    assert contention_text(s, [j], {**uneven, "max_contention": 0.55}) == (
        "other processes held 60% of the 2 CPUs (median of 1 windows above the 55% limit), up to 5 tasks runnable, "
        "the measured threads waited 46% of their runnable time; in 2 pairs the two windows saw other processes' "
        "shares 30-50 points apart (limit 25)"
    )
    # at the limits: a window at max_contention is quiet, a pair exactly max_contention_gap apart is alike
    s = busy(busy(table(), "thread", 1, [0.5, 0.75, 0.25, 0.0]), "proc", 1, [0.0, 0.5, 0.0, 0.0])
    edges = {**th, "max_contention": 0.5, "max_contention_gap": 0.25}
    assert contention_text(s, [j], edges) == (
        "other processes held 75% of the 2 CPUs (median of 1 windows above the 50% limit), up to 3 tasks runnable, "
        "the measured threads waited 50% of their runnable time; in 1 pairs the two windows saw other processes' "
        "shares 50-50 points apart (limit 25)"
    )
    # without a contention limit, only the gaps: here 0.25 apart where both saw a quarter of the machine
    s = busy(busy(table(), "thread", 1, [0.5, 0.75, 0.25, 0.0]), "proc", 1, [0.25, 0.25, 0.25, 0.25])
    no_limit = {k: v for k, v in edges.items() if k != "max_contention"}
    assert contention_text(s, [j], {**no_limit, "max_contention_gap": 0.2}) == (
        "in 3 pairs the two windows saw other processes' shares 25-50 points apart (limit 20)"
    )
    floor = Judged(Comparison("floor", ("thread", 2), ("thread", 1), 1.5), "contended", 0.0, 0.0, 0.0, 1)
    s = busy(table(), "thread", 1, [0.5, 0.0, 0.3, 0.6])
    assert contention_text(s, [floor], {**uneven, "max_contention_gap": 0.55}) == (
        "in 1 pairs the two windows saw other processes' shares 60-60 points apart (limit 55)"
    )


def test_an_uneven_pair_is_not_judged_and_the_threshold_says_so(tmp_path: Path) -> None:
    profiles = {"cpu": {**PROFILES["cpu"], "max_contention": 0.7, "max_contention_gap": 0.254}}
    s = busy(table(thread1=[x * 0.55 for x in W1]), "thread", 1, [0.3, 0.3, 0.3, 0.3])
    s["results"]["thread"]["2"]["speedup"] = (
        judged_spread(W2)[0] / judged_spread(s["results"]["thread"]["1"]["windows"])[0]
    )
    o = judged(tmp_path, s, profiles=profiles)
    assert o.threshold == "2:1.5x; band 25%; spread <= 50%; contention <= 70%, pairs within 25 points"  # 25.4
    assert (
        o.status == "inconclusive"
        and "in 8 pairs the two windows saw other processes' shares 30-30 points" in o.message
    )
    o = judged(tmp_path / "b", s, profiles={"cpu": {**profiles["cpu"], "max_contention_gap": 0.31}})
    assert o.status == "fail"  # the same slow launcher in windows alike enough: judged


def test_described_and_crowded_name_each_kind() -> None:
    from contracts.perf_record import Comparison, Judged

    windows = {("thread", 2): W2, ("proc", 2): W2, ("thread", 1): W1}
    band = Judged(Comparison("band", ("thread", 2), ("proc", 2), 0.4), "beyond", 0.5, 0.25, 1.0, 7)
    floor = Judged(Comparison("floor", ("thread", 2), ("thread", 1), 0.8), "below", -0.5, -0.6, -0.45, 6)
    assert described(band, windows) == (
        "world 2: thread 190 vs proc 190 tok/s, thread/proc +50% (95% CI +25% to +100% over 7 quiet pairs; band 40%)"
    )
    assert described(floor, windows) == (
        "thread world 2: speedup 0.50x (95% CI 0.40x to 0.55x over 6 quiet pairs; floor 0.80x)"
    )
    assert crowded(floor, windows, 5) == "thread world 2 vs world 1: 6 of 4 pairs quiet (need 5)"
    assert crowded(band, windows, 9) == "world 2 thread vs proc: 7 of 4 pairs quiet (need 9)"


def test_windows_at_the_same_instant_are_not_in_turn() -> None:
    s = table()
    s["results"]["thread"]["1"]["readings"][2]["start_s"] = s["results"]["thread"]["2"]["readings"][1][
        "start_s"
    ]
    assert turn_problems(s) == [
        "windows not taken in turn: thread world 1 window 3 began at 105.000 s, before thread world 2 window 2 "
        "(105.000 s)"
    ]


def test_the_last_cycle_is_checked_too_and_worlds_are_named_in_numeric_order() -> None:
    s = table()
    s["results"]["proc"]["1"]["readings"][3]["start_s"] = 204.0  # cycle 4 began inside cycle 3
    assert turn_problems(s) == [
        "windows not taken in turn: proc world 1 window 4 began at 204.000 s, before thread world 2 window 3 "
        "(205.000 s)"
    ]
    s = table()
    s["results"]["thread"]["10"] = measurement([*W2, 190.0], 100.0, at=slot("thread", 10))
    assert turn_problems(s) == [
        "windows not taken in turn: the measurements have different numbers of readings (proc world 1 4, "
        "proc world 2 4, thread world 1 4, thread world 2 4, thread world 10 5)"
    ]


# ---- the judge on records built by hand, no tree (gates/reading/measurements.py reads them) ----------


def test_the_judge_takes_plain_records_and_resolves_params_only_when_floors_exist() -> None:
    from gates.reading.deferred import Deferred
    from gates.reading.measurements import ScalingRecords

    r = ScalingRecords(table(), Deferred(measured_with(PARAMS)))
    o = scaling(r, PROFILES)
    assert (o.status, o.measured, o.threshold) == ("pass", "proc 1.90x thread 1.90x @2", THRESHOLD)
    unresolved = ScalingRecords(table(), Deferred(error=KeyError("scaling")))
    o = scaling(unresolved, {"gpu": PROFILES["cpu"]})  # no floors: failed before params were needed
    assert (o.status, o.measured, o.threshold) == ("fail", None, None)
    assert o.message.startswith("bench/scaling.json was measured on profile 'cpu', which has no floors")
    try:
        scaling(unresolved, PROFILES)
    except KeyError as e:
        assert e.args == ("scaling",)
    else:
        raise AssertionError("the params' error was not raised where they are needed")
