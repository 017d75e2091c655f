"""The pictures' shared pieces (gates/judges/pictures.py) and the perf gates' picture
(gates/judges/perf.py perf_picture) under mutation (docs/judge-mutation.md), in-process.

Each test draws on a real matplotlib figure (the `drawn` fixture keeps it instead of its SVG bytes)
and reads back what a reader of the report sees: the points, the limit lines, their colours, widths
and labels, the axes and the caption. The numbers are chosen so that a mutated constant (an
off-by-one factor, a sign, a min for a max) lands on a different asserted value.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_hex
from test_judge_perf_entry import ENV, MIB, Runs, bless, metrics, stage

from contracts.errors import ValidationError
from gates.judges import perf, pictures, plots
from gates.judges.gate import NoPicture, NothingMeasured, Picture, Unpaired
from gates.reading.artifacts import ArtifactError, NonFinite, StageNotRun
from gates.reading.registry_records import read_perf
from gates.reading.runs import Run
from gates.reading.runs import Runs as RunRecords
from registry import index
from registry.store import RegistryError

BLUE, GREY, LIMIT, PURPLE = "#1565c0", "#9e9e9e", "#ef6c00", "#6a1b9a"
# 0.6: 100 x 0.6 = 60 and 101 x 0.6 = 60.6 print differently; 1 + 0.6, 1 - 0.6 and 2 + 0.6 differ
PERF = {"perf": {"cpu": {"throughput": "judge", "slowdown": 0.6, "memory_growth": 0.6}}}


def perf_picture(a: Any, t: dict, memory: bool) -> Picture:
    """perf.perf_picture on what read_perf reads from `a`."""
    return perf.perf_picture(read_perf(a, t), t, memory)


@pytest.fixture(autouse=True)
def close_figures():
    """The `drawn` fixture keeps the figures to_svg would have closed: close them after each test."""
    yield
    plt.close("all")


def line_of(line) -> tuple:
    return (list(line.get_xdata()), list(line.get_ydata()), line.get_color(), line.get_linestyle(),
            line.get_marker(), line.get_markersize(), line.get_linewidth(), line.get_label())  # fmt: skip


def hlines_of(c) -> tuple:
    """(segments, colour, width, dashed, label) of one ax.hlines collection."""
    segs = [[tuple(float(v) for v in p) for p in s] for s in c.get_segments()]
    (colour,), (width,), ((_, dashes),) = c.get_colors(), c.get_linewidths(), c.get_linestyles()
    return segs, to_hex(colour), float(width), dashes is not None, c.get_label()


def registry(root: Path) -> None:
    (root / "registry").mkdir()
    index.create(root / "registry")


def thread_peaks(entry: dict, *mib: int) -> dict:
    entry["perf"]["peak_memory"]["per_rank"] = [{"rank": r, "bytes": m * MIB} for r, m in enumerate(mib)]
    return entry


# -- perf_picture: memory -----------------------------------------------------------------------------


def test_memory_picture_draws_each_ranks_peak_against_the_baselines_largest_plus_growth(
    tmp_path: Path, drawn
) -> None:
    bless(
        tmp_path, {"single": stage("single", peak=50 * MIB), "thread": thread_peaks(stage("thread"), 80, 60)}
    )
    runs = {"single": metrics("single", peak=40 * MIB), "thread": thread_peaks(metrics("thread"), 70, 90)}
    pic = perf_picture(Runs(tmp_path, runs), PERF, memory=True)
    assert pic == Picture(
        "<svg/>",
        "Peak memory of every rank of each training stage (cpu_max_rss) against the blessed baseline of "
        "this environment. Pass: every rank at or under the orange limit (baseline peak + 60%).",
    )
    (fig,) = drawn
    (ax,) = fig.axes
    assert list(fig.get_size_inches()) == [7.2, 2.8]
    single, thread = ax.get_lines()
    assert line_of(single) == ([0], [40.0], BLUE, "None", "o", 4.0, single.get_linewidth(), "this run")
    assert line_of(thread)[:6] == ([1, 1], [70.0, 90.0], BLUE, "None", "o", 4.0)
    assert thread.get_label().startswith("_")
    first, second = ax.collections
    assert hlines_of(first) == ([[(0 - 0.3, 80.0), (0 + 0.3, 80.0)]], LIMIT, 2.0, False, "limit")
    assert hlines_of(second)[:4] == ([[(1 - 0.3, 128.0), (1 + 0.3, 128.0)]], LIMIT, 2.0, False)
    assert second.get_label().startswith("_")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["this run", "limit"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["single", "thread"]
    assert list(ax.get_xticks()) == [0, 1] and ax.get_xlim() == (-0.6, 2 - 0.4)
    assert ax.get_ylabel() == "peak memory per rank (MiB)"


def test_a_stage_the_baseline_lacks_gets_no_limit_and_the_next_one_labels_nothing(
    tmp_path: Path, drawn
) -> None:
    bless(tmp_path, {"thread": stage("thread", peak=10 * MIB)})
    runs = {"single": metrics("single"), "thread": metrics("thread"), "proc": metrics("proc")}
    perf_picture(Runs(tmp_path, runs), PERF, memory=True)
    (ax,) = drawn[0].axes
    (limit,) = ax.collections
    assert hlines_of(limit)[:4] == ([[(1 - 0.3, 16.0), (1 + 0.3, 16.0)]], LIMIT, 2.0, False)
    assert not limit.get_label() or limit.get_label().startswith("_")
    assert [line_of(x)[:2] for x in ax.get_lines()] == [
        ([0], [100.0]),
        ([1, 1], [100.0, 100.0]),
        ([2], [100.0]),
    ]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["this run"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["single", "thread", "proc"]
    assert list(ax.get_xticks()) == [0, 1, 2] and ax.get_xlim() == (-0.6, 3 - 0.4)


@pytest.mark.parametrize("memory", [True, False])
def test_without_a_baseline_only_the_run_is_drawn(tmp_path: Path, drawn, memory: bool) -> None:
    registry(tmp_path)
    pic = perf_picture(Runs(tmp_path, {"thread": metrics("thread")}), PERF, memory=memory)
    assert " against no baseline (bless one to judge)" in pic.caption
    (ax,) = drawn[0].axes
    assert len(ax.collections) == 0 and len(ax.get_lines()) == 1
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["this run"]
    assert ax.get_xlim() == (-0.6, 1 - 0.4)


# -- perf_picture: throughput ---------------------------------------------------------------------------


def test_throughput_picture_draws_the_windows_the_baselines_median_and_the_tolerated_slowdown(
    tmp_path: Path, drawn
) -> None:
    # baseline windows 100, 50, 25 tok/s (one warm-up window dropped): median 50, mean 58.3
    bless(tmp_path, {"single": stage("single", seconds=(9.0, 1.0, 2.0, 4.0)), "proc": stage("proc")})
    runs = {"single": metrics("single", seconds=(1.0, 1.0, 2.0, 5.0)), "proc": metrics("proc")}
    pic = perf_picture(Runs(tmp_path, runs), PERF, memory=False)
    assert pic.caption == (
        "tokens/s of every steady window of each training stage against the blessed baseline of this "
        "environment: grey the baseline's median, dashed orange the tolerated slowdown (60%). Pass: the 95% "
        "confidence interval of the change (from both sets of windows) lies above it; fail: it lies below; "
        "inconclusive: it straddles it."
    )
    (ax,) = drawn[0].axes
    single, proc = ax.get_lines()
    assert line_of(single)[:6] + line_of(single)[7:] == ([0, 0, 0], [100.0, 50.0, 20.0], BLUE, "None", "o",
                                                         4.0, "this run")  # fmt: skip
    assert line_of(proc)[:2] == ([1, 1, 1], [100.0, 100.0, 100.0])
    med0, tol0, med1, tol1 = (hlines_of(c) for c in ax.collections)
    assert med0 == ([[(0 - 0.3, 50.0), (0 + 0.3, 50.0)]], GREY, 3.0, False, "baseline")
    assert tol0 == (
        [[(0 - 0.3, 50.0 * (1 - 0.6)), (0 + 0.3, 50.0 * (1 - 0.6))]],
        LIMIT,
        2.0,
        True,
        "tolerated",
    )
    assert med1[:4] == ([[(1 - 0.3, 100.0), (1 + 0.3, 100.0)]], GREY, 3.0, False)
    assert tol1[:4] == ([[(1 - 0.3, 100.0 * (1 - 0.6)), (1 + 0.3, 100.0 * (1 - 0.6))]], LIMIT, 2.0, True)
    assert med1[4].startswith("_") and tol1[4].startswith("_")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["this run", "baseline", "tolerated"]
    assert ax.get_ylabel() == "tokens/s per steady window"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["single", "proc"]


def test_the_device_of_the_first_run_picks_the_thresholds(tmp_path: Path, drawn) -> None:
    registry(tmp_path)
    t = {"perf": {"cuda": {"slowdown": 0.2, "memory_growth": 0.3}, "cpu": PERF["perf"]["cpu"]}}
    assert "(60%)" in perf_picture(Runs(tmp_path, {"single": metrics("single")}), t, memory=False).caption
    with pytest.raises(KeyError, match="cpu"):
        perf_picture(Runs(tmp_path, {"single": metrics("single")}), {"perf": {"cuda": {}}}, memory=True)


def test_nothing_run_is_nothing_measured(tmp_path: Path, drawn) -> None:
    with pytest.raises(NothingMeasured, match=r"^no training stage has run$"):
        perf_picture(Runs(tmp_path, {}), PERF, memory=True)
    assert drawn == [] and ENV == "cpu-test-env"


# -- metrics_pair and unpaired ---------------------------------------------------------------------------


def run(
    config: str = "cfg", train: list[float] | None = None, ev: list[tuple[int, float]] | None = None
) -> dict:
    return {
        "config_hash": config,
        "train_loss": [4.0, 3.0, 2.0, 1.0] if train is None else train,
        "eval": [{"step": s, "loss": v} for s, v in (ev or [])],
    }


def records(runs: dict[str, dict]) -> RunRecords:
    """The gate's records of these runs (gates/reading/runs.py), in this order."""
    return RunRecords(tuple(Run(name, m) for name, m in runs.items()))


