"""gates/judges/scaling.py under mutation (docs/judge-mutation.md): the gate's entry and its picture.

The gate as `python -m gates check` runs it (GATE.run on a torch-free artifact tree), and the picture:
what it draws, read from the matplotlib figure (to_svg replaced: the figure, not its bytes, is under
test), and its caption, exactly.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from test_judge_scaling import (
    PARAMS,
    PROFILES,
    SC,
    THRESHOLD,
    W1,
    W2,
    FakeParams,
    judged,
    measurement,
    slot,
    table,
)

from contracts.perf_record import judged_spread
from gates.judges import scaling as sc
from gates.judges.gate import NoPicture
from gates.judges.scaling import recompute, scaling, shape_problems, verdicts
from gates.reading.measurements import measured_with, read_scaling
from judge_trees import Tree

LINEAR = "#9e9e9e"


def tree(root: Path, s: dict) -> Tree:
    t = Tree(root, params=PARAMS)
    (root / "bench").mkdir(parents=True, exist_ok=True)
    (root / "bench" / "scaling.json").write_text(json.dumps(s))
    t.record_out("scaling", "bench/scaling.json")
    return t


def test_the_gate_runs_the_verdict_on_the_profiles_of_its_thresholds(tmp_path: Path) -> None:
    o = sc.GATE.run(tree(tmp_path, table()).artifacts(), {"scaling": PROFILES})
    assert (o.status, o.measured, o.threshold) == ("pass", "proc 1.90x thread 1.90x @2", THRESHOLD)
    assert sc.GATE.threshold({"scaling": {"cpu": {}, "h200": {}}}) == (
        "speedup floors and band of the measured profile (cpu, h200)"
    )
    assert (sc.GATE.id, sc.GATE.takes, sc.GATE.picture) == ("scaling", ("scaling",), sc.scaling_picture)


def test_the_gate_names_what_it_checks_why_and_where_to_look() -> None:
    assert sc.GATE.checks == (
        "bench/scaling.json: every world present for each launcher, speedup(w) >= floor(w), thread and proc "
        "throughput within a band"
    )
    assert sc.GATE.why == "a change that keeps numerics but loses throughput at scale is still a regression"
    assert sc.GATE.investigate == (
        "bench/scaling.png; rerun one launcher/world with python -m pipeline.scaling; on GPU profile the step "
        "(python -m pipeline.bench) and the all-reduce overlap"
    )


def errorbars(ax) -> list[tuple]:
    """(label, xs, ys, [(low, high) of each whisker]) of each launcher's errorbar."""
    out = []
    for c in ax.containers:
        data, _, (whiskers,) = c.lines
        spans = [(float(seg[0][1]), float(seg[1][1])) for seg in whiskers.get_segments()]
        out.append((c.get_label(), list(data.get_xdata()), list(data.get_ydata()), spans))
    return out


def line_of(line) -> tuple:
    return (list(line.get_xdata()), list(line.get_ydata()), line.get_color(), line.get_linestyle(),
            line.get_marker(), line.get_markersize(), line.get_markeredgewidth(), line.get_label())  # fmt: skip


CAPTION = (
    "Left: tokens per second per world and launcher on cpu (median window; whiskers: slowest to fastest "
    "window). Right: speedup over world 1 against its floor (orange bars), below-floor points marked ×. Pass: "
    "every world measured for each launcher, every speedup on or above its floor, thread and proc within 25% "
    "of each other."
)


def test_the_picture_draws_throughput_whiskers_speedups_floors_and_linear(tmp_path: Path, drawn) -> None:
    pic = sc.GATE.draw(tree(tmp_path, table()).artifacts(), {"scaling": PROFILES})
    assert (pic.html, pic.caption) == ("<svg/>", CAPTION)
    (fig,) = drawn
    left, right = fig.axes
    assert list(fig.get_size_inches()) == [7.2, 2.9]
    t1, t2 = (
        table()["results"]["thread"]["1"]["tokens_per_s"],
        table()["results"]["thread"]["2"]["tokens_per_s"],
    )
    whisk = [(99.0, 101.0), (189.0, 191.0)]  # slowest .. fastest window
    assert errorbars(left) == [("proc", [1, 2], [t1, t2], whisk), ("thread", [1, 2], [t1, t2], whisk)]
    assert (left.get_xlabel(), left.get_ylabel(), left.get_title()) == (
        "world (ranks)", "tokens/s (faster half's median)", "throughput")  # fmt: skip
    assert list(left.get_xticks()) == [1, 2] and left.get_xlim() == (0.6, 2.4)
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["proc", "thread"]
    s2 = table()["results"]["thread"]["2"]["speedup"]
    proc, thread, floor, linear = right.get_lines()
    assert line_of(proc)[:2] + line_of(proc)[3:5] + line_of(proc)[7:] == ([1, 2], [1.0, s2], "-", "o", "proc")
    assert line_of(thread)[:2] + line_of(thread)[7:] == ([1, 2], [1.0, s2], "thread")
    assert line_of(floor) == ([2], [1.5], "#ef6c00", "None", "_", 24, 2.5, "floor")
    assert line_of(linear)[:5] + line_of(linear)[7:] == ([1, 2], [1, 2], LINEAR, ":", "None", "linear")
    assert (right.get_xlabel(), right.get_ylabel(), right.get_title()) == (
        "world (ranks)", "speedup over world 1 (×)", "speedup (cpu profile)")  # fmt: skip
    assert list(right.get_xticks()) == [1, 2] and right.get_xlim() == (0.6, 2.4)
    legend = right.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["proc", "thread", "floor", "linear"]
    assert legend._loc == 1  # two panels: the legend inside, upper right


