"""gates/judges/plots.py under mutation (docs/judge-mutation.md): the drawing helpers every gate's picture uses.

Each helper draws on a real matplotlib figure; the tests read back what it drew (lines, bars, colours,
limits, legend, text) and the SVG, with the colours and floors written out literally: a mutated
constant changes what the reader of the report sees, so it must change an asserted value.
"""

from __future__ import annotations

import math
import re

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgba
from matplotlib.ticker import NullFormatter

from gates.judges import plots

INF, NAN = math.inf, math.nan
BLUE = "#1565c0"


@pytest.fixture(autouse=True)
def odd_defaults():
    """Line defaults unlike matplotlib's (6 pt markers, 1.5 pt solid lines): what the helper sets stays
    what it set, and what it leaves to the defaults shows as 2, 0.5 or dotted, so a dropped one is seen."""
    with plt.rc_context({"lines.markersize": 2.0, "lines.linewidth": 0.5, "lines.linestyle": ":"}):
        yield


def test_the_palette_and_the_zero_floor() -> None:
    assert (plots.BAD, plots.OK, plots.LIMIT, plots.ZERO_FLOOR) == ("#c62828", "#2e7d32", "#ef6c00", 1e-12)


def test_one_panel_has_its_legend_margin_and_the_house_style() -> None:
    fig, axes = plots.figure()
    (ax,) = axes  # squeezed or not, always a list
    sp = fig.subplotpars
    assert list(fig.get_size_inches()) == [7.2, 2.6]
    assert (sp.left, sp.right, sp.bottom, sp.top) == (0.11, 0.8, 0.5 / 2.6, 1 - 0.3 / 2.6)
    assert (sp.hspace, sp.wspace) == (0.6 / 2.6, 0.32)
    assert fig.dpi == 100
    assert ax.xaxis.get_major_ticks()[0].label1.get_fontsize() == 9
    grid = ax.xaxis.get_gridlines()[0]
    assert grid.get_visible() and grid.get_alpha() == 0.3
    plt.close(fig)


def test_a_grid_of_panels_is_flattened_row_by_row_and_uses_the_whole_width() -> None:
    fig, axes = plots.figure(2, 3, height=2.0)
    sp = fig.subplotpars
    assert list(fig.get_size_inches()) == [7.2, 4.0]
    assert (sp.left, sp.right, sp.bottom, sp.top) == (0.11, 0.98, 0.5 / 4.0, 1 - 0.3 / 4.0)
    assert (sp.hspace, sp.wspace) == (0.3, 0.32)
    assert [ax.get_subplotspec().get_geometry()[2] for ax in axes] == [0, 1, 2, 3, 4, 5]
    assert axes[0].get_subplotspec().get_geometry()[:2] == (2, 3)
    plt.close(fig)


def test_the_style_is_only_for_the_figure() -> None:
    before = plt.rcParams["font.size"], plt.rcParams["axes.grid"]
    fig, _ = plots.figure()
    assert (plt.rcParams["font.size"], plt.rcParams["axes.grid"]) == before
    plt.close(fig)


def legend_of(ax):
    leg = ax.get_legend()
    anchor = leg.get_bbox_to_anchor().transformed(ax.transAxes.inverted()).bounds
    return (
        leg._loc,
        [round(float(x), 9) for x in anchor],
        leg.get_frame_on(),
        [t.get_fontsize() for t in leg.get_texts()],
    )


def test_one_column_puts_the_legend_right_of_the_plot_unframed() -> None:
    fig, (ax,) = plots.figure()
    ax.plot([1, 2], [1, 2], label="a")
    plots.legend(ax)
    assert legend_of(ax) == (2, [1.01, 1.0, 0.0, 0.0], False, [7])  # 2: upper left
    plt.close(fig)


