"""gates/reading/dvcstatus.py under mutation (docs/judge-mutation.md): `dvc status` without DVC, in-process.

Which deps, outs, params and commands differ from dvc.lock, each change's state and one line, on
dvc.lock entries and StageDefs written by hand over small files. tests/process/test_seals_dvc_status.py holds
the same verdicts equal to real `dvc status`; these pin each rule and message so mutmut can attribute
them (the stale tests of the seals gate lived in tests/process/test_judge_seals.py before the merge of speed).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from contracts.fileio import md5_file
from contracts.validate import ValidationError
from gates.reading.dvclock import DvcLock, dir_listing, dir_md5
from gates.reading.dvcstatus import (
    ABSENT,
    Change,
    ParamsFiles,
    blessed,
    dig,
    dvc_parsed,
    entries,
    frozen,
    key_change,
    leaf_diffs,
    md5_now,
    param_changes,
    path_change,
    stage_changes,
    status,
)
from gates.reading.dvcyaml import Out, StageDef


def lock(root: Path, stages: dict, definitions: dict | None = None) -> DvcLock:
    return DvcLock(root, stages, set(), {}, definitions or {})


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("a\n")
    (tmp_path / "registry").mkdir()
    (tmp_path / "registry" / "index.json").write_text("{}\n")
    return tmp_path


# -- paths: deps and outs -----------------------------------------------------------------------------------


def test_blessed_is_a_registry_data_file() -> None:
    assert blessed("registry/index.json") and blessed("registry/goldens/e/v1.json") and blessed("registry/m")
    assert (
        not blessed("registry/store.py") and not blessed("gates/registry/x.json") and not blessed("registr")
    )


def test_entries_are_keyed_by_path() -> None:
    body = {"deps": [{"path": "a", "md5": "1"}, "odd", {"md5": "2"}], "outs": None}
    assert entries(body, "deps") == {"a": {"path": "a", "md5": "1"}, "None": {"md5": "2"}}
    assert entries(body, "outs") == {} and entries({}, "deps") == {}


def test_md5_now_of_a_file_a_folder_and_nothing(tree: Path) -> None:
    lk = lock(tree, {})
    assert md5_now(lk, "code.py") == md5_file(tree / "code.py") and lk._md5["code.py"] == md5_now(
        lk, "code.py"
    )
    assert md5_now(lk, "d") == dir_md5(dir_listing(tree / "d")) and md5_now(lk, "d").endswith(".dir")
    assert md5_now(lk, "gone") is None


def test_path_change_names_both_sides(tree: Path) -> None:
    lk, code = lock(tree, {}), md5_file(tree / "code.py")
    assert path_change(lk, "s", "dep", "code.py", {"md5": code}) is None
    assert path_change(lk, "s", "dep", "code.py", {"md5": "m"}) == Change(
        "s", "dep", "code.py", "modified", f"dep code.py md5 {code}, dvc.lock recorded m"
    )
    assert path_change(lk, "s", "out", "code.py", {"path": "code.py"}) == Change(
        "s", "out", "code.py", "modified", f"out code.py md5 {code}, dvc.lock recorded None"
    )
    assert path_change(lk, "s", "dep", "code.py", None) == Change(
        "s", "dep", "code.py", "modified", f"dep code.py has no entry in dvc.lock (md5 now {code})"
    )
    assert path_change(lk, "t", "out", "gone.py", {"md5": "g"}) == Change(
        "t", "out", "gone.py", "deleted", "out gone.py md5 (missing), dvc.lock recorded g"
    )
    for entry in (None, {}, {"md5": ""}):  # absent: deleted whether or not dvc.lock has an entry
        assert (
            path_change(lk, "s", "dep", "gone.py", entry).why
            == "dep gone.py md5 (missing), dvc.lock recorded None"
        )
    folder = dir_md5(dir_listing(tree / "d"))
    assert path_change(lk, "s", "dep", "d", {"md5": folder}) is None
    assert (
        path_change(lk, "s", "dep", "d", {"md5": "x.dir"}).why
        == f"dep d md5 {folder}, dvc.lock recorded x.dir"
    )


def test_a_registry_data_file_dep_may_move_but_not_an_out_a_folder_or_an_absent_entry(tree: Path) -> None:
    lk = lock(tree, {})
    now = md5_file(tree / "registry" / "index.json")
    assert path_change(lk, "s", "dep", "registry/index.json", {"md5": "blessed-since"}) is None
    assert path_change(lk, "s", "out", "registry/index.json", {"md5": "i"}).why == (
        f"out registry/index.json md5 {now}, dvc.lock recorded i"
    )
    assert path_change(lk, "s", "dep", "registry/index.json", None).state == "modified"  # no entry: stale
    (tree / "registry" / "models").mkdir()
    (tree / "registry" / "models" / "v1.json").write_text("{}\n")
    folder = path_change(lk, "s", "dep", "registry/models", {"md5": "r.dir"})  # a folder dep: sealed
    assert (folder.state, folder.why.startswith("dep registry/models md5 ")) == ("modified", True)


# -- params ---------------------------------------------------------------------------------------------


def test_dig_reads_dotted_keys_and_list_items() -> None:
    doc = {"train": {"lr": 0.1, "opt": {"beta": 0.9}}, "seed": 1, "xs": [10, {"y": 20}]}
    assert dig(doc, "train.opt.beta") == 0.9 and dig(doc, "seed") == 1 and dig(doc, "train") == doc["train"]
    assert dig(doc, "xs.0") == 10 and dig(doc, "xs.1.y") == 20
    for key in ("train.wd", "seed.x", "xs.2", "xs.-1", "xs.a", "nope"):
        assert dig(doc, key) is ABSENT, key
    assert dig(None, "a") is ABSENT and dig([5], "0") == 5 and ABSENT == "(absent)"


def test_params_files_are_read_as_dvc_reads_them_once(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("lr: 1e-06\nn: 040\nflag: yes\n")
    (tmp_path / "p.yml").write_text("a: 1\n")
    (tmp_path / "p.json").write_text(json.dumps({"b": [1, 2]}))
    files = ParamsFiles(tmp_path)
    assert files("params.yaml") == {"lr": 1e-06, "n": 40, "flag": "yes"}  # YAML 1.2, as DVC
    assert files("p.yml") == {"a": 1} and files("p.json") == {"b": [1, 2]}
    (tmp_path / "params.yaml").write_text("lr: 2\n")
    assert files("params.yaml")["lr"] == 1e-06 and set(files.cache) == {"params.yaml", "p.yml", "p.json"}
    (tmp_path / "p.toml").write_text("a = 1\r\n[t]\nb = 'two'\n")  # issue #51: refused, DVC reads it
    (tmp_path / "p.py").write_text("A = 1\nT = (2, 4)\n")
    (tmp_path / "p.txt").write_text("a: 1\n")  # any other suffix: YAML, as DVC's LOADERS
    (tmp_path / "e.json").write_text("null")  # DVC: json.loads(text) or {}
    assert files("p.toml") == {"a": 1, "t": {"b": "two"}} and files("p.py") == {"A": 1, "T": (2, 4)}
    assert files("p.txt") == {"a": 1} and files("e.json") == {}
    (tmp_path / "bad.toml").write_text("a = \n")
    with pytest.raises(ValidationError) as e:
        files("bad.toml")
    assert str(e.value).startswith(f"{tmp_path / 'bad.toml'}: DVC cannot read it: ")
    (tmp_path / "bad.py").write_text("A = (\n")
    with pytest.raises(ValidationError, match=r"bad\.py: DVC cannot read it: "):
        files("bad.py")


def test_key_change_of_each_state() -> None:
    assert key_change("s", "p.yaml", "k", ABSENT, 1) == [
        Change("s", "param", "p.yaml k", "deleted", "p.yaml k is absent, dvc.lock recorded 1")
    ]
    assert key_change("s", "p.yaml", "k", "v", ABSENT) == [
        Change("s", "param", "p.yaml k", "new", "p.yaml k is 'v', dvc.lock recorded none")
    ]
    assert key_change("s", "p.yaml", "k", 1, 1.0) == [] and key_change("s", "p.yaml", "k", [1], [1]) == []
    nan = key_change("t", "p.yaml", "k", math.nan, math.nan)  # as DVC's `!=`: a NaN is never equal
    assert [(c.stage, c.state, c.why) for c in nan] == [
        ("t", "modified", "p.yaml k is nan, dvc.lock recorded nan")
    ]
    assert key_change("s", "p.yaml", "k", {"a": 1, "b": 2, "c": 0}, {"a": 1, "b": 3, "c": 1}) == [
        Change("s", "param", "p.yaml k.b", "modified", "p.yaml k.b is 2, dvc.lock recorded 3"),
        Change("s", "param", "p.yaml k.c", "modified", "p.yaml k.c is 0, dvc.lock recorded 1"),
    ]
    assert key_change("s", "p.yaml", "k", {"a": 1}, 3) == [
        Change("s", "param", "p.yaml k", "modified", "p.yaml k is {'a': 1}, dvc.lock recorded 3")
    ]


def test_leaf_diffs_name_every_differing_leaf() -> None:
    assert leaf_diffs("k", 1, 1) == [] and leaf_diffs("k", 1, 2) == [("k", 1, 2)]
    assert leaf_diffs(
        "train", {"lr": 0.2, "b": {"c": 1}, "new": 5}, {"lr": 0.1, "b": {"c": 1}, "old": 6}
    ) == [
        ("train.lr", 0.2, 0.1),
        ("train.new", 5, ABSENT),
        ("train.old", ABSENT, 6),
    ]
    assert leaf_diffs("t", {"a": 1}, 3) == [("t", {"a": 1}, 3)]
    assert leaf_diffs("k", {1: "a", "b": 2, "0": 9}, {1: "b", "b": 2, "0": 8}) == [
        ("k.0", 9, 8),
        ("k.1", "a", "b"),
    ]


def test_param_changes_by_key_by_file_and_for_a_file_dvc_lock_lacks() -> None:
    assert param_changes("s", "p.yaml", ("a",), None, {"a": 1}) == [
        Change("s", "param", "p.yaml", "new", "p.yaml has no values in dvc.lock (dvc status: new)")
    ]
    assert param_changes("s", "p.yaml", ("a", "x.y"), {"a": 1, "x.y": 2}, {"a": 1, "x": {"y": 3}}) == [
        Change("s", "param", "p.yaml x.y", "modified", "p.yaml x.y is 3, dvc.lock recorded 2")
    ]
    whole = param_changes("s", "p.yaml", (), {"a": 1, "b": 2}, {"a": 1, "c": 3})  # no keys: the whole file
    assert [(c.name, c.state) for c in whole] == [("p.yaml c", "new"), ("p.yaml b", "deleted")]
    odd = param_changes("s", "p.yaml", ("a",), [1], "text")  # neither side a mapping: the key is absent
    assert [(c.name, c.state, c.why) for c in odd] == [
        ("p.yaml a", "deleted", "p.yaml a is absent, dvc.lock recorded '(absent)'")
    ]
    assert param_changes("s", "p.yaml", (), {}, {}) == []


# -- a stage and the status -----------------------------------------------------------------------------


def stage_tree(root: Path) -> tuple[DvcLock, StageDef]:
    (root / "code.py").write_text("x = 1\n")
    (root / "o.txt").write_text("o\n")
    (root / "params.yaml").write_text("train:\n  lr: 0.1\nseed: 1\n")
    d = StageDef(
        cmd="python code.py",
        deps=("code.py",),
        params=(("params.yaml", ("train.lr", "seed")),),
        outs=(Out("o.txt"),),
    )
    body = {
        "cmd": "python code.py",
        "deps": [{"path": "code.py", "md5": md5_file(root / "code.py")}],
        "params": {"params.yaml": {"train.lr": 0.1, "seed": 1}},
        "outs": [{"path": "o.txt", "md5": md5_file(root / "o.txt")}],
    }
    return lock(root, {"s": body}, {"s": d}), d


def test_a_stage_equal_to_dvc_lock_has_no_changes(tmp_path: Path) -> None:
    lk, d = stage_tree(tmp_path)
    assert stage_changes(lk, "s", d, ParamsFiles(tmp_path)) == [] and status(lk, ["s"]) == {}


def test_every_kind_of_change_of_a_stage_in_order(tmp_path: Path) -> None:
    lk, d = stage_tree(tmp_path)
    lk.stages["s"]["cmd"] = "python old.py"
    (tmp_path / "code.py").write_text("x = 2\n")
    (tmp_path / "params.yaml").write_text("train:\n  lr: 0.2\nseed: 1\n")
    (tmp_path / "o.txt").unlink()
    changes = stage_changes(lk, "s", d, ParamsFiles(tmp_path))
    assert [(c.kind, c.name, c.state) for c in changes] == [
        ("cmd", "", "changed"),
        ("dep", "code.py", "modified"),
        ("param", "params.yaml train.lr", "modified"),
        ("out", "o.txt", "deleted"),
    ]
    assert changes[0].why == "cmd 'python code.py', dvc.lock recorded 'python old.py'"
    assert changes[2].why == "params.yaml train.lr is 0.2, dvc.lock recorded 0.1"
    assert status(lk, ["s", "other"]) == {"s": changes}


def test_a_frozen_stage_keeps_its_deps_and_params_but_not_its_command_or_outs(tmp_path: Path) -> None:
    lk, d = stage_tree(tmp_path)
    (tmp_path / "code.py").write_text("x = 2\n")
    (tmp_path / "params.yaml").write_text("train:\n  lr: 0.2\nseed: 1\n")
    frozen = StageDef(d.cmd, d.deps, d.params, d.outs, frozen=True)
    assert stage_changes(lk, "s", frozen, ParamsFiles(tmp_path)) == []
    (tmp_path / "o.txt").unlink()  # (a rewrite would not show: each file is hashed once per check)
    lk.stages["s"]["cmd"] = "other"
    assert [c.kind for c in stage_changes(lk, "s", frozen, ParamsFiles(tmp_path))] == ["cmd", "out"]
    always = StageDef(d.cmd, d.deps, d.params, d.outs, always_changed=True)  # judged like any other
    assert [c.kind for c in stage_changes(lk, "s", always, ParamsFiles(tmp_path))] == [
        "cmd",
        "dep",
        "param",
        "out",
    ]


def test_a_missing_params_file_or_one_dvc_lock_has_no_values_for(tmp_path: Path) -> None:
    lk, d = stage_tree(tmp_path)
    two = StageDef(d.cmd, d.deps, (*d.params, ("extra.yaml", ("k",))), d.outs)
    assert stage_changes(lk, "s", two, ParamsFiles(tmp_path)) == [
        Change("s", "param", "extra.yaml", "deleted", "extra.yaml is missing")
    ]
    (tmp_path / "extra.yaml").write_text("k: [\n")  # not read: dvc.lock records no values for it
    assert stage_changes(lk, "s", two, ParamsFiles(tmp_path)) == [
        Change("s", "param", "extra.yaml", "new", "extra.yaml has no values in dvc.lock (dvc status: new)")
    ]
    del lk.stages["s"]["params"]
    assert [c.name for c in stage_changes(lk, "s", two, ParamsFiles(tmp_path))] == [
        "params.yaml",
        "extra.yaml",
    ]


def test_status_lists_only_stages_defined_recorded_and_changed(tmp_path: Path) -> None:
    lk, d = stage_tree(tmp_path)
    lk.definitions.update(unrecorded=d, same=d)
    lk.stages.update(undefined={"cmd": "x"}, same=lk.stages["s"])
    lk.stages["s"] = {**lk.stages["s"], "cmd": "changed"}
    assert status(lk, ["s", "same", "unrecorded", "undefined", "nowhere"]) == {
        "s": [Change("s", "cmd", "", "changed", "cmd 'python code.py', dvc.lock recorded 'changed'")]
    }
    assert status(lk, ["same"]) == {} and status(lk, []) == {}
    lk.stages["s"] = None  # an entry without a body: every path has no entry
    assert [(c.kind, c.state) for c in status(lk, ["s"])["s"]] == [
        ("cmd", "changed"),
        ("dep", "modified"),
        ("param", "new"),
        ("out", "modified"),
    ]


# -- issue #51: DVC 2 entries, a Python file's tuples, frozen stages ------------------------------------------


def test_an_entry_without_hash_md5_is_compared_as_dvc2_hashed_it(tree: Path) -> None:
    (tree / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    (tree / "d" / "c.txt").write_bytes(b"c\r\n")
    lk, lf = lock(tree, {}), md5_file_bytes(b"a\nb\n")
    assert md5_now(lk, "crlf.txt", legacy=True) == lf != md5_now(lk, "crlf.txt")
    assert md5_now(lk, "d", legacy=True) == dir_md5(
        [
            {"md5": md5_file(tree / "d" / "a.txt"), "relpath": "a.txt"},
            {"md5": md5_file_bytes(b"c\n"), "relpath": "c.txt"},
        ]
    )
    assert path_change(lk, "s", "dep", "crlf.txt", {"md5": lf}) is None  # DVC 2: fresh (dvc status agrees)
    raw = path_change(lk, "s", "dep", "crlf.txt", {"md5": lf, "hash": "md5"})  # DVC 3: the bytes moved
    assert (
        raw.state == "modified"
        and raw.why == f"dep crlf.txt md5 {md5_file(tree / 'crlf.txt')}, dvc.lock recorded {lf}"
    )
    assert path_change(lk, "s", "dep", "crlf.txt", None).why.endswith(
        f"(md5 now {md5_file(tree / 'crlf.txt')})"
    )


def md5_file_bytes(data: bytes) -> str:
    import hashlib

    return hashlib.md5(data).hexdigest()


def test_a_python_params_files_tuple_equals_the_recorded_list_at_the_top_only() -> None:
    assert (
        key_change("s", "p.py", "T", (2, 4), [2, 4]) == []
        and key_change("s", "p.py", "T", [2, 4], [2, 4]) == []
    )
    assert key_change("s", "p.py", "T", (2, 5), [2, 4])[0].state == "modified"
    assert key_change("s", "p.py", "N", {"t": (2, 4)}, {"t": [2, 4]})[0].name == "p.py N.t"  # DVC: modified
    assert key_change("s", "p.py", "T", (2, 4), (2, 4)) == []


def test_frozen_lists_each_frozen_stage_with_its_changed_deps_and_params(tmp_path: Path) -> None:
    lk, d = stage_tree(tmp_path)
    lk.definitions["s"] = StageDef(d.cmd, d.deps, d.params, d.outs, frozen=True)
    lk.definitions["plain"] = d
    lk.stages["plain"] = lk.stages["s"]
    lk.definitions["unrecorded"] = StageDef("x", frozen=True)
    assert frozen(lk, ["s", "plain", "unrecorded", "nowhere"]) == {"s": []}
    lk.stages["s"] = {**lk.stages["s"], "cmd": "old"}  # a command or an out is dvc status's, not this
    (tmp_path / "o.txt").unlink()
    assert frozen(lk, ["s"]) == {"s": []}
    (tmp_path / "code.py").write_text("x = 2\n")
    (tmp_path / "params.yaml").write_text("train:\n  lr: 0.2\nseed: 1\n")
    lk = DvcLock(tmp_path, lk.stages, set(), {}, lk.definitions)  # a new check: each file hashed anew
    changed = frozen(lk, ["s", "plain"])
    assert list(changed) == ["s"] and [(c.kind, c.name) for c in changed["s"]] == [
        ("dep", "code.py"), ("param", "params.yaml train.lr"),
    ]  # fmt: skip
    assert status(lk, ["s"]) == {"s": [c for c in status(lk, ["s"])["s"] if c.kind in ("cmd", "out")]}
    assert frozen(lk, []) == {}


def test_dvc_parsed_reads_as_dvc_opens_it_and_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_bytes(b'a = """x\r\ny\rz"""\n')  # universal newlines, as DVC's text mode
    assert dvc_parsed(tmp_path / "p.toml", ".toml") == {"a": "x\ny\nz"}
    (tmp_path / "p.py").write_bytes(b'A = "x"\r\nB = 2\r')
    assert dvc_parsed(tmp_path / "p.py", ".py") == {"A": "x", "B": 2}
    (tmp_path / "bad.toml").write_text("a = \n")
    with pytest.raises(ValidationError) as e:
        dvc_parsed(tmp_path / "bad.toml", ".toml")
    assert str(e.value).startswith(f"{tmp_path / 'bad.toml'}: DVC cannot read it: unable to read: '")
    assert str(e.value).endswith("/bad.toml', TOML file structure is corrupted")  # DVC names it as it likes
    (tmp_path / "bin.toml").write_bytes(b"a = '\xff'\n")
    with pytest.raises(ValidationError) as e:
        dvc_parsed(tmp_path / "bin.toml", ".toml")
    assert str(e.value).startswith(f"{tmp_path / 'bin.toml'}: byte ")