def test_a_pair_of_the_same_config_and_length_is_returned_run_first() -> None:
    single, thread = run(train=[1.0, 2.0]), run(train=[1.0, 2.5])
    for r in (records({"single": single, "thread": thread}), records({"thread": thread, "single": single})):
        got, ref = pictures.metrics_pair(r, "thread", "single")
        assert got is thread and ref is single


UNPAIRED = {
    "config": (run("cfgB"), "config cfgB vs cfgA, 4 vs 4 steps"),
    "length": (run("cfgA", train=[4.0, 3.0, 2.5]), "config cfgA vs cfgA, 3 vs 4 steps"),
    "both": (run("cfgB", train=[4.0]), "config cfgB vs cfgA, 1 vs 4 steps"),
}


@pytest.mark.parametrize("why", UNPAIRED)
def test_a_pair_differing_in_config_or_length_is_unpaired_with_both_trajectories(
    tmp_path: Path, drawn, why: str
) -> None:
    got, numbers = UNPAIRED[why]
    a = records({"single": run("cfgA"), "proc": got})
    with pytest.raises(Unpaired) as e:
        pictures.metrics_pair(a, "proc", "single")
    caption = (
        f"Training loss of runs/proc and runs/single (nats per token) as recorded: {numbers}. Pass needs the "
        "same config and length (the gate's message says which differs); rerun both stages from the same params."
    )
    assert e.value.picture == Picture("<svg/>", caption) and str(e.value) == caption
    (fig,) = drawn
    (ax,) = fig.axes
    assert list(fig.get_size_inches()) == [7.2, 2.6]
    ref_line, got_line = ax.get_lines()
    n = len(got["train_loss"])
    assert (line_of(ref_line)[:2], ref_line.get_linewidth(), ref_line.get_label()) == (
        ([0, 1, 2, 3], [4.0, 3.0, 2.0, 1.0]), 1.0, "single (4 steps)")  # fmt: skip
    assert (line_of(got_line)[:2], got_line.get_linewidth(), got_line.get_label()) == (
        (list(range(n)), got["train_loss"]), 1.0, f"proc ({n} steps)")  # fmt: skip
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("step", "train loss (nats/token)")
    assert ax.get_title() == "runs/proc vs runs/single: not comparable step by step"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["single (4 steps)", f"proc ({n} steps)"]


