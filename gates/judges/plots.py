"""Small matplotlib charts for the HTML report, each returned as deterministic inline SVG.

Deterministic: a fixed `svg.hashsalt` (element ids), no Date metadata, text kept as text
(`svg.fonttype: none`), so the same data gives the same bytes. matplotlib is imported here, not
in `gates`, so `python -m gates check` without --html stays fast.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

STYLE = {
    "svg.hashsalt": "xtrain-gates",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
}
BAD = "#c62828"
OK = "#2e7d32"
LIMIT = "#ef6c00"
# a log axis cannot show 0: exact agreement is drawn at this floor (the caption says so)
ZERO_FLOOR = 1e-12


def figure(rows: int = 1, cols: int = 1, height: float = 2.6) -> tuple[Figure, list[Axes]]:
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(  # pragma: no mutate -- equivalent: squeeze=None is falsy, as False
            rows, cols, figsize=(7.2, height * rows), squeeze=False
        )
    # fixed margins, not tight_layout: it draws every figure twice to measure the text
    # one column: legends go right of the plot (inside they hid the points over the limit)
    fig.subplots_adjust(
        left=0.11,
        right=0.8 if cols == 1 else 0.98,
        bottom=0.5 / (height * rows),
        top=1 - 0.3 / (height * rows),
    )
    fig.subplots_adjust(hspace=0.6 / height, wspace=0.32)
    return fig, [ax for row in axes for ax in row]


def to_svg(fig: Figure) -> str:
    buf = io.StringIO()
    with plt.rc_context(STYLE):
        fig.savefig(
            buf,
            format="svg",  # pragma: no mutate -- equivalent: matplotlib lower-cases "SVG"
            metadata={"Date": None},
        )
    plt.close(fig)
    text = buf.getvalue()
    # inline: drop the XML prolog and DOCTYPE
    return text[text.index("<svg") :]  # pragma: no mutate -- equivalent: rindex, one <svg (text is escaped)


def legend(ax: Axes) -> None:
    if ax.get_gridspec().ncols == 1:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    else:
        ax.legend(loc="upper right", fontsize=7)


def log_axis(ax: Axes) -> None:
    """A log y axis labelled in plain text (1e-06): matplotlib's default 10^x labels go through mathtext,
    which parses every label and made the page several times slower."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(numticks=8))
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda v, _: f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-"))
    )
    ax.yaxis.set_minor_formatter(NullFormatter())


def on_log_axis(values: Sequence[float], top: float) -> list[float]:
    """Values for a log axis: 0 at ZERO_FLOOR, inf/nan at `top` (drawn as a cross by the caller)."""
    return [top if not math.isfinite(v) else max(v, ZERO_FLOOR) for v in values]


def log_limit_plot(
    ax: Axes,
    xs: Sequence[float],
    values: Sequence[float],
    limit: float,
    label: str,
    limit_label: str,
) -> int | None:
    """Values against a limit on a log axis; marks every x at or over it and returns the first."""
    finite = [v for v in values if math.isfinite(v)]
    top = max([limit, *finite]) * 10
    ys = on_log_axis(values, top)
    log_axis(ax)
    ax.plot(xs, ys, ".-", color="#1565c0", lw=1, ms=3, label=label)
    ax.axhline(limit, color=LIMIT, ls="--", lw=1.2, label=limit_label)
    over = [i for i, v in enumerate(values) if not v < limit]
    if over:
        ax.plot([xs[i] for i in over], [ys[i] for i in over], "x", color=BAD, ms=6, label="over the limit")
        first = over[0]
        ax.axvline(xs[first], color=BAD, lw=1, alpha=0.6)
        ax.annotate(
            f"first over: {xs[first]:g}",
            (xs[first], ys[first]),
            textcoords="offset points",
            xytext=(6, -12),
            color=BAD,
        )
    ax.set_ylim(ZERO_FLOOR / 3, top * 3)
    legend(ax)
    return xs[over[0]] if over else None


def overlay(
    ax: Axes,
    xs: Sequence[float],
    reference: Sequence[float],
    run: Sequence[float],
    labels: tuple[str, str],
    marked: Sequence[int],
) -> None:
    """Two series on one axis; `marked` (indices) get a red cross on the run's curve."""
    ax.plot(xs, reference, "-", color="#9e9e9e", lw=3, label=labels[0])
    ax.plot(xs, run, "-", color="#1565c0", lw=1, label=labels[1])
    if marked:
        ax.plot([xs[i] for i in marked], [run[i] for i in marked], "x", color=BAD, ms=6, label="differs")
    legend(ax)


def bars_against_limit(
    ax: Axes,
    names: Sequence[str],
    values: Sequence[float],
    limit: float,
    limit_label: str,
    expect_over: Sequence[bool] | None = None,
) -> None:
    """Bars on a log axis against a dashed limit: green where on the expected side (below, unless
    `expect_over` says a bar must reach it, as a negative control must), red where not."""
    top = max([limit, *(v for v in values if math.isfinite(v))]) * 10
    ys = on_log_axis(values, top)
    expect_over = expect_over or [False] * len(values)
    colors = [OK if (not v < limit) == over else BAD for v, over in zip(values, expect_over, strict=True)]
    log_axis(ax)
    ax.bar(names, ys, color=colors, bottom=ZERO_FLOOR / 3)
    ax.axhline(limit, color=LIMIT, ls="--", lw=1.2, label=limit_label)
    ax.set_ylim(ZERO_FLOOR / 3, top * 3)
    legend(ax)


def agreement_grid(ax: Axes, grid: Sequence[Sequence[bool]]) -> None:
    """Rows of booleans as cells: green where True (agree), red where False."""
    cells = [[float(x) for x in row] for row in grid]
    ax.imshow(
        cells,
        cmap=ListedColormap([BAD, OK]),
        vmin=0,
        vmax=1,
        aspect="auto",
        interpolation="nearest",  # pragma: no mutate -- equivalent: matplotlib lower-cases "NEAREST"
    )
    ax.grid(False)
