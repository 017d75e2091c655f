"""gates/judges/consistency.py under mutation (docs/judge-mutation.md): a run agrees with itself, in-process.

summary.json, loss.csv, eval.csv, checkpoints/latest and the final weights' digest against
metrics.json, on a hand-written run folder (the metrics schema is contracts'; here the records are
read without it, so each test changes exactly one file). tests/pipeline/test_seals.py runs the gate on the
real tree.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from contracts import artifact_table
from gates.judges.consistency import (
    GATE,
    THRESHOLD,
    consistency,
    consistency_picture,
    csv_texts,
    run_problems,
    summary_of,
)
from gates.judges.gate import NoPicture
from gates.reading.artifacts import ArtifactError
from gates.reading.runs import param_digest, read_consistency, read_run_files
from judge_trees import Tree
from params.identity import config_identity

CONFIG = {"seed": 1, "model": {"vocab_size": 300}, "train": {"steps": 3, "eval_every": 2}}
TENSORS = {"b": np.arange(3, dtype=np.float32), "a": np.ones((2, 2), dtype=np.float32)}


def metrics(launcher: str = "single", world: int = 1) -> dict:
    h = hashlib.sha256()
    for name, t in sorted(TENSORS.items()):
        h.update(name.encode())
        h.update(t.tobytes())
    return {
        "launcher": launcher,
        "world": world,
        "config": CONFIG,
        "config_hash": config_identity(CONFIG),
        "steps": 3,
        "train_loss": [4.25, 3.5, 3.0000000000000004],
        "grad_norm": [1.0, 1.0, 1.0],
        "lr": [0.1, 0.1, 0.1],
        "samples": {"count": [8, 8, 8], "hash_sum": [1, 2, 3], "dropout_hash_sum": [0, 0, 0]},
        "eval": [{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.4}, {"step": 3, "loss": 3.25}],
        "initial_val_loss": 4.5,
        "final_val_loss": 3.25,
        "tokens_per_s": 123.456,
        "train_time_s": 1.23456,
        "cross_rank": {
            "max_abs_diff": 0.0,
            "per_rank": [{"rank": r, "max_abs_diff": 0.0} for r in range(world)],
        },
        "param_digest": h.hexdigest(),
        "eval_mode_steps": [],
    }


def write_run(tree: Tree, run: str, m: dict) -> None:
    base = tree.root / "runs" / run
    (base / "checkpoints" / "step_000003").mkdir(parents=True)
    (base / "metrics.json").write_text(json.dumps(m))
    (base / "summary.json").write_text(json.dumps(summary_of(m)))
    for name, text in csv_texts(m).items():
        (base / name).write_text(text)
    (base / "checkpoints" / "latest").write_text("step_000003\n")
    save_file(TENSORS, str(base / "checkpoints" / "step_000003" / "model.safetensors"))
    stage = {"single": "train_single", "thread": "train@thread", "proc": "train@proc"}[run]
    tree.stages[stage] = {"outs": []}


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch) -> Tree:
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    t = Tree(tmp_path)
    write_run(t, "single", metrics())
    return t


def test_summary_and_csvs_are_the_trainers_formulas() -> None:
    m = metrics()
    assert summary_of(m) == {
        "world": 1,
        "final_train_loss": 3.0000000000000004,
        "initial_val_loss": 4.5,
        "final_val_loss": 3.25,
        "tokens_per_s": 123.5,
        "cross_rank_max_abs_diff": 0.0,
        "train_time_s": 1.23,
    }
    assert csv_texts(m) == {
        "loss.csv": "step,loss\n0,4.25\n1,3.5\n2,3.0000000000000004\n",
        "eval.csv": "step,val_loss\n0,4.5\n2,3.4\n3,3.25\n",
    }


def test_param_digest_is_the_checkpoints_and_refuses_what_is_not_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    save_file(TENSORS, str(path))
    assert param_digest(path) == metrics()["param_digest"]
    path.write_text("not weights")
    with pytest.raises(ArtifactError, match=rf"^{path}: not a readable safetensors file: "):
        param_digest(path)
    with pytest.raises(ArtifactError, match="not a readable safetensors file"):
        param_digest(tmp_path / "absent.safetensors")


def test_a_consistent_run_passes(tree: Tree) -> None:
    assert run_problems(read_run_files(tree.artifacts(), "single")) == []
    o = consistency(read_consistency(tree.artifacts()))
    assert (o.status, o.measured) == ("pass", 0) and GATE.threshold({}) == "equal"
    assert o.threshold == "summary, loss.csv, eval.csv and the final checkpoint's digest equal metrics.json"
    assert o.message == "runs single: summary, csv and final checkpoint agree"
    write_run(tree, "proc", metrics("proc", 2))
    assert (
        consistency(read_consistency(tree.artifacts())).message
        == "runs single, proc: summary, csv and final checkpoint agree"
    )


def test_no_run_is_a_skip(tmp_path: Path) -> None:
    o = consistency(read_consistency(Tree(tmp_path).artifacts()))
    assert (o.status, o.measured, o.threshold, o.message) == (
        "skip",
        None,
        THRESHOLD,
        "no training stage has run",
    )
    with pytest.raises(NoPicture, match=r"^no training stage has run$"):
        consistency_picture(read_consistency(Tree(tmp_path).artifacts()), {})


def edit(tree: Tree, rel: str, text: str) -> None:
    (tree.root / "runs" / "single" / rel).write_text(text)


def test_a_summary_that_is_not_the_records_is_named(tree: Tree) -> None:
    m = metrics()
    edit(tree, "summary.json", json.dumps({**summary_of(m), "final_val_loss": 3.0}))
    assert run_problems(read_run_files(tree.artifacts(), "single")) == [
        f"runs/single/summary.json is not what metrics.json gives ({json.dumps(summary_of(m), sort_keys=True)})"
    ]
    edit(tree, "summary.json", json.dumps(dict(reversed(list(summary_of(m).items())))))
    assert run_problems(read_run_files(tree.artifacts(), "single")) == []  # key order is not content


@pytest.mark.parametrize("name", ["loss.csv", "eval.csv"])
def test_a_csv_that_differs_is_named(tree: Tree, name: str) -> None:
    edit(tree, name, csv_texts(metrics())[name].replace("4.", "5."))
    assert run_problems(read_run_files(tree.artifacts(), "single")) == [
        f"runs/single/{name} differs from metrics.json's values"
    ]


def test_latest_must_be_the_last_step(tree: Tree) -> None:
    edit(tree, "checkpoints/latest", "step_000001\n")
    assert run_problems(read_run_files(tree.artifacts(), "single")) == [
        "runs/single/checkpoints/latest is 'step_000001', metrics.json ends at step_000003"
    ]


def test_a_missing_final_checkpoint_is_named(tree: Tree) -> None:
    (tree.root / "runs/single/checkpoints/step_000003/model.safetensors").unlink()
    edit(tree, "eval.csv", "x")
    assert run_problems(read_run_files(tree.artifacts(), "single")) == [
        "runs/single/eval.csv differs from metrics.json's values",
        "metrics.json ends at step_000003, but runs/single/checkpoints/step_000003/model.safetensors does not exist",
    ]


def test_weights_that_are_not_the_recorded_digest_are_named(tree: Tree) -> None:
    other = {**TENSORS, "a": np.zeros((2, 2), dtype=np.float32)}
    path = tree.root / "runs/single/checkpoints/step_000003/model.safetensors"
    save_file(other, str(path))
    recorded = metrics()["param_digest"]
    assert run_problems(read_run_files(tree.artifacts(), "single")) == [
        f"runs/single/checkpoints/step_000003/model.safetensors digests to {param_digest(path)[:16]}..., "
        f"metrics.json param_digest is {recorded[:16]}..."
    ]


def test_a_record_that_contradicts_itself_is_a_problem_too(tree: Tree) -> None:
    m = copy.deepcopy(metrics())
    m["config_hash"] = "0" * 16
    edit(tree, "metrics.json", json.dumps(m))
    edit(tree, "summary.json", json.dumps(summary_of(m)))
    assert run_problems(read_run_files(tree.artifacts(), "single"))[0].startswith(
        "runs/single/metrics.json: config_hash: 0000"
    )


def test_the_verdict_counts_every_problem(tree: Tree) -> None:
    edit(tree, "loss.csv", "x")
    edit(tree, "eval.csv", "x")
    o = consistency(read_consistency(tree.artifacts()))
    assert (o.status, o.measured, o.threshold) == ("fail", 2, THRESHOLD)
    assert o.message == (
        "runs/single/loss.csv differs from metrics.json's values; runs/single/eval.csv differs from metrics.json's "
        "values: the run's files are not one run's record"
    )


def test_the_picture_marks_each_file(tree: Tree) -> None:
    edit(tree, "eval.csv", "x")
    pic = consistency_picture(read_consistency(tree.artifacts()), {})
    row = "<tr class='{}'><td>runs/single/{}</td><td>{}</td></tr>"
    rows = [
        row.format("ok", "summary.json", "agrees"),
        row.format("ok", "loss.csv", "agrees"),
        row.format("bad", "eval.csv", "DIFFERS"),
        row.format("ok", "checkpoints/latest", "agrees"),
        row.format("ok", "model.safetensors", "agrees"),
    ]
    head = "<table class='files'><tr><th>file</th><th>against metrics.json</th></tr>"
    assert pic.html == head + "".join(rows) + "</table>"
    assert pic.caption == (
        "Each run's summary, csv files, latest pointer and final weights (parameter digest recomputed from "
        "model.safetensors) against its metrics.json. Pass: every row agrees."
    )


def test_the_picture_draws_every_run_that_ran(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    t = Tree(tmp_path)
    write_run(t, "proc", metrics("proc", 2))
    html = consistency_picture(read_consistency(t.artifacts()), {}).html
    assert html.count("runs/proc/") == 5 and "runs/single" not in html


def test_problems_of_every_run_are_counted(tree: Tree) -> None:
    write_run(tree, "proc", metrics("proc", 2))
    (tree.root / "runs/proc/loss.csv").write_text("x")
    edit(tree, "eval.csv", "x")
    o = consistency(read_consistency(tree.artifacts()))
    assert o.measured == 2 and "runs/single/eval.csv" in o.message and "runs/proc/loss.csv" in o.message


def test_non_finite_numbers_are_the_finite_gates_not_this_ones(tree: Tree) -> None:
    m = metrics()
    m["train_loss"][1] = float("nan")
    m["final_val_loss"] = float("inf")
    run = tree.root / "runs" / "single"
    (run / "metrics.json").write_text(json.dumps(m))
    (run / "summary.json").write_text(json.dumps(summary_of(m)))
    for name, text in csv_texts(m).items():
        (run / name).write_text(text)
    assert run_problems(read_run_files(tree.artifacts(), "single")) == []
