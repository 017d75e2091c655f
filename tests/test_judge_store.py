"""registry/store.py under mutation (docs/judge-mutation.md): every md5 comparison sees both sides.

`compare_files` is the one comparison behind the export gate, `registry verify`, bless's diff and the
fresh-training gate: a file present but not expected (or expected but absent) must be a failing row,
never dropped. Torch-free and in-process, so mutmut can attribute each test to the code it runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.validate import ValidationError
from judge_trees import PROVENANCE
from registry import index
from registry.store import (
    CONTENT_HASH,
    Registry,
    RegistryError,
    check_export,
    compare_files,
    content_hash,
    export_files,
    load_sealed,
    seal,
    write_once,
)

MD5 = {"a": "0" * 32, "b": "1" * 32, "c": "2" * 32}


def test_an_unexpected_file_is_a_failing_row() -> None:
    rows = compare_files({"a": MD5["a"]}, {"a": MD5["a"], "extra": MD5["b"]})
    assert [(r.name, r.expected, r.actual, r.ok) for r in rows] == [
        ("a", MD5["a"], MD5["a"], True),
        ("extra", None, MD5["b"], False),
    ]


def test_a_missing_file_is_a_failing_row() -> None:
    rows = compare_files({"a": MD5["a"], "gone": MD5["b"]}, {"a": MD5["a"]})
    assert [(r.name, r.expected, r.actual, r.ok) for r in rows] == [
        ("a", MD5["a"], MD5["a"], True),
        ("gone", MD5["b"], None, False),
    ]


def test_rows_are_sorted_by_name_and_a_changed_md5_fails() -> None:
    rows = compare_files({"c": MD5["c"], "a": MD5["a"]}, {"a": MD5["b"], "c": MD5["c"]})
    assert [r.name for r in rows] == ["a", "c"]
    assert [r.ok for r in rows] == [False, True]


# -- a scratch registry (torch-free): one sealed, indexed version of model `tiny` -----------------


def make_version(root: Path, files: dict[str, str], dtype: str = "fp32", number: int = 1) -> Path:
    data = seal(
        {
            "format": "xtrain-registry-version/1",
            "model": "tiny",
            "version": number,
            "dtype": dtype,
            "exporter": "xtrain-export/1",
            "files": files,
            "source_checkpoint_md5": MD5["c"],
            "reason": "a version for the mutation tests",
            "provenance": PROVENANCE,
        }
    )
    path = root / "models" / "tiny" / f"v{number}.json"
    write_once(path, data)
    index.record(root, [path])
    return path


def manifest(dtype: str = "fp32", source: str = MD5["c"]) -> dict:
    return {"dtype": dtype, "source_checkpoint": {"model_md5": source}}


@pytest.fixture()
def reg(tmp_path: Path) -> Registry:
    root = tmp_path / "registry"
    root.mkdir()
    index.write(root, {})
    make_version(root, {"a": MD5["a"], "b": MD5["b"]})
    return Registry(root)


def test_check_export_fails_on_a_file_the_version_does_not_list(reg: Registry) -> None:
    same = check_export(reg, "tiny", manifest(), {"a": MD5["a"], "b": MD5["b"]})
    assert same.passed and same.entry.version == 1
    extra = check_export(reg, "tiny", manifest(), {"a": MD5["a"], "b": MD5["b"], "x": MD5["c"]})
    assert not extra.passed
    assert [c.name for c in extra.files if not c.ok] == ["x"]


def test_check_export_fails_on_another_source_checkpoint(reg: Registry) -> None:
    result = check_export(reg, "tiny", manifest(source=MD5["a"]), {"a": MD5["a"], "b": MD5["b"]})
    assert all(c.ok for c in result.files) and not result.source.ok and not result.passed
    assert (result.source.expected, result.source.actual) == (MD5["c"], MD5["a"])


def test_check_export_selects_by_dtype_and_number(reg: Registry) -> None:
    with pytest.raises(RegistryError, match=r"^registry/models/tiny: no a bf16 version blessed \(bless one"):
        reg.version("tiny", "bf16")
    make_version(reg.root, {"a": MD5["b"]}, dtype="bf16", number=2)
    make_version(reg.root, {"a": MD5["c"]}, dtype="fp32", number=3)
    assert check_export(reg, "tiny", manifest("bf16"), {"a": MD5["b"]}).entry.version == 2
    assert check_export(reg, "tiny", manifest(), {"a": MD5["c"]}).entry.version == 3
    assert check_export(reg, "tiny", manifest(), {}, number=1).entry.version == 1
    with pytest.raises(RegistryError, match="no version 2 blessed"):
        check_export(reg, "tiny", manifest(), {}, number=2)
    with pytest.raises(RegistryError, match="no version 3 blessed"):
        reg.version("tiny", "bf16", 3)


def test_export_files_lists_every_file_but_the_manifest(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    assert export_files(tmp_path) == {
        "a.txt": "0cc175b9c0f1b6a831c399e269772661",
        "b.txt": "92eb5ffee6ae2fec3ad71c777531578f",
    }
    with pytest.raises(RegistryError, match="export folder not found"):
        export_files(tmp_path / "absent")


def test_a_sealed_file_edited_by_hand_is_refused(reg: Registry, tmp_path: Path) -> None:
    path = reg.root / "models" / "tiny" / "v1.json"
    data = json.loads(path.read_text())
    assert data[CONTENT_HASH] == content_hash(data) == content_hash({**data, CONTENT_HASH: "x"})
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**data, "dtype": "bf16"}))
    with pytest.raises(ValidationError, match="edited by hand"):
        load_sealed(edited, "version.schema.json")