def test_a_speedup_below_its_floor_is_crossed_and_a_missing_world_named(tmp_path: Path, drawn) -> None:
    s = table(thread2=[140.0, 141.0, 139.0, 140.0])
    s["worlds"] = s["worlds_requested"] = [1, 2, 4]
    s["results"]["proc"]["4"] = measurement([380.0, 381.0, 379.0, 380.0], 100.5)
    profiles = {"cpu": {"floors": {"2": 1.5, "4": 3.79}, "band": 0.104, "max_spread": 0.5}}
    pic = sc.GATE.draw(tree(tmp_path, s).artifacts(), {"scaling": profiles})
    assert pic.caption == CAPTION.replace("25%", "10%") + " Missing from the table: thread world 4."
    left, right = drawn[0].axes
    assert [(label, xs) for label, xs, _, _ in errorbars(left)] == [("proc", [1, 2, 4]), ("thread", [1, 2])]
    proc, proc_x, thread, thread_x, floor, linear = right.get_lines()  # proc 3.786 at 4, floor 3.79
    s4, t2 = s["results"]["proc"]["4"]["speedup"], s["results"]["thread"]["2"]["speedup"]
    assert list(proc.get_ydata()) == [1.0, table()["results"]["proc"]["2"]["speedup"], s4]
    assert line_of(proc_x) == ([4], [s4], "#c62828", "None", "x", 10, 2, "_child1")
    assert line_of(thread_x) == ([2], [t2], "#c62828", "None", "x", 10, 2, "_child3")
    assert list(thread.get_xdata()) == [1, 2]
    assert line_of(floor)[:2] == ([2, 4], [1.5, 3.79])
    assert line_of(linear)[:2] == ([1, 2, 4], [1, 2, 4]) and right.get_xlim() == (0.6, 4.4)
    assert left.get_xlim() == (0.6, 4.4) and list(left.get_xticks()) == [1, 2, 4]


def test_a_speedup_on_its_floor_is_not_crossed(tmp_path: Path, drawn) -> None:
    s = table()
    s2 = s["results"]["proc"]["2"]["speedup"]
    sc.GATE.draw(
        tree(tmp_path, s).artifacts(), {"scaling": {"cpu": {**PROFILES["cpu"], "floors": {"2": s2}}}}
    )
    assert [line.get_label() for line in drawn[0].axes[1].get_lines()] == [
        "proc",
        "thread",
        "floor",
        "linear",
    ]


def test_a_profile_without_floors_has_no_picture(tmp_path: Path, drawn) -> None:
    with pytest.raises(NoPicture, match=r"^profile 'cpu' has no floors in params.yaml gates.scaling$"):
        sc.GATE.draw(tree(tmp_path, table()).artifacts(), {"scaling": {"gpu": PROFILES["cpu"]}})
    assert drawn == []


def panel(s: dict[str, Any]):
    from gates.judges import plots

    _, (ax,) = plots.figure()
    return ax, sc._throughput_panel(ax, s)


def test_whiskers_never_go_negative_when_tokens_per_s_lies_outside_its_windows() -> None:
    s = {"worlds": [1, 2, 3], "results": {"thread": {
        "1": {"tokens_per_s": 50.0, "windows": [100.0, 120.0]},  # claimed below every window
        "2": {"tokens_per_s": 500.0, "windows": [100.0, 120.0]},  # above every window
        "3": {"tokens_per_s": 7.0, "windows": []},  # no windows: no whisker
    }}}  # fmt: skip
    ax, missing = panel(s)
    assert missing == []
    assert errorbars(ax) == [
        ("thread", [1, 2, 3], [50.0, 500.0, 7.0], [(50.0, 120.0), (100.0, 500.0), (7.0, 7.0)])
    ]
    ((_, (low, _high)),) = [(c, c.lines[1]) for c in ax.containers]
    assert (low.get_marker(), list(low.get_xdata())) == (
        "_",
        [1, 2, 3],
    ) and low.get_markersize() == 6  # capsize 3


