"""Judges of plain values on the real gate tree (docs/house.md, issue #53 item 1): every gate of
gates.judges.catalogue.GATES reads its records with its real reader, then its judge and its picture run
with every file closed to them (tests/plain_judges.py: open, os.open/stat/listdir/scandir, pathlib's
disk methods, subprocess raise) and give the verdict, the picture or the error they give with the disk
open. The rules and their controls in-process: tests/unit/test_house_plain_judges.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from plain_judges import NOT_YET_SPLIT, module_of, plain_problems

from gates.judges import catalogue
from gates.judges import probes as probes_gate
from gates.judges.outcome import passed
from gates.reading.artifacts import Artifacts
from gates.reading.dvclock import DvcLock
from params.project import load_judging

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]


def tree(root: Path) -> tuple[Artifacts, dict[str, Any]]:
    """The tree as `python -m gates check` reads it: every gate, every stage."""
    params = load_judging(root / "params.yaml")
    return Artifacts(root, DvcLock.read(root), params, None), params.thresholds


def test_every_split_gate_judges_the_real_tree_with_files_closed(gate_tree: Path) -> None:
    a, thresholds = tree(gate_tree)
    split = [g for g in catalogue.GATES if module_of(g) not in NOT_YET_SPLIT]
    assert {"seals", "provenance", "scaling", "model_probes"} <= {g.id for g in split}
    for g in split:  # read here: each is judged (a refused read would make the check vacuous)
        g.read(a.for_gate(), thresholds)
    assert {g.id: plain_problems(g, a, thresholds) for g in split} == {g.id: [] for g in split}


def test_control_a_judge_that_asks_the_tree_is_caught_on_it(gate_tree: Path) -> None:
    a, thresholds = tree(gate_tree)
    root = a.root
    planted = dataclasses.replace(
        probes_gate.GATE, judge=lambda r, t: passed((root / "runs" / "probes.json").exists(), None, "asked")
    )
    assert planted.run(a, thresholds).status == "pass"  # with the disk open it judges
    problems = plain_problems(planted, a, thresholds)
    assert len(problems) == 1 and problems[0].startswith(
        "model_probes: its judge Path.exists called while judging"
    )