def test_draw_returns_the_unpaired_picture(tmp_path: Path, drawn) -> None:
    a = records({"single": run("cfgA"), "thread": run("cfgB")})
    gate = Drawer(lambda a, t: pictures.metrics_pair(a, "thread", "single"))
    pic = pictures.draw(gate, a, {})
    assert pic.html == "<svg/>" and pic.caption.startswith("Training loss of runs/thread and runs/single")


# -- rel_panel ------------------------------------------------------------------------------------------


def panel(got: dict, ref: dict, max_rel: float = 0.1, steps: int | None = None) -> tuple[Any, Any]:
    _, (ax,) = plots.figure()
    return ax, pictures.rel_panel(ax, got, ref, "thread", "single", max_rel, steps)


def test_rel_panel_draws_each_steps_difference_against_the_bound(drawn) -> None:
    ax, first = panel(run(train=[4.0, 3.6, 2.0, 1.5]), run(), 0.1)
    assert first == 1
    train, bound = ax.get_lines()[:2]
    assert line_of(train)[:2] == ([0, 1, 2, 3], [1e-12, pytest.approx(0.2), 1e-12, 0.5])
    assert train.get_label() == "train loss" and bound.get_label() == "max rel 0.1"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("step", "|thread − single| / |single|")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "train loss",
        "max rel 0.1",
        "over the limit",
    ]


