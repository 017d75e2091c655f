"""Helpers for the pilot tests: the pilot stage's index, and a cell's verdict by the gate's own function."""

from __future__ import annotations

import json
from pathlib import Path

from contracts.validate import load_schema, validate
from gate_tree import write_pipeline
from gates.judges import pilot
from gates.judges.outcome import Outcome
from gates.reading.artifacts import Artifacts
from gates.reading.dvclock import DvcLock
from params.config import load_params, load_thresholds


def index(root: Path) -> dict:
    record = json.loads((root / "runs" / "pilot" / "pilot.json").read_text())
    validate(record, load_schema("pilot.schema.json"), "pilot.json")
    return record


def verdict(root: Path, cell: str) -> Outcome:
    if not (root / "dvc.lock").exists():
        write_pipeline(root, ["pilot"])  # a tree of the pilot alone: seal it as its stage (the gates need it)
    params = load_params(root / "params.yaml")
    a = Artifacts(root, DvcLock.read(root), params)
    return pilot.cell_unit(cell).run(a, {"pilot": load_thresholds(root / "params.yaml")["pilot"]})