def test_several_columns_put_the_legend_inside_upper_right() -> None:
    fig, axes = plots.figure(1, 2)
    axes[1].plot([1, 2], [1, 2], label="a")
    plots.legend(axes[1])
    assert legend_of(axes[1]) == (1, [0.0, 0.0, 1.0, 1.0], True, [7])  # 1: upper right, the axes' box
    plt.close(fig)


def test_the_log_axis_labels_in_plain_text() -> None:
    fig, (ax,) = plots.figure()
    plots.log_axis(ax)
    f = ax.yaxis.get_major_formatter()
    assert ax.get_yscale() == "log"
    assert [f(v, 0) for v in (1e-6, 1e5, 1e10, 1e-10, 2.5e3, 1.0)] == [
        "1e-6",
        "1e5",
        "1e+10",
        "1e-10",
        "2e3",
        "1e0",
    ]
    assert ax.yaxis.get_major_locator().numticks == 8
    assert isinstance(ax.yaxis.get_minor_formatter(), NullFormatter)
    plt.close(fig)


def test_on_log_axis_floors_zero_and_puts_non_finite_on_top() -> None:
    got = plots.on_log_axis([0.0, 1e-15, 1e-12, 2e-12, 5.0, INF, -INF, NAN, -3.0], 100.0)
    assert got == [1e-12, 1e-12, 1e-12, 2e-12, 5.0, 100.0, 100.0, 100.0, 1e-12]


def line_of(line) -> tuple:
    return (list(line.get_xdata()), list(line.get_ydata()), line.get_color(), line.get_linestyle(),
            line.get_marker(), line.get_linewidth(), line.get_markersize(), line.get_label())  # fmt: skip


def test_log_limit_plot_marks_every_value_at_or_over_the_limit_and_returns_the_first() -> None:
    fig, (ax,) = plots.figure()
    first = plots.log_limit_plot(
        ax, [1, 2, 3, 4, 5], [0.0, 1e-3, 1e-2, INF, 5e-3], 1e-2, "diff", "limit 0.01"
    )
    assert first == 3
    curve, limit, crosses, mark = ax.get_lines()
    top = 1e-2 * 10  # the largest finite value or the limit, times 10
    assert line_of(curve) == ([1, 2, 3, 4, 5], [1e-12, 1e-3, 1e-2, top, 5e-3], BLUE, "-", ".", 1, 3, "diff")
    assert line_of(limit)[1:] == ([1e-2, 1e-2], "#ef6c00", "--", "None", 1.2, 2.0, "limit 0.01")
    assert line_of(crosses) == ([3, 4], [1e-2, top], "#c62828", "None", "x", 0.5, 6, "over the limit")
    assert (list(mark.get_xdata()), mark.get_color(), mark.get_linewidth(), mark.get_alpha()) == (
        [3, 3], "#c62828", 1, 0.6)  # fmt: skip
    (note,) = ax.texts
    assert (note.get_text(), note.xy, note.get_color()) == ("first over: 3", (3, 1e-2), "#c62828")
    assert (note.xyann, note.anncoords) == ((6, -12), "offset points")
    assert ax.get_ylim() == pytest.approx((1e-12 / 3, top * 3), rel=1e-12, abs=0)
    assert ax.get_yscale() == "log" and ax.get_legend() is not None
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["diff", "limit 0.01", "over the limit"]
    plt.close(fig)


def test_log_limit_plot_below_the_limit_marks_nothing() -> None:
    fig, (ax,) = plots.figure()
    assert plots.log_limit_plot(ax, [0.5, 1.5], [2.0, 9.99], 10.0, "a", "b") is None
    assert len(ax.get_lines()) == 2 and not ax.texts
    assert ax.get_ylim() == pytest.approx((1e-12 / 3, 300.0), rel=1e-12, abs=0)  # top from the limit
    plt.close(fig)


