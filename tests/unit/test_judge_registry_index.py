"""registry/index.py under mutation (docs/judge-mutation.md): the registry's index of itself, in-process.

Every data file listed with its sha256 and every read checked against it: a deleted, extra, altered
or leftover file is one error naming it (with the file's own error where it has one: a pin md5, a
seal, a folder name), and every write extends the index atomically.
(tests/process/test_inputs_registry_index.py holds the command-line cases.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.fileio import sha256_file
from contracts.validate import ValidationError
from judge_trees import bless, make_registry
from registry import index
from registry.sealed import seal
from registry.store import write_once


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    reg = make_registry(tmp_path / "registry")
    bless(reg, "tiny", {"a": "1" * 32}, "fp32", "c" * 32)
    return reg.root


def error(root: Path) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        index.check(root)
    return e.value


def test_on_disk_lists_data_files_not_the_index_code_or_caches(root: Path) -> None:
    (root / "store.py").write_text("")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_text("")
    (root / "models" / "tiny" / "__pycache__").mkdir()
    (root / "models" / "notes.py").write_text("")
    assert index.on_disk(root) == [
        "models/notes.py",
        "models/tiny/v1.json",
        "pinned/tiny/model.safetensors",
        "pinned/tiny/pin.json",
        "pinned/tiny/state.json",
        "pinned/tiny/tokenizer.json",
    ]


def test_a_consistent_registry_passes_and_read_gives_the_listing(root: Path) -> None:
    listed = index.check(root)
    assert listed == index.read(root) and sorted(listed) == index.on_disk(root)
    assert listed["models/tiny/v1.json"] == sha256_file(root / "models" / "tiny" / "v1.json")
    assert index.read(root.parent / "nowhere") is None


def test_a_deleted_file_is_named_with_its_listed_hash(root: Path) -> None:
    listed = index.read(root)
    (root / "models" / "tiny" / "v1.json").unlink()
    e = error(root)
    assert str(e) == (
        f"{root / 'models/tiny/v1.json'}: missing: registry/index.json lists it (sha256 "
        f"{listed['models/tiny/v1.json'][:12]}...); next: restore the registry from git (git checkout -- "
        "registry/); a blessed file is never deleted"
    )


def test_an_unknown_file_is_named(root: Path) -> None:
    (root / "goldens").mkdir()
    (root / "goldens" / "x.txt").write_text("x")
    assert str(error(root)) == (
        f"{root / 'goldens/x.txt'}: unknown file in the registry (not in registry/index.json): files are added "
        "only by bless / pin; next: remove it, or restore the registry from git (git checkout -- registry/)"
    )


@pytest.mark.parametrize("name", [".v2.json.abc.tmp", ".index.json.x.old"])
def test_a_leftover_temporary_is_named_as_such(root: Path, name: str) -> None:
    (root / "models" / "tiny" / name).write_text("{}")
    assert str(error(root)) == (
        f"{root / 'models/tiny' / name}: a leftover temporary file of an interrupted registry write (not in "
        "registry/index.json); next: delete it; registry writes are atomic, so nothing blessed is lost"
    )


def test_a_leftover_inside_a_temporary_folder_is_a_leftover(root: Path) -> None:
    (root / "pinned" / ".tiny.x.tmp").mkdir()
    (root / "pinned" / ".tiny.x.tmp" / "state.json").write_text("{}")
    assert "a leftover temporary file" in str(error(root))
    assert (
        not index._leftover("models/tiny/v1.tmp")
        and not index._leftover(".tmp")
        and index._leftover("a/.b.tmp")
    )


@pytest.mark.parametrize("name", [".v2.json.abc.tmp", "v2.json"])
def test_a_file_a_writer_is_adding_now_names_the_writer(
    root: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `registry pin` at once: the second blamed "an interrupted write" the first was still doing."""
    asked = []

    def writer(target: Path) -> str:
        asked.append(target)
        return "pid 7 (python -m registry pin)"

    monkeypatch.setattr(index.lockfile, "holding", writer)
    (root / "models" / "tiny" / name).write_text("{}")
    assert str(error(root)) == (
        f"{root / 'models/tiny' / name}: not yet in registry/index.json: pid 7 (python -m registry pin) is "
        "writing the registry now; next: let it finish, then re-run"
    )
    assert asked == [root.resolve()]


def test_an_altered_file_is_named_with_both_hashes(root: Path) -> None:
    path = root / "pinned" / "tiny" / "notes.txt"
    path.write_text("a")
    index.record(root, [path])
    listed = index.read(root)["pinned/tiny/notes.txt"]
    path.write_text("b")
    assert str(error(root)) == (
        f"{path}: sha256: {sha256_file(path)[:12]}... differs from registry/index.json's {listed[:12]}...; next: "
        "registry files change only through python -m registry bless / pin; restore the registry from git "
        "(git checkout -- registry/)"
    )


