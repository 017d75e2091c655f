"""Issue #27 item 8 / "What to build" 6: the registry knows its own contents (registry/index.json).

A deleted, extra, altered or leftover file is an error naming it (never a fallback to what is
left); every write keeps the index whole. The committed registry is the positive control.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from contracts.validate import ValidationError
from registry.sealed import seal
from registry.store import Registry

DATA = ("models", "goldens", "baselines", "pinned")


def copy_registry(tmp_path: Path) -> Path:
    """The committed registry's data (and its index, where there is one) in a scratch folder."""
    root = tmp_path / "registry"
    root.mkdir()
    for kind in DATA:
        shutil.copytree(REPO / "registry" / kind, root / kind)
    if (REPO / "registry" / "index.json").exists():
        shutil.copy2(REPO / "registry" / "index.json", root / "index.json")
    return root


def registry_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}
    return subprocess.run(
        [sys.executable, "-m", "registry", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )


def refused(proc: subprocess.CompletedProcess, *needles: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr[-1500:])
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-1500:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_the_committed_registry_is_indexed_and_valid(tmp_path: Path) -> None:
    """Positive control: every data file of registry/ is in the committed index, and it validates."""
    from registry import index

    listed = index.read(REPO / "registry")
    assert listed is not None and sorted(listed) == index.on_disk(REPO / "registry")
    assert len(listed) >= 18 and "models/xtrain-tiny/v2.json" in listed
    proc = registry_cli(copy_registry(tmp_path), "validate")
    assert proc.returncode == 0 and f"{len(listed)} indexed" in proc.stdout, proc.stdout + proc.stderr


def test_a_deleted_blessed_version_is_named(tmp_path: Path) -> None:
    root = copy_registry(tmp_path)
    (root / "models" / "xtrain-tiny" / "v2.json").unlink()  # before: "17 files valid", exit 0
    refused(registry_cli(root, "validate"), "models/xtrain-tiny/v2.json", "missing")
    refused(registry_cli(root, "list"), "models/xtrain-tiny/v2.json", "missing")
    with pytest.raises(ValidationError, match=r"v2\.json"):
        Registry(root).version("xtrain-tiny", "fp32")


def test_a_deleted_local_golden_never_falls_back_to_another_environment(tmp_path: Path) -> None:
    from gates.reading import goldens

    root = copy_registry(tmp_path)
    reg = Registry(root)
    # an environment whose config has a golden on another environment too (the fallback's case)
    pairs = [
        (env, reg.golden(env))
        for env in reg.env_ids()
        if any(
            e.data["config_hash"] == reg.golden(env).data["config_hash"]
            for other in reg.env_ids()
            if other != env
            for e in reg.goldens(other)
        )
    ]
    assert pairs, "the committed registry has no config blessed on two environments"
    env, own = pairs[0]
    device = own.data["env_id"].split("-", 1)[0]
    choice = goldens.choose(reg, env, own.data["config_hash"], device, "fp32")
    assert choice is not None and not choice.cross_env  # control: its own golden
    for entry in reg.goldens(env):
        entry.path.unlink()
    with pytest.raises(ValidationError) as e:
        goldens.choose(Registry(root), env, own.data["config_hash"], device, "fp32")
    assert f"goldens/{env}/v" in str(e.value) and "missing" in str(e.value)


def test_a_leftover_temp_file_is_named_as_such(tmp_path: Path) -> None:
    root = copy_registry(tmp_path)
    (root / "models" / "xtrain-tiny" / ".v5.json.k2j4h1.tmp").write_text("{")
    line = refused(registry_cli(root, "validate"), ".v5.json.k2j4h1.tmp", "leftover temporary file")
    assert "(rule: only )" not in line and "delete it" in line


def test_a_stray_file_in_an_empty_folder_has_a_meaningful_rule(tmp_path: Path) -> None:
    root = copy_registry(tmp_path)
    (root / "goldens" / "new-env").mkdir()
    (root / "goldens" / "new-env" / "notes.txt").write_text("x")
    line = refused(registry_cli(root, "validate"), "notes.txt", "unknown file in the registry")
    assert "(rule: only )" not in line


def resealed(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(seal(data)))


def test_a_resealed_edit_is_caught_by_the_index(tmp_path: Path) -> None:
    """An edit that re-computes the file's own seal passed every check before; the index names it."""
    root = copy_registry(tmp_path)
    golden = sorted((root / "goldens").glob("*/v1.json"))[0]
    resealed(golden, reason="moved to make a failing run pass")
    refused(registry_cli(root, "validate"), str(golden.relative_to(root)), "differs from registry/index.json")


def test_a_forged_extra_version_is_refused(tmp_path: Path) -> None:
    root = copy_registry(tmp_path)
    src = root / "models" / "xtrain-tiny" / "v4.json"
    forged = src.with_name("v5.json")
    shutil.copy(src, forged)
    resealed(forged, version=5)  # before: accepted as the latest version
    refused(registry_cli(root, "validate"), "v5.json", "unknown file in the registry")


def test_a_pinned_checkpoint_swapped_with_its_pin_is_caught(tmp_path: Path) -> None:
    from contracts.fileio import md5_file

    root = copy_registry(tmp_path)
    pinned = root / "pinned" / "xtrain-tiny"
    data = bytearray((pinned / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (pinned / "model.safetensors").write_bytes(bytes(data))
    resealed(pinned / "pin.json", model_md5=md5_file(pinned / "model.safetensors"))
    refused(registry_cli(root, "validate"), "pinned/xtrain-tiny/", "differs from registry/index.json")


def test_a_hand_edited_index_is_refused(tmp_path: Path) -> None:
    root = copy_registry(tmp_path)
    index = json.loads((root / "index.json").read_text())
    del index["files"]["models/xtrain-tiny/v2.json"]
    (root / "index.json").write_text(json.dumps(index))  # not re-sealed
    refused(registry_cli(root, "validate"), "index.json", "content_sha256")


def test_a_missing_index_is_an_error_and_index_writes_one_only_once(tmp_path: Path) -> None:
    root = copy_registry(tmp_path)
    (root / "index.json").unlink()
    refused(registry_cli(root, "validate"), "index.json", "missing", "python -m registry index")
    proc = registry_cli(root, "index")
    assert proc.returncode == 0 and "indexed" in proc.stdout, proc.stderr
    assert registry_cli(root, "validate").returncode == 0
    refused(registry_cli(root, "index"), "index.json", "exists")


def test_an_empty_registry_needs_no_index(tmp_path: Path) -> None:
    assert Registry(tmp_path / "none").models() == []
    assert registry_cli(tmp_path / "none", "validate").returncode == 0


def test_a_write_extends_the_index_and_refuses_an_inconsistent_registry(tmp_path: Path) -> None:
    """What bless / pin do after write_once (registry/__main__.py, baselines.py): the new file joins
    the index, nothing else moves, no temporary is left; a registry missing a file takes no write."""
    from registry import index
    from registry.store import write_once

    root = copy_registry(tmp_path)
    reg = Registry(root)
    before = index.read(root)
    entry = json.loads((root / "baselines").glob("*/v1.json").__next__().read_text())
    path = root / "baselines" / "cpu-test-env" / "v1.json"
    write_once(path, seal({**entry, "env_id": "cpu-test-env", "version": 1}))
    reg.record(path)
    after = index.read(root)
    assert before is not None and after is not None
    assert set(after) - set(before) == {"baselines/cpu-test-env/v1.json"}
    assert {k: after[k] for k in before} == before
    assert not list(root.rglob("*.tmp"))
    assert registry_cli(root, "validate").returncode == 0
    (root / "models" / "xtrain-tiny" / "v1.json").unlink()
    path2 = root / "baselines" / "cpu-test-env" / "v2.json"
    write_once(path2, seal({**entry, "env_id": "cpu-test-env", "version": 2}))
    with pytest.raises(ValidationError, match=r"v1\.json"):
        Registry(root).record(path2)
    assert index.read(root) == after  # the index is unchanged