def test_log_limit_plot_top_follows_the_largest_finite_value_and_nan_is_over() -> None:
    fig, (ax,) = plots.figure()
    assert plots.log_limit_plot(ax, [1, 2, 3], [1.0, 50.0, NAN], 10.0, "a", "b") == 2
    curve, _, crosses, _ = ax.get_lines()
    assert list(curve.get_ydata()) == [1.0, 50.0, 500.0]
    assert list(crosses.get_xdata()) == [2, 3]
    assert ax.texts[0].get_text() == "first over: 2" and ax.texts[0].xy == (2, 50.0)
    assert ax.get_ylim() == pytest.approx((1e-12 / 3, 1500.0), rel=1e-12, abs=0)
    plt.close(fig)


def test_overlay_draws_the_reference_under_the_run_and_crosses_the_marked() -> None:
    fig, (ax,) = plots.figure()
    plots.overlay(ax, [1, 2, 3], [1.0, 2.0, 3.0], [1.0, 2.5, 3.5], ("reference", "run"), [1, 2])
    ref, run, crosses = ax.get_lines()
    assert line_of(ref) == ([1, 2, 3], [1.0, 2.0, 3.0], "#9e9e9e", "-", "None", 3, 2.0, "reference")
    assert line_of(run) == ([1, 2, 3], [1.0, 2.5, 3.5], BLUE, "-", "None", 1, 2.0, "run")
    assert line_of(crosses) == ([2, 3], [2.5, 3.5], "#c62828", "None", "x", 0.5, 6, "differs")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["reference", "run", "differs"]
    plt.close(fig)


def test_overlay_without_marks_draws_no_cross() -> None:
    fig, (ax,) = plots.figure()
    plots.overlay(ax, [1, 2], [1.0, 2.0], [1.0, 2.0], ("a", "b"), [])
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"]
    assert ax.get_legend() is not None
    plt.close(fig)


def bars(ax) -> list[tuple]:
    return [(p.get_y(), p.get_height(), p.get_facecolor()) for p in ax.patches]


def test_bars_against_limit_are_green_below_and_red_at_or_over() -> None:
    fig, (ax,) = plots.figure()
    plots.bars_against_limit(ax, ["a", "b", "c", "d", "e"], [0.0, 1e-3, 1e-2, INF, NAN], 1e-2, "atol 0.01")
    ok, bad, base, top = to_rgba("#2e7d32"), to_rgba("#c62828"), 1e-12 / 3, 1e-2 * 10
    heights = [1e-12, 1e-3, 1e-2, top, top]
    assert bars(ax) == [(base, h, c) for h, c in zip(heights, [ok, ok, bad, bad, bad], strict=True)]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c", "d", "e"]
    (limit,) = ax.get_lines()
    assert line_of(limit)[1:] == ([1e-2, 1e-2], "#ef6c00", "--", "None", 1.2, 2.0, "atol 0.01")
    assert ax.get_yscale() == "log" and ax.get_ylim() == pytest.approx((base, top * 3), rel=1e-12, abs=0)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["atol 0.01"]
    plt.close(fig)


def test_a_negative_control_bar_is_green_only_at_or_over_the_limit() -> None:
    fig, (ax,) = plots.figure()
    plots.bars_against_limit(
        ax, ["x", "ctl", "ctl2"], [5.0, 10.0, 9.0], 10.0, "l", expect_over=[False, True, True]
    )
    ok, bad = to_rgba("#2e7d32"), to_rgba("#c62828")
    assert [c for _, _, c in bars(ax)] == [ok, ok, bad]
    assert ax.get_ylim() == pytest.approx((1e-12 / 3, 300.0), rel=1e-12, abs=0)
    plt.close(fig)


def test_an_expectation_per_bar_or_none() -> None:
    fig, (ax,) = plots.figure()
    with pytest.raises(ValueError, match="zip"):
        plots.bars_against_limit(ax, ["a", "b"], [1.0, 2.0], 1.5, "l", expect_over=[True])
    plt.close(fig)