@pytest.mark.parametrize(
    ("name", "key"), [("model.safetensors", "model_md5"), ("tokenizer.json", "tokenizer_md5")]
)
def test_an_altered_pinned_file_says_what_its_pin_recorded(root: Path, name: str, key: str) -> None:
    from contracts.fileio import md5_file

    path = root / "pinned" / "tiny" / name
    pin = json.loads((root / "pinned" / "tiny" / "pin.json").read_text())
    path.write_text("altered")
    e = error(root)
    assert (e.source, e.key) == (str(path), key)
    assert str(e) == (
        f"{path}: {key}: missing or differs from pin.json (md5 {md5_file(path)}, pin.json recorded {pin[key]})"
    )


def test_a_hand_edited_sealed_file_is_refused_by_its_seal_first(root: Path) -> None:
    path = root / "models" / "tiny" / "v1.json"
    original = path.read_text()
    data = json.loads(original)
    data["dtype"] = "bf16"
    path.write_text(json.dumps(data))
    assert "content_sha256: does not match the file's content" in str(error(root))
    path.write_text(original)
    pin = root / "pinned" / "tiny" / "pin.json"
    data = json.loads(pin.read_text())
    data["reason"] = "another reason, edited"
    pin.write_text(json.dumps(data))
    assert f"{pin}: content_sha256" in str(error(root))


def test_a_resealed_version_in_another_folder_is_named_by_its_key(root: Path) -> None:
    data = json.loads((root / "models" / "tiny" / "v1.json").read_text())
    path = root / "models" / "other" / "v1.json"
    write_once(path, data)
    e = error(root)
    assert str(e) == f"{path}: model: 'tiny' does not match its folder (rule: 'other')"


def test_a_forged_file_that_reads_cleanly_gets_the_index_error(root: Path) -> None:
    data = {
        k: v
        for k, v in json.loads((root / "models" / "tiny" / "v1.json").read_text()).items()
        if k != "content_sha256"
    }
    path = root / "models" / "tiny" / "v2.json"
    write_once(path, seal({**data, "version": 2}))
    assert "unknown file in the registry (not in registry/index.json)" in str(error(root))
    (root / "models" / "tiny" / "notes").mkdir()
    (root / "models" / "tiny" / "notes" / "x.json").write_text("{}")  # four parts deep: no own error
    path.unlink()
    assert "unknown file in the registry" in str(error(root))


def test_a_missing_index_and_creating_one(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    assert index.check(root) == {}  # no registry at all
    root.mkdir()
    assert index.check(root) == {}  # an empty registry needs no index
    (root / "models").mkdir()
    (root / "models" / "a.txt").write_text("a")
    with pytest.raises(index.IndexProblem) as e:
        index.check(root)
    assert str(e.value) == (
        f"{root / 'index.json'}: missing: the registry holds 1 files and no index of them; next: restore the "
        "registry from git (git checkout -- registry/); for a registry that never had one: python -m registry index"
    )
    assert index.create(root) == 1
    assert index.check(root) == {"models/a.txt": sha256_file(root / "models" / "a.txt")}
    with pytest.raises(index.IndexProblem) as e:
        index.create(root)
    assert (
        str(e.value)
        == f"{root / 'index.json'}: exists: the index changes only with bless / pin; next: python -m registry validate"
    )
    data = json.loads((root / "index.json").read_text())
    assert data["format"] == index.FORMAT == "xtrain-registry-index/1" and data["content_sha256"]


def test_create_refuses_a_leftover(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    (root / "models").mkdir(parents=True)
    (root / "models" / ".v1.json.x.tmp").write_text("{}")
    with pytest.raises(index.IndexProblem, match="a leftover temporary file"):
        index.create(root)
    assert not (root / "index.json").exists()


def test_record_adds_new_files_and_refuses_an_inconsistent_registry(root: Path) -> None:
    new = root / "goldens" / "e" / "notes.txt"
    new.parent.mkdir(parents=True)
    new.write_text("n")
    index.record(root, [new])
    assert index.read(root)["goldens/e/notes.txt"] == sha256_file(new)
    assert list(index.read(root)) == sorted(index.read(root))
    other = root / "goldens" / "e" / "other.txt"
    other.write_text("o")
    (root / "stray.txt").write_text("s")
    with pytest.raises(index.IndexProblem, match=r"stray\.txt: unknown file"):
        index.record(root, [other])
    assert "goldens/e/other.txt" not in index.read(root)
