"""Every gate unit's text, pinned (docs/judge-mutation.md): what `gates list` and `gates explain` print.

Each gate module defines its unit (id, what it checks, its threshold for the pinned params.yaml, why,
how to investigate, the sections it takes): the text people read when a gate fails. A change to it is
a change to the product: this test compares it with tests/judge_catalogue.txt and, on a difference,
prints it; an intended change is recorded with JUDGE_CATALOGUE_UPDATE=1.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from conftest import PARAMS
from gates.judges.catalogue import GATES
from params.config import load_params

SNAPSHOT = Path(__file__).parents[1] / "judge_catalogue.txt"


def catalogue_text() -> str:
    thresholds = load_params(PARAMS, ["profile=cpu"]).thresholds
    blocks = []
    for g in GATES:
        blocks.append(
            "\n".join(
                [
                    f"[{g.id}]",
                    f"checks: {g.checks}",
                    f"threshold: {g.threshold(thresholds)}",
                    f"why: {g.why}",
                    f"investigate: {g.investigate}",
                    f"takes: {', '.join(g.takes)}",
                    f"runs: {callable(g.run)}, picture: {callable(g.picture)}",
                ]
            )
        )
    return "\n\n".join(blocks) + "\n"


def test_every_gate_units_text_is_the_recorded_one() -> None:
    text = catalogue_text()
    if os.environ.get("JUDGE_CATALOGUE_UPDATE"):
        SNAPSHOT.write_text(text)
    recorded = SNAPSHOT.read_text()
    diff = "".join(difflib.unified_diff(recorded.splitlines(True), text.splitlines(True), "recorded", "now"))
    assert text == recorded, (
        f"the gates' unit text changed (record an intended change: JUDGE_CATALOGUE_UPDATE=1 pytest {__file__}):\n{diff}"
    )