def test_bars_top_follows_the_largest_finite_value() -> None:
    fig, (ax,) = plots.figure()
    plots.bars_against_limit(ax, ["a", "b"], [40.0, INF], 1.0, "l")
    assert [h for _, h, _ in bars(ax)] == [40.0, 400.0]
    assert ax.get_ylim() == pytest.approx((1e-12 / 3, 1200.0), rel=1e-12, abs=0)
    plt.close(fig)


def test_agreement_grid_is_green_where_true_red_where_false() -> None:
    fig, (ax,) = plots.figure()
    plots.agreement_grid(ax, [[True, False], [False, True]])
    (img,) = ax.get_images()
    assert img.get_array().tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert [to_rgba(c) for c in img.get_cmap().colors] == [to_rgba("#c62828"), to_rgba("#2e7d32")]
    assert (img.norm.vmin, img.norm.vmax, img.get_interpolation(), ax.get_aspect()) == (
        0,
        1,
        "nearest",
        "auto",
    )
    assert not any(g.get_visible() for g in ax.xaxis.get_gridlines() + ax.yaxis.get_gridlines())
    plt.close(fig)


def test_agreement_grid_colours_are_fixed_even_when_every_cell_agrees_or_none_does() -> None:
    fig, (ax,) = plots.figure()
    plots.agreement_grid(ax, [[True, True]])
    (img,) = ax.get_images()
    assert (img.norm.vmin, img.norm.vmax) == (0, 1)
    assert to_rgba(img.to_rgba(img.get_array())[0][0]) == to_rgba("#2e7d32")
    plt.close(fig)
    fig, (ax,) = plots.figure()
    plots.agreement_grid(ax, [[False], [False]])
    img = ax.get_images()[0]
    assert (img.norm.vmin, img.norm.vmax) == (0, 1)
    assert to_rgba(img.to_rgba(img.get_array())[1][0]) == to_rgba("#c62828")
    plt.close(fig)


def test_agreement_grid_has_no_grid_on_any_axes() -> None:
    fig, ax = plt.subplots()  # matplotlib's default: no grid (figure() turns it on)
    plots.agreement_grid(ax, [[True]])
    assert not any(g.get_visible() for g in ax.xaxis.get_gridlines() + ax.yaxis.get_gridlines())
    plt.close(fig)


def drawn_figure():
    fig, (ax,) = plots.figure()
    ax.plot([1, 2, 3], [3, 1, 2], label="a")
    ax.set_title("title")
    return fig


def test_to_svg_is_inline_text_without_a_date_and_closes_the_figure() -> None:
    fig = drawn_figure()
    later = plt.figure()  # the current figure: to_svg closes the one it was given, not this
    svg = plots.to_svg(fig)
    assert plt.fignum_exists(later.number)
    plt.close(later)
    assert svg.startswith("<svg xmlns:xlink=") and svg.rstrip().endswith("</svg>")
    assert "<?xml" not in svg and "DOCTYPE" not in svg and "<dc:date>" not in svg
    assert "title</text>" in svg  # svg.fonttype none: text stays text, not glyph paths
    assert not plt.fignum_exists(fig.number)


def test_to_svg_is_the_same_bytes_as_matplotlib_with_the_fixed_salt() -> None:
    """The oracle: matplotlib itself with the salt and font type the module promises."""
    import io

    fig = drawn_figure()
    buf = io.StringIO()
    with plt.rc_context({"svg.hashsalt": "xtrain-gates", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    want = buf.getvalue()
    svg = plots.to_svg(fig)
    assert svg == want[want.index("<svg") :]
    assert re.findall(r'<clipPath id="p[0-9a-f]{10}">', svg)  # ids hashed with the salt, so it is compared
    assert svg == plots.to_svg(drawn_figure())  # the same data, the same bytes


def test_bars_without_a_bar_still_span_the_floor_to_the_limit() -> None:
    fig, (ax,) = plots.figure()
    plots.bars_against_limit(ax, [], [], 1.0, "l")
    assert not ax.patches and ax.get_ylim() == pytest.approx((1e-12 / 3, 30.0), rel=1e-12, abs=0)
    plt.close(fig)
