"""The ground floor under mutation (docs/judge-mutation.md): params/identity.py, params/cadence.py,
params/cli.py, contracts/numbers.py, contracts/artifact_table.py.

Config identity (what counts, what is bookkeeping, the 16-hex digest), the keys two configs differ in,
when a run evaluates, the shared --params/--set arguments, the one relative difference, and the
artifact table's lookups, checks and guarded writes: each pinned exactly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

import pytest

from contracts import artifact_table
from contracts.numbers import max_rel, rel_diff, rel_diffs
from contracts.outputs import OutputRefused
from contracts.validate import ValidationError
from params.cadence import eval_due, eval_steps
from params.cli import add_params_args
from params.identity import BOOKKEEPING, config_diff, config_identity, identity_view

CONFIG = {
    "seed": 1,
    "model": {"dim": 8},
    "train": {"lr": 0.1, "log_every": 5, "ckpt_every": 2, "keep_checkpoints": 1},
}


def test_identity_leaves_out_only_trains_bookkeeping() -> None:
    assert BOOKKEEPING == ("log_every", "ckpt_every", "keep_checkpoints")
    assert identity_view(CONFIG) == {"seed": 1, "model": {"dim": 8}, "train": {"lr": 0.1}}
    assert CONFIG["train"]["log_every"] == 5  # the input is not changed
    assert identity_view({"train": [1], "log_every": 2}) == {"train": [1], "log_every": 2}
    want = hashlib.sha256(
        json.dumps({"model": {"dim": 8}, "seed": 1, "train": {"lr": 0.1}}, sort_keys=True).encode()
    )
    assert config_identity(CONFIG) == want.hexdigest()[:16]
    other = {**CONFIG, "train": {**CONFIG["train"], "log_every": 50, "ckpt_every": 9}}
    assert config_identity(other) == config_identity(CONFIG)
    assert config_identity({**CONFIG, "seed": 2}) != config_identity(CONFIG)


def test_config_diff_names_keys_with_both_values() -> None:
    a = {"train": {"lr": 0.1, "steps": 4}, "seed": 1}
    b = {"train": {"lr": 0.2, "steps": 4, "wd": 0.0}, "seed": 2}
    assert config_diff(a, b) == "differing keys: seed 2 vs 1, train.lr 0.2 vs 0.1, train.wd 0.0 vs '<absent>'"
    assert config_diff(b, a, limit=1) == "differing keys: seed 1 vs 2 and 2 more"
    assert config_diff(a, a) == "the configs are equal: a hash was edited"
    assert config_diff({"x": 1}, {"x": {"y": 2}}) == "differing keys: x '<absent>' vs 1, x.y 2 vs '<absent>'"


@pytest.mark.parametrize(
    ("every", "steps", "due"),
    [(2, 5, [0, 2, 4, 5]), (2, 4, [0, 2, 4]), (1, 3, [0, 1, 2, 3]), (0, 5, []), (10, 3, [0, 3])],
)
def test_a_run_evaluates_at_0_every_n_and_after_the_last(every: int, steps: int, due: list[int]) -> None:
    assert eval_steps({"eval_every": every, "steps": steps}) == due
    assert [s for s in range(steps + 1) if eval_due(every, steps, s)] == due
    assert eval_due(every, steps, 0) is bool(every)


def test_the_shared_params_arguments() -> None:
    ap = argparse.ArgumentParser()
    add_params_args(ap)
    assert vars(ap.parse_args([])) == {"params": "params.yaml", "overrides": []}
    assert vars(ap.parse_args(["--params", "p.yaml", "--set", "a=1", "--set", "b=2"])) == {
        "params": "p.yaml",
        "overrides": ["a=1", "b=2"],
    }
    ap = argparse.ArgumentParser()
    add_params_args(ap, overrides=False)
    assert vars(ap.parse_args([])) == {"params": "params.yaml"}
    with pytest.raises(SystemExit):
        ap.parse_args(["--set", "a=1"])


def test_the_one_relative_difference() -> None:
    assert rel_diff(1.5, 1.0) == 0.5 and rel_diff(-3.0, -2.0) == 0.5 and rel_diff(2.0, 2.0) == 0.0
    assert rel_diff(0.0, 0.0) == 0.0 and rel_diff(1.0, 0.0) == math.inf
    for bad in (math.nan, math.inf, -math.inf):
        assert rel_diff(bad, 1.0) == math.inf and rel_diff(1.0, bad) == math.inf
    assert rel_diffs([1.0, 3.0], [1.0, 2.0]) == [0.0, 0.5]
    with pytest.raises(ValueError):
        rel_diffs([1.0], [1.0, 2.0])
    assert max_rel([1.0, 3.0, 2.2], [1.0, 2.0, 2.0]) == 0.5 and max_rel([], []) == 0.0


def test_the_artifact_table_lookups() -> None:
    assert artifact_table.artifact("manifest").schema == "manifest.schema.json"
    assert artifact_table.kind_of_schema("metrics.schema.json") == "metrics"
    with pytest.raises(ValueError) as e:
        artifact_table.artifact("nope")
    assert str(e.value) == f"unknown artifact kind 'nope' (known: {', '.join(sorted(artifact_table.TABLE))})"
    with pytest.raises(ValueError) as e:
        artifact_table.kind_of_schema("nope.json")
    assert str(e.value) == "no artifact kind has schema 'nope.json'"
    assert all(a.kind == k for k, a in artifact_table.TABLE.items())


def test_the_artifact_table_writes_only_valid_records_over_their_own_kind(tmp_path: Path) -> None:
    from conftest import REPO

    data = json.loads(next((REPO / "registry" / "models").glob("*/v1.json")).read_text())
    path = tmp_path / "v1.json"
    artifact_table.write("version", path, data)
    assert artifact_table.read("version", path) == data and path.read_text().endswith("\n")
    with pytest.raises(ValidationError) as e:
        artifact_table.write("version", path, {**data, "dtype": "fp64"})
    assert str(e.value).startswith(f"{path}: dtype: ")
    assert artifact_table.read("version", path) == data  # an invalid record never reaches the disk
    with pytest.raises(ValidationError):
        artifact_table.check("version", {**data, "version": 0}, "where")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "xtrain-golden/1"}))
    with pytest.raises(OutputRefused):
        artifact_table.write("version", other, data)
    with pytest.raises(ValidationError, match="dtype"):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**data, "dtype": "fp64"}))
        artifact_table.read("version", bad)
