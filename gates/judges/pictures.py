"""What the gates' pictures share, and the one way a picture is drawn for the HTML report.

Each gate draws its own picture in its own module (gates/judges/gate.py: `Gate.picture`), from the
artifacts it reads (through gates.artifacts, schema-validated), recomputed from the raw values with
the gate's own functions, never from its verdict. Here: the drawing pieces several gates use (two
runs' relative loss difference against a bound, an md5 table, two runs that cannot be paired) and
`draw`, which turns a picture that cannot be drawn into NoPicture with the reason (shown in its
place) and a stage that has not run into NothingMeasured (a skip with nothing to draw).
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from contracts.validate import ValidationError
from gates.judges import plots
from gates.judges.gate import Gate, NoPicture, NothingMeasured, Picture, Thresholds, Unpaired
from gates.judges.outcome import rel_diffs
from gates.reading.artifacts import ArtifactError, Artifacts, NonFinite, StageNotRun
from gates.reading.runs import Runs
from registry.store import RegistryError

__all__ = ["NoPicture", "NothingMeasured", "Picture", "draw", "md5_table", "metrics_pair", "rel_panel"]


def metrics_pair(r: Runs, run: str, reference: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two runs' metrics (run, reference) from the gate's records; Unpaired where no step-by-step
    difference can be drawn."""
    ref, got = r[reference].metrics, r[run].metrics
    if ref["config_hash"] != got["config_hash"] or len(ref["train_loss"]) != len(got["train_loss"]):
        raise Unpaired(unpaired(got, ref, run, reference))
    return got, ref


def unpaired(got: dict[str, Any], ref: dict[str, Any], run: str, reference: str) -> Picture:
    """Both trajectories as they are, when no step-by-step difference can be drawn."""
    fig, (ax,) = plots.figure(height=2.6)
    for m, name in ((ref, reference), (got, run)):
        ax.plot(m["train_loss"], lw=1, label=f"{name} ({len(m['train_loss'])} steps)")  # x: the step index
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (nats/token)")
    ax.set_title(f"runs/{run} vs runs/{reference}: not comparable step by step")
    plots.legend(ax)
    return Picture(
        plots.to_svg(fig),
        f"Training loss of runs/{run} and runs/{reference} (nats per token) as recorded: config "
        f"{got['config_hash']} vs {ref['config_hash']}, {len(got['train_loss'])} vs {len(ref['train_loss'])} "
        "steps. Pass needs the same config and length (the gate's message says which differs); rerun "
        "both stages from the same params.",
    )


def rel_panel(
    ax, got: dict, ref: dict, run: str, reference: str, max_rel: float, steps: int | None = None
) -> int | None:
    """Relative difference per step against max_rel; `steps`: only the first ones (what a gate judges)."""
    n = len(ref["train_loss"]) if steps is None else min(steps, len(ref["train_loss"]))
    rel = rel_diffs(got["train_loss"][:n], ref["train_loss"][:n])
    first = plots.log_limit_plot(
        ax, list(range(len(rel))), rel, max_rel, "train loss", f"max rel {max_rel:g}"
    )
    ev_ref = {e["step"]: e["loss"] for e in ref["eval"]}
    ev = [
        (e["step"], rel_diffs([e["loss"]], [ev_ref[e["step"]]])[0])
        for e in got["eval"]
        if e["step"] in ev_ref and e["step"] <= n
    ]
    if ev:
        high = ax.get_ylim()[1]
        finite = [r for _, r in ev if math.isfinite(r)]
        if finite and max(finite) * 3 > high:  # an eval difference above every train difference
            high = max(finite) * 30
            ax.set_ylim(top=high)
        top = high / 3
        ax.plot(
            [s for s, _ in ev],
            plots.on_log_axis([r for _, r in ev], top),
            "s",
            mfc="none",
            color="#6a1b9a",
            label="eval loss",
        )
        plots.legend(ax)
    ax.set_xlabel("step")
    ax.set_ylabel(f"|{run} − {reference}| / |{reference}|")
    return first


def md5_table(checks: list, expected_label: str) -> str:
    rows = "".join(
        f"<tr class='{'ok' if c.ok else 'bad'}'><td>{escape(c.name)}</td>"
        f"<td><code>{escape(c.expected or '(absent)')}</code></td>"
        f"<td><code>{escape(c.actual or '(absent)')}</code></td><td>{'equal' if c.ok else 'DIFFERS'}</td></tr>"
        for c in checks
    )
    return (
        f"<table class='files'><tr><th>file</th><th>{escape(expected_label)}</th><th>actual md5</th>"
        f"<th></th></tr>{rows}</table>"
    )


def draw(gate: Gate, a: Artifacts, t: Thresholds) -> Picture:
    """The gate's picture (its own module draws it); why not, as NoPicture or NothingMeasured."""
    try:
        return gate.draw(a, t)
    except Unpaired as e:
        return e.picture
    except StageNotRun as e:
        raise NothingMeasured(str(e)) from None
    except (ArtifactError, ValidationError, RegistryError, NonFinite) as e:
        raise NoPicture(f"artifact unreadable: {e}") from None
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise NoPicture(f"cannot draw from these artifacts ({type(e).__name__}: {e})") from None
