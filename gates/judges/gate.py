"""A gate is one unit, defined in its own module: what it checks, why, what it reads (`read`, in
gates/reading/: files to plain records), how it judges those records (`judge`: records and thresholds
in, a verdict out, no file touched), which params.yaml `gates:` sections it takes, and how it draws its
picture for the HTML report from the same records.

gates/judges/catalogue.py only collects the units in report order. A picture is drawn from the artifacts the
gate reads and recomputed from raw values with the gate's own public functions, never from its
verdict. Drawing imports matplotlib (gates/judges/plots.py), so a gate module imports it inside its picture
function: `python -m gates check` without --html stays fast. Torch-free and matplotlib-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gates.judges.outcome import Outcome
from gates.reading.artifacts import Artifacts

Thresholds = dict[str, Any]


@dataclass(frozen=True)
class Picture:
    html: str  # inline SVG or an HTML table
    caption: str


class NoPicture(Exception):
    """The picture cannot be drawn; the message says why (shown on the card)."""


class NothingMeasured(NoPicture):
    """The gate's stage has not run: there is nothing to draw (the card says so; not a missing picture)."""


class Unpaired(Exception):
    """Two runs a gate compares step by step are not the same config or length (the gate fails)."""

    def __init__(self, picture: Picture) -> None:
        super().__init__(picture.caption)
        self.picture = picture


@dataclass(frozen=True)
class Gate:
    id: str
    checks: str
    threshold: Callable[[Thresholds], str]
    judge: Callable[[Any, Thresholds], Outcome]  # plain records and thresholds -> verdict; opens no file
    why: str
    investigate: str
    # the params.yaml gates: sections it reads (contracts/schemas/thresholds.schema.json)
    takes: tuple[str, ...]
    picture: Callable[[Any, Thresholds], Picture]  # defined in the gate's own module, from its records
    # gates/reading/: the artifact files -> the plain records `judge` takes (raises StageNotRun, ...)
    read: Callable[[Artifacts, Thresholds], Any]
    # the records `picture` takes, read without refusing non-finite numbers (None: `read`'s)
    read_for_picture: Callable[[Artifacts, Thresholds], Any] | None = None

    def run(self, a: Artifacts, t: Thresholds) -> Outcome:
        """Read, then judge (the check's runner does the two apart: every read before any judging)."""
        return self.judge(self.read(a, t), t)

    def draw(self, a: Artifacts, t: Thresholds) -> Picture:
        return self.picture((self.read_for_picture or self.read)(a, t), t)