def test_rel_panel_within_the_bound_returns_none_and_formats_the_bound_short(drawn) -> None:
    ax, first = panel(run(train=[4.0, 3.0, 2.0, 1.04]), run(), 0.05)
    assert first is None and ax.get_lines()[1].get_label() == "max rel 0.05"


@pytest.mark.parametrize(
    ("steps", "xs"), [(None, [0, 1, 2, 3]), (2, [0, 1]), (4, [0, 1, 2, 3]), (9, [0, 1, 2, 3])]
)
def test_rel_panel_draws_only_the_steps_judged(drawn, steps: int | None, xs: list[int]) -> None:
    ax, first = panel(run(train=[4.0, 3.0, 2.2, 1.0]), run(), 0.1, steps)
    assert list(ax.get_lines()[0].get_xdata()) == xs
    assert first == (2 if len(xs) > 2 else None)


def test_rel_panel_marks_eval_differences_at_shared_steps_up_to_the_last_drawn(drawn) -> None:
    got = run(ev=[(0, 4.4), (1, 3.0), (2, 2.0), (3, 1.0), (5, 1.0)])
    ref = run(ev=[(0, 4.0), (2, 2.2), (3, 2.0), (5, 2.0)])
    ax, _ = panel(got, ref, 0.1, 3)
    low, high = ax.get_ylim()
    # the train differences are all 0: the bound 0.1 sets the top (0.1 x 10 x 3); no eval over it
    assert (low, high) == (pytest.approx(1e-12 / 3), pytest.approx(3.0))
    evals = ax.get_lines()[-1]
    assert evals.get_label() == "eval loss" and evals.get_marker() == "s"
    assert evals.get_color() == PURPLE and evals.get_markerfacecolor() == "none"
    assert list(evals.get_xdata()) == [0, 2, 3]
    assert list(evals.get_ydata()) == pytest.approx([0.1, 0.2 / 2.2, 0.5])
    assert ax.get_legend().get_texts()[-1].get_text() == "eval loss"


def test_an_eval_difference_above_the_axis_raises_it_and_non_finite_sits_on_top(drawn) -> None:
    got = run(ev=[(0, 40.0), (2, math.nan)])
    ax, _ = panel(got, run(ev=[(0, 4.0), (2, 2.0)]), 0.1)
    low, high = ax.get_ylim()
    assert (low, high) == (
        pytest.approx(1e-12 / 3),
        pytest.approx(9.0 * 30),
    )  # rel 9 over the axis top 3: raised to 30 x 9
    assert list(ax.get_lines()[-1].get_ydata()) == pytest.approx([9.0, 9.0 * 30 / 3])


def test_an_eval_difference_just_under_a_third_of_the_top_keeps_the_axis(drawn) -> None:
    # the axis top is 3.0 (bound 0.1): eval rel 0.99 and 1.0 (x 3 = the top) keep it; 1.02 raises it
    for loss, top in ((1.99, 3.0), (2.0, 3.0), (2.02, 1.02 * 30)):
        ax, _ = panel(run(ev=[(1, loss)]), run(ev=[(1, 1.0)]), 0.1)
        assert ax.get_ylim()[1] == pytest.approx(top)
        assert list(ax.get_lines()[-1].get_ydata()) == pytest.approx([loss - 1.0])


