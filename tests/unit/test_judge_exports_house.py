"""Issue #53 item 1 for the export, fresh_train, closed_loop and perf gates: read once, judge plain values.

On a tree of each gate (tests/judge_trees.py, the builders of the gates' own tests), the gate's reader
reads its records; its judge then gives the identical verdict with every way of opening a file patched
to raise. Negative control: the same patch catches a judge that opens a file (the gates before this
change read inside the judge), so the check can fail.
"""

from __future__ import annotations

import builtins
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import test_judge_closed_loop_entry as closed_loop_trees
import test_judge_export_gguf as gguf_trees
import test_judge_export_md5 as md5_trees
import test_judge_fresh_train_entry as fresh_trees
import test_judge_perf_entry as perf_trees

from contracts import artifact_table
from gates.judges import closed_loop, export_gguf, export_md5, fresh_train, perf
from gates.judges.gate import Gate
from gates.reading.artifacts import Artifacts
from judge_trees import Tree, make_golden, make_registry


def fresh_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Artifacts:
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    tree = Tree(tmp_path, params=None)
    fresh_trees.write_run(tree, fresh_trees.metrics())
    make_registry(tmp_path / "registry")
    md5 = fresh_trees.add_export(tree)
    make_golden(fresh_trees.reg_of(tree), "cpu-own", config_hash=fresh_trees.HASH, files=md5)
    return tree.artifacts()


def perf_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    perf_trees.bless(tmp_path, {"single": perf_trees.stage("single")})
    return perf_trees.Runs(tmp_path, {"single": perf_trees.metrics("single")})


TREES: dict[str, tuple[Gate, Callable[[Path, pytest.MonkeyPatch], Any], dict[str, Any], str]] = {
    "fresh_train": (fresh_train.GATE, fresh_tree, {"fresh_train": fresh_trees.POLICY}, "pass"),
    "export_md5": (export_md5.GATE, lambda p, mp: md5_trees.build(p).artifacts(), {}, "pass"),
    "export_gguf": (export_gguf.GATE, lambda p, mp: gguf_trees.build(p).artifacts(), {}, "pass"),
    "closed_loop": (closed_loop.GATE, lambda p, mp: closed_loop_trees.make_tree(p).artifacts(), {}, "pass"),
    "perf.throughput": (perf.THROUGHPUT, perf_tree, perf_trees.THRESHOLDS, "pass"),
    "perf.memory": (perf.MEMORY, perf_tree, perf_trees.THRESHOLDS, "pass"),
}


def no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way a judge could open, list or stat a file raises from here on."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a judge touched a file: {args[:1]}")

    for target, name in (
        (builtins, "open"),
        (io, "open"),
        (os, "open"),
        (os, "stat"),
        (os, "listdir"),
        (os, "scandir"),
        (Path, "exists"),
        (Path, "iterdir"),
        (Path, "is_file"),
    ):
        monkeypatch.setattr(target, name, refuse)


def verdict(gate: Gate, records: Any, t: dict[str, Any]) -> tuple[Any, ...]:
    o = gate.judge(records, t)
    return o.status, o.measured, o.threshold, o.message, o.not_applied


@pytest.mark.parametrize("gate_id", sorted(TREES))
def test_the_judge_gives_its_verdict_with_every_file_closed(
    gate_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, tree, t, status = TREES[gate_id]
    assert gate.id == gate_id
    a = tree(tmp_path, monkeypatch)
    records = gate.read(a, t)
    want = verdict(gate, records, t)
    ran = gate.run(a, t)  # read, then judged: what the check does
    assert want[0] == status and want == (
        ran.status,
        ran.measured,
        ran.threshold,
        ran.message,
        ran.not_applied,
    )
    with monkeypatch.context() as mp:
        no_file(mp)
        assert verdict(gate, records, t) == want


def test_the_patch_catches_a_judge_that_opens_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a gate that still reads in its judge (the reader that hands the tree on, as
    every gate did before) fails under the same patch."""
    a = md5_trees.build(tmp_path).artifacts()
    reading_judge = Gate(**{**export_md5.GATE.__dict__, "read": lambda a, t: a,
                            "judge": lambda a, t: export_md5.export_md5(export_md5.read_export_md5(a, t))})  # fmt: skip
    records = reading_judge.read(a, {})
    assert reading_judge.judge(records, {}).status == "pass"
    with monkeypatch.context() as mp:
        no_file(mp)
        with pytest.raises(AssertionError, match="a judge touched a file"):
            reading_judge.judge(records, {})