def test_the_panel_names_each_missing_world_per_launcher() -> None:
    s = {"worlds": [1, 2, 4], "results": {
        "thread": {"1": {"tokens_per_s": 1.0, "windows": [1.0]}},
        "proc": {"2": {"tokens_per_s": 2.0, "windows": [2.0]}},
    }}  # fmt: skip
    ax, missing = panel(s)
    assert missing == ["proc world 1", "proc world 4", "thread world 2", "thread world 4"]
    assert [c.get_label() for c in ax.containers] == ["proc", "thread"]
    assert [line.get_marker() for c in ax.containers for line in [c.lines[0]]] == ["o", "o"]
    assert list(ax.get_xticks()) == [1, 2, 4]
    assert ax.get_legend()._loc == 2  # one panel: right of the plot


# -- the verdict's edges (the survivors of tests/unit/test_judge_scaling.py) ---------------------------------


def measured_table(windows: dict[str, dict[int, list[float]]], worlds: list[int]) -> dict:
    """bench/scaling.json with these windows per launcher and world, the figures recomputed, taken in turn."""
    s = {**table(), "worlds": worlds, "worlds_requested": worlds, "device_count": max(worlds)}
    s["results"] = {}
    for launcher, by_world in windows.items():
        base = judged_spread(by_world[1])[0] if 1 in by_world else None
        s["results"][launcher] = {
            str(w): measurement(ws, base, at=slot(launcher, w)) for w, ws in by_world.items()
        }
    return s


def params_for(worlds: list[int]) -> FakeParams:
    return FakeParams(copy.deepcopy(dict(PARAMS)), scaling={**SC, "worlds": worlds})


def judged_as(root: Path, s: dict, profile: dict, worlds: list[int]):
    t = tree(root, s)
    t.params = params_for(worlds)
    return scaling(read_scaling(t.artifacts()), {"cpu": profile})


SLOW = [w * 0.4 for w in W1], [w * 0.4 for w in W2]  # thread at 40% of proc: 60% apart


def test_a_pass_within_a_wide_band_and_the_threshold_lists_each_floor(tmp_path: Path) -> None:
    s = measured_table({"thread": {1: SLOW[0], 2: SLOW[1]}, "proc": {1: W1, 2: W2}}, [1, 2])
    o = judged_as(tmp_path, s, {"floors": {"2": 1.5, "1": 0.9}, "band": 0.7, "max_spread": 0.9}, [1, 2])
    assert (o.status, o.threshold) == ("pass", "1:0.9x, 2:1.5x; band 70%; spread <= 90%")
    assert o.message.startswith(
        "cpu on cpu: worlds [1, 2] recomputed from the windows, floors met and launchers"
    )
    o = judged_as(tmp_path / "b", s, {"floors": {"2": 1.5}, "band": 0.59, "max_spread": 0.9}, [1, 2])
    assert o.status == "fail"  # 60% apart, beyond a 59% band


def test_a_spread_at_max_spread_is_judged_and_above_it_is_noisy(tmp_path: Path) -> None:
    spread = judged_spread(W1)[1]  # the wider of the two: at the bound, not over it
    assert spread > judged_spread(W2)[1]
    o = judged(tmp_path, table(), profiles={"cpu": {**PROFILES["cpu"], "max_spread": spread}})
    assert o.status == "pass"
    o = judged(tmp_path / "b", table(), profiles={"cpu": {**PROFILES["cpu"], "max_spread": 0.00499}})
    assert (o.status, o.measured) == ("inconclusive", "proc 1.90x thread 1.90x @2")
    assert o.threshold == "2:1.5x; band 25%; spread <= 0%; contention <= 50%"  # 0.499% (not 1%)
    assert o.message.startswith(
        "proc world 1 spread 1% (faster half of its quiet windows) above 0%; proc world 2 spread 1% (faster "
        "half of its quiet windows) above 0%; thread world 1 spread 1%"
    )


def test_refused_and_failed_verdicts_keep_measured_and_threshold(tmp_path: Path) -> None:
    o = judged(tmp_path, {**table(), "seq_len": 8})
    assert (o.status, o.measured, o.threshold) == ("fail", "proc 1.90x thread 1.90x @2", THRESHOLD)
    slow = [140.0, 141.0, 139.0, 140.0]
    o = judged(tmp_path / "b", table(slow, slow))
    assert (o.status, o.measured, o.threshold) == ("fail", "proc 1.40x thread 1.40x @2", THRESHOLD)