def test_rel_panel_without_shared_eval_steps_draws_no_eval(drawn) -> None:
    ax, _ = panel(run(ev=[(1, 3.0)]), run(ev=[(2, 3.0)]), 0.1)
    assert [x.get_label() for x in ax.get_lines()] == ["train loss", "max rel 0.1"]
    assert ax.get_ylim()[1] == pytest.approx(3.0)


def test_only_non_finite_eval_differences_keep_the_axis(drawn) -> None:
    ax, _ = panel(run(ev=[(1, math.inf)]), run(ev=[(1, 1.0)]), 0.1)
    assert ax.get_ylim()[1] == pytest.approx(3.0)
    assert list(ax.get_lines()[-1].get_ydata()) == pytest.approx([1.0])


# -- md5_table ------------------------------------------------------------------------------------------


class Check:
    def __init__(self, name: str, expected: str | None, actual: str | None, ok: bool) -> None:
        self.name, self.expected, self.actual, self.ok = name, expected, actual, ok


def test_md5_table_rows_say_equal_or_differs_and_absent() -> None:
    html = pictures.md5_table(
        [
            Check("a<b", "1" * 4, "1" * 4, True),
            Check("c", None, "2" * 4, False),
            Check("d", "3" * 4, "", False),
        ],
        "pinned & expected",
    )
    assert html == (
        "<table class='files'><tr><th>file</th><th>pinned &amp; expected</th><th>actual md5</th><th></th></tr>"
        "<tr class='ok'><td>a&lt;b</td><td><code>1111</code></td><td><code>1111</code></td><td>equal</td></tr>"
        "<tr class='bad'><td>c</td><td><code>(absent)</code></td><td><code>2222</code></td><td>DIFFERS</td></tr>"
        "<tr class='bad'><td>d</td><td><code>3333</code></td><td><code>(absent)</code></td><td>DIFFERS</td></tr>"
        "</table>"
    )


# -- draw -----------------------------------------------------------------------------------------------


class Drawer:
    """A gate's drawing half: draw(a, t) reads its records and draws them (gates/judges/gate.py)."""

    def __init__(self, picture) -> None:
        self.picture = picture

    def draw(self, a, t):
        return self.picture(a, t)


def raising(e: Exception) -> Drawer:
    def picture(a, t):
        raise e

    return Drawer(picture)


def test_draw_returns_the_gates_picture_given_the_artifacts_and_thresholds() -> None:
    seen = []
    pic = Picture("<svg/>", "c")
    assert pictures.draw(Drawer(lambda a, t: seen.append((a, t)) or pic), "A", {"t": 1}) is pic
    assert seen == [("A", {"t": 1})]


CANNOT = [
    (ArtifactError("runs/x: bad"), NoPicture, "artifact unreadable: runs/x: bad"),
    (ValidationError("m.json", "k", "wrong"), NoPicture, "artifact unreadable: m.json: k: wrong"),
    (RegistryError("registry: broken"), NoPicture, "artifact unreadable: registry: broken"),
    (NonFinite("loss: nan"), NoPicture, "artifact unreadable: loss: nan"),
    (KeyError("k"), NoPicture, "cannot draw from these artifacts (KeyError: 'k')"),
    (IndexError("i"), NoPicture, "cannot draw from these artifacts (IndexError: i)"),
    (TypeError("t"), NoPicture, "cannot draw from these artifacts (TypeError: t)"),
    (ValueError("v"), NoPicture, "cannot draw from these artifacts (ValueError: v)"),
    (StageNotRun("stage x has not run"), NothingMeasured, "stage x has not run"),
]


@pytest.mark.parametrize(("error", "kind", "message"), CANNOT, ids=[type(c[0]).__name__ for c in CANNOT])
def test_draw_turns_what_cannot_be_drawn_into_the_reason(error: Exception, kind: type, message: str) -> None:
    with pytest.raises(NoPicture) as e:
        pictures.draw(raising(error), None, {})
    assert type(e.value) is kind and str(e.value) == message
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_draw_lets_other_errors_through() -> None:
    with pytest.raises(ZeroDivisionError):
        pictures.draw(raising(ZeroDivisionError("z")), None, {})
