"""registry/index.py and registry/store.py under mutation (docs/judge-mutation.md): what
tests/unit/test_judge_registry_index.py and tests/unit/test_judge_store.py leave open. Every data file is
listed (however many files a folder skips), a file that is not a version file reads no schema, and
validate_all counts every model's versions and pin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_trees import bless, make_registry
from registry import index
from registry.store import Registry

MD5 = {"model.safetensors": "a" * 32}


def test_on_disk_lists_every_data_file_past_the_skipped_ones(tmp_path: Path) -> None:
    names = [f"f{i:02d}.json" for i in range(12)]
    for name in [
        "index.json",
        "a.py",
        "z.py",
        *names,
        "sub/x.py",
        "sub/__pycache__/c.pyc",
        "__pycache__/d.pyc",
    ]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    assert index.on_disk(tmp_path) == [*names, "sub/x.py"]


def test_a_file_in_a_schema_folder_that_is_not_a_version_file_is_unknown(tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "registry")
    for rel in ("models/tiny/notes.txt", "other/x/v1.json"):
        (reg.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (reg.root / rel).write_text("not json")
        assert index._own_error(reg.root, rel) is None  # nothing of its own to say: no schema applies
    problem = (
        "unknown file in the registry (not in registry/index.json): files are added only by bless / pin; "
        f"next: remove it, or {index.RESTORE}"
    )
    with pytest.raises(index.IndexProblem) as e:
        index.check(reg.root)
    assert str(e.value) == f"{reg.root / 'models/tiny/notes.txt'}: {problem}" and e.value.rule == ""


def test_validate_all_counts_every_models_versions_and_pin(tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "registry")  # tiny: pinned
    bless(reg, "other", MD5, "fp32", "b" * 32)  # sorts first, no pin
    bless(reg, "tiny", MD5, "fp32", "b" * 32)
    bless(reg, "tiny", MD5, "bf16", "b" * 32)
    assert Registry(reg.root).validate_all() == 1 + 2 + 1