def test_gaps_that_may_exceed_the_band_are_joined_and_inconclusive(tmp_path: Path) -> None:
    wide1, wide2 = [100.0, 75.0, 70.0, 65.0], [190.0, 150.0, 140.0, 130.0]
    s = measured_table({"thread": {1: wide1, 2: wide2}, "proc": {1: [w * 1.2 for w in W1], 2: [w * 1.2 for w in W2]}},
                       [1, 2])  # fmt: skip
    o = judged_as(tmp_path, s, {"floors": {"2": 1.5}, "band": 0.25, "max_spread": 0.9}, [1, 2])
    assert (o.status, o.measured, o.threshold) == (
        "inconclusive",
        "proc 1.90x thread 1.94x @2",
        "2:1.5x; band 25%; spread <= 90%",
    )
    assert o.message == (
        "world 1: thread 88 vs proc 121 tok/s, thread/proc -39% (95% CI -46% to -17% over 4 quiet pairs; band "
        "25%): may be beyond the bound; world 2: thread 170 vs proc 229 tok/s, thread/proc -36% (95% CI -43% to "
        "-17% over 4 quiet pairs; band 25%): may be beyond the bound (rounds proc 1/1, thread 1/1 of at most 2 "
        "(worlds 1/2)): not judged, rerun on a quiet machine (dvc repro -f scaling)"
    )


def test_launcher_gaps_in_world_order_with_their_interval() -> None:
    fast = {w: [x * 3 for x in ws] for w, ws in ((1, W1), (2, W2), (10, W2))}
    s = measured_table({"thread": fast, "proc": {1: W1, 2: W2, 10: W2}}, [1, 2, 10])
    sure, unsure, contended = verdicts(s, {"floors": {}, "band": 0.6, "max_spread": 1.0}, 4)
    assert (unsure, contended) == ([], [])  # 3x is beyond 1 / (1 - 0.6) = 2.5x
    assert [x.split(":")[0] for x in sure] == ["world 1", "world 2", "world 10"]
    assert sure[1] == (
        "world 2: thread 572 vs proc 190 tok/s, thread/proc +200% (95% CI +200% to +200% over 4 quiet pairs; "
        "band 60%): the launchers differ"
    )
    del s["results"]["proc"]
    assert verdicts(s, {"floors": {}, "band": 0.6, "max_spread": 1.0}, 4) == ([], [], [])


def test_recompute_in_world_order_and_a_zero_spread_within_its_absolute_tolerance() -> None:
    flat = [100.0] * 4
    s = measured_table({"thread": {1: flat, 2: W2, 10: W2}}, [1, 2, 10])
    s["results"]["thread"]["1"]["spread"] = 5e-13  # 0 within abs_tol 1e-12
    s["results"]["thread"]["2"]["speedup"] = 9.0
    s["results"]["thread"]["10"]["speedup"] = 8.0
    table_, wrong = recompute(s)
    assert list(table_["thread"]) == [1, 2, 10]
    assert wrong == [
        "thread world 2: speedup 9 claimed, the windows give 1.905",
        "thread world 10: speedup 8 claimed, the windows give 1.905",
    ]
    s["results"]["thread"]["1"]["spread"] = 2e-12
    assert recompute(s)[1][0] == "thread world 1: spread 2e-12 claimed, the windows give 0"


def test_shape_names_the_worlds_measured_every_missing_world_and_each_bad_round() -> None:
    params = params_for([1, 2, 4])
    s = measured_table({"thread": {1: W1}, "proc": {1: W1, 2: W2, 4: W2}}, [1, 2, 4])
    s["worlds"] = [1, 2]
    s["results"]["proc"]["2"]["windows"] = [*W2, 190.0]
    assert shape_problems(s, measured_with(params)) == [
        "worlds [1, 2], params.yaml gives [1, 2, 4]",
        "proc world 2: 5 windows, 1 rounds of params.yaml scaling.windows 4",
        "thread: world 2, 4 missing from the table",
    ]


def test_the_caption_names_every_missing_world(tmp_path: Path, drawn) -> None:
    s = measured_table({"thread": {1: W1}, "proc": {1: W1, 2: W2, 4: W2}}, [1, 2, 4])
    profiles = {"cpu": {"floors": {"2": 1.5}, "band": 0.25, "max_spread": 0.5}}
    pic = sc.GATE.draw(tree(tmp_path, s).artifacts(), {"scaling": profiles})
    assert pic.caption == CAPTION + " Missing from the table: thread world 2, thread world 4."
