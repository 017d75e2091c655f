"""The provenance gate (gates/judges/provenance.py) on the session's real artifact tree: it passes on runs made
here, and fails on a run made on another machine (re-sealed, as a run cache of another environment
would restore it), on a dvc.yaml that lets a run cache restore train_single, and on a repro record
that says train_single was restored; a tampered runs/env.json is an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from contracts.fileio import md5_file
from gate_tree import check, copy_tree, edit, gate, seal
from gates.judges.provenance import reuse_text
from gates.judges.provenance import uncached_problems as uncached
from gates.reading.run_origins import fresh_stage
from registry.sealed import seal as registry_seal


def uncached_problems(root: Path) -> list[str]:
    return uncached(fresh_stage(root))


pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]


@pytest.fixture
def tree(gate_tree: Path, tmp_path: Path) -> Path:
    return copy_tree(gate_tree, tmp_path / "tree")


def provenance(root: Path) -> dict:
    return gate(check(root, "--only", "provenance")[1], "provenance")


def write_record(tree: Path, record: dict) -> None:
    """reports/repro.json as pipeline/repro.py writes it: sealed, naming the dvc.lock it left (the tree's,
    re-sealed first as check() would)."""
    seal(tree)
    sealed = registry_seal({**record, "dvc_lock_md5": md5_file(tree / "dvc.lock")})
    (tree / "reports/repro.json").write_text(json.dumps(sealed))


def test_runs_made_here_pass_and_say_reuse_was_not_recorded(tree: Path) -> None:
    g = provenance(tree)
    assert g["status"] == "pass", g["message"]
    assert "reuse not recorded" in g["message"]


def test_a_run_from_another_machine_fails_naming_it(tree: Path) -> None:
    edit(
        tree / "runs/thread/metrics.json",
        lambda m: m["env"]["dispatch_facts"]["cpu"].update(model_name="Other CPU"),
    )
    g = provenance(tree)
    assert g["status"] == "fail", g
    assert "runs/thread was made on machine" in g["message"]
    assert "runs/proc" not in g["message"]


def test_a_repro_record_of_a_restored_train_single_fails(tree: Path) -> None:
    record = {
        "format": "xtrain-repro/1", "started_at": "2026-12-01T00:00:00Z", "wall_s": 1.0,
        "remote": "/x", "pulled": True, "targets": [], "jobs": 1, "exit_code": 0, "timings": {},
        "stages": {"train_single": "restored", "export": "restored", "env": "ran"},
    }  # fmt: skip
    write_record(tree, record)
    g = provenance(tree)
    assert g["status"] == "fail" and "train_single was restored" in g["message"], g
    record["stages"]["train_single"] = "ran"  # control: the same record with a fresh train_single
    write_record(tree, record)
    g = provenance(tree)
    assert g["status"] == "pass", g
    assert "restored from the run cache from /x: export" in g["message"]


def test_a_tampered_env_record_is_an_error(tree: Path) -> None:
    edit(tree / "runs/env.json", lambda e: e.update(machine_hash="00000000"))
    assert provenance(tree)["status"] == "error"


def test_train_single_outs_must_stay_uncached(tmp_path: Path) -> None:
    outs = {"outs": [{"runs/single/checkpoints": {"cache": False}}], "plots": ["runs/single/loss.csv"]}
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train_single": outs}}))
    assert uncached_problems(tmp_path) == [
        "dvc.yaml: train_single out runs/single/loss.csv is cached: a run cache could restore it"
    ]
    outs["plots"] = [{"runs/single/loss.csv": {"cache": False}}]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train_single": outs}}))
    assert uncached_problems(tmp_path) == []


def test_the_repository_dvc_yaml_keeps_train_single_uncached() -> None:
    assert uncached_problems(Path(__file__).resolve().parents[2]) == []


def test_reuse_text_names_every_stage_by_what_was_done() -> None:
    rec = {"stages": {"a": "ran", "b": "restored", "c": "unchanged"}, "pulled": False, "remote": None}
    assert (
        reuse_text(rec) == "ran here: a; restored from the run cache: b; up to date from an earlier repro: c"
    )
