"""Judges of plain values (docs/house.md, issue #53 item 1): a judge takes records and thresholds, never
an Artifacts object or a path, and gives the same verdict with every file closed to it.

In-process, over hand-built records and a small hand-built tree (tests/judge_trees.py): the rules of
tests/plain_judges.py on every gate of gates.judges.catalogue.GATES, each with its negative control
(a judge that opens a file, one that asks Path.exists, one that takes the Artifacts). The real gate
tree, every gate judged with the disk closed: tests/pipeline/test_house_plain_judges_tree.py.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from plain_judges import (
    NOT_YET_SPLIT,
    FileTouched,
    module_of,
    no_files,
    plain_problems,
    static_problems,
    whole_tree,
    without_reader,
)
from test_judge_probes import probes
from test_judge_scaling import PARAMS, PROFILES, table

from gates.judges import catalogue
from gates.judges import probes as probes_gate
from gates.judges.gate import Gate
from gates.judges.outcome import Outcome, passed
from gates.reading.measurements import ProbeRecords
from judge_trees import Tree

SPLIT = sorted({module_of(g) for g in catalogue.GATES} - NOT_YET_SPLIT)


def test_every_gate_outside_not_yet_split_has_a_reader_of_its_own() -> None:
    assert without_reader(catalogue.GATES) == []
    assert {
        "gates.judges.seals",
        "gates.judges.provenance",
        "gates.judges.scaling",
        "gates.judges.probes",
    } <= set(SPLIT)
    # NOT_YET_SPLIT names modules that define gates (a stale name would hide nothing, but mislead)
    assert NOT_YET_SPLIT <= {module_of(g) for g in catalogue.GATES}


def test_control_a_gate_that_still_reads_the_whole_tree_is_named() -> None:
    planted = dataclasses.replace(probes_gate.GATE, read=whole_tree)
    assert without_reader([*catalogue.GATES, planted]) == ["model_probes"]


@pytest.mark.parametrize("module", SPLIT)
def test_no_judge_module_reaches_files(module: str) -> None:
    assert static_problems(inspect.getsource(importlib.import_module(module)), module) == []


PLANTED = {
    "takes Artifacts": (
        "from gates.reading.artifacts import Artifacts\n\ndef judge(a: Artifacts, t: dict) -> None:\n    return None\n",
        ["m: imports gates.reading.artifacts.Artifacts", "m: judge(a: Artifacts)"],
    ),
    "a quoted Path annotation": (
        "def judge(r: 'Path', t) -> None:\n    return None\n",
        ["m: judge(r: 'Path')"],
    ),
    "opens a file": (
        "def judge(r, t):\n    with open(r.where) as f:\n        return f.read()\n",
        ["m: line 2 calls open()"],
    ),
    "asks Path.exists": (
        "from pathlib import Path\n\ndef judge(r, t):\n    return Path(r.where).exists()\n",
        ["m: imports from pathlib"],
    ),
    "imports os": (
        "import os.path\n\ndef judge(r, t):\n    return os.path.isfile(r.where)\n",
        ["m: imports os.path"],
    ),
}


@pytest.mark.parametrize("name", PLANTED)
def test_control_a_judge_module_that_reaches_files_is_named(name: str) -> None:
    source, said = PLANTED[name]
    assert static_problems(source, "m") == said


# ---- the disk closed while judging -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Where:
    where: Path


def gate(judge: Any, read: Any = lambda a, t: Where(a.root / "runs" / "probes.json")) -> Gate:
    """A planted gate: reads a record naming a file, judges with `judge`, draws nothing it reads."""
    return dataclasses.replace(
        probes_gate.GATE,
        id="planted",
        judge=judge,
        read=read,
        read_for_picture=None,
        picture=lambda r, t: None,
    )


def small_tree(root: Path) -> Tree:
    """runs/probes.json and bench/scaling.json, recorded in an in-memory dvc.lock."""
    t = Tree(root, params=PARAMS)
    probe = {"format": "xtrain-probes/1", "profile": "cpu", "seed": 1, **probes(diff=3e-6)}
    for rel, data in (("runs/probes.json", probe), ("bench/scaling.json", table())):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(data))
    t.record_out("probes", "runs/probes.json")
    t.record_out("scaling", "bench/scaling.json")
    return t


def test_every_split_gate_gives_the_same_verdict_with_files_closed(tmp_path: Path) -> None:
    tree, thresholds = small_tree(tmp_path), {"scaling": PROFILES}
    a = tree.artifacts()
    bare = dataclasses.replace(a, params=None)  # the seals with params would ask git HEAD (a process)
    # the gates whose records this small tree holds (provenance's reader refuses it: no runs/env.json);
    # every gate on the real tree: tests/pipeline/test_house_plain_judges_tree.py
    judged = {g.id: g for g in catalogue.GATES if g.id in ("seals", "scaling", "model_probes", "provenance")}
    for gid in ("seals", "scaling", "model_probes"):  # read here: the check is not vacuous
        assert judged[gid].read((a if gid == "scaling" else bare).for_gate(), thresholds) is not None
    assert judged["model_probes"].run(a, thresholds).status == "pass"
    assert judged["scaling"].run(a, thresholds).status == "pass"
    assert judged["seals"].run(bare, thresholds).status == "error"  # no dvc.yaml here: a verdict all the same
    problems = {
        gid: plain_problems(g, a if gid == "scaling" else bare, thresholds) for gid, g in judged.items()
    }
    assert problems == {gid: [] for gid in judged}


def opens(r: Where, t: Any) -> Outcome:
    with open(r.where) as f:
        return passed(len(f.read()), None, "read")


def exists(r: Where, t: Any) -> Outcome:
    return passed(r.where.exists(), None, "asked")


def reads_the_tree(a: Any, t: Any) -> Outcome:
    return passed(None, None, str(a.json("runs/probes.json", "probes.schema.json", "probes")["dropout_mean"]))


@pytest.mark.parametrize(
    ("planted", "said"),
    [
        (gate(opens), "planted: its judge builtins.open called while judging"),
        (gate(exists), "planted: its judge Path.exists called while judging"),
        (gate(reads_the_tree, read=whole_tree), "planted: its judge is handed the whole tree, not records"),
    ],
    ids=["opens a file", "asks Path.exists", "takes the Artifacts"],
)
def test_control_a_judge_that_touches_a_file_is_caught(tmp_path: Path, planted: Gate, said: str) -> None:
    a = small_tree(tmp_path).artifacts()
    assert planted.run(a, {}).status == "pass"  # with the disk open it judges
    problems = plain_problems(planted, a, {})
    assert problems and problems[0].startswith(said) and all(p.startswith("planted: ") for p in problems)


def test_no_files_closes_every_way_to_the_disk_and_reopens_it(tmp_path: Path) -> None:
    import os

    import plain_judges

    spawn = plain_judges.subprocess  # the module no_files closes (this test starts no process)
    f = tmp_path / "f.txt"
    f.write_text("x")

    def opened() -> None:
        with open(f):
            pass

    reach = {
        "open": opened,
        "Path.open": lambda: f.open().close(),
        "os.open": lambda: os.open(f, os.O_RDONLY),
        "os.stat": lambda: os.stat(f),
        "os.path.exists": lambda: os.path.exists(f),
        "os.listdir": lambda: os.listdir(tmp_path),
        "os.scandir": lambda: os.scandir(tmp_path),
        "os.walk": lambda: list(os.walk(tmp_path)),
        "Path.exists": f.exists,
        "Path.is_file": f.is_file,
        "Path.read_text": f.read_text,
        "Path.iterdir": lambda: list(tmp_path.iterdir()),
        "Path.rglob": lambda: list(tmp_path.rglob("*")),
        "Path.stat": f.stat,
        "Path.resolve": f.resolve,
    }
    run, popen = spawn.run, spawn.Popen
    with no_files():
        for name, step in reach.items():
            with pytest.raises(FileTouched):
                step()
                pytest.fail(f"{name} reached the disk")
        assert spawn.run is not run and spawn.Popen is not popen  # closed: a call raises, starts nothing
        with pytest.raises(FileTouched, match=r"^subprocess\.run called while judging"):
            spawn.run(["true"])
        with pytest.raises(FileTouched, match=r"^subprocess\.Popen called while judging"):
            spawn.Popen(["true"])
    assert f.read_text() == "x" and f.exists() and os.stat(f).st_size == 1  # every way reopened
    assert (spawn.run, spawn.Popen) == (run, popen)


def test_a_verdict_that_changes_with_files_closed_is_named(tmp_path: Path) -> None:
    """A judge that catches the closed disk and answers otherwise is named too (a verdict, not a crash)."""

    def swallows(r: Where, t: Any) -> Outcome:
        try:
            return passed(r.where.exists(), None, "asked")
        except AssertionError:
            return passed(None, None, "asked")

    planted = gate(swallows, read=lambda a, t: Where(Path("/")))
    problems = plain_problems(planted, Tree(tmp_path).artifacts(), {})
    assert len(problems) == 1 and "with files closed" in problems[0]


def test_the_probes_judge_needs_no_tree_at_all() -> None:
    o = probes_gate.GATE.judge(ProbeRecords(probes(diff=3e-6)), {})
    with no_files():
        assert probes_gate.GATE.judge(ProbeRecords(probes(diff=3e-6)), {}) == o
