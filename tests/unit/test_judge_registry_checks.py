"""registry/checks.py under mutation (docs/judge-mutation.md): what the registry takes in, in-process.

Names that can only name one folder, paths that stay inside, a checkpoint fit to pin, an export equal
to its manifest, a pinned folder equal to its pin, and `validate`'s walk over every file: each
refusal is pinned as the one line it prints (file, key, problem, rule).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.fileio import md5_file
from contracts.validate import ValidationError
from judge_trees import PINNED_FILES, make_registry, write_export, write_weights
from registry import index
from registry.checks import (
    NAME_RULE,
    check_against_manifest,
    check_checkpoint,
    check_name,
    check_pinned,
    check_safetensors,
    inside,
    validate_everything,
)
from registry.sealed import seal
from registry.store import Registry, RegistryError, write_once


def error(call, *args) -> str:
    with pytest.raises(ValidationError) as e:
        call(*args)
    assert isinstance(e.value.key, str)  # "" where the file itself is the problem, never None
    return str(e.value)


@pytest.mark.parametrize("name", ["tiny", "a", "0", "xtrain-tiny", "a.b_c+d-1", "a" * 100])
def test_a_valid_name_is_returned(name: str) -> None:
    assert check_name(name, "params.yaml", "export.pinned_model") == name


@pytest.mark.parametrize(
    "name",
    [None, 3, "", "Tiny", "-x", ".x", "_x", "../x", "a/b", "a b", "a" * 101, "x\ty", "tiny\n", "tiny\nx"],
)
def test_a_name_that_could_leave_its_folder_is_refused(name) -> None:
    assert error(check_name, name, "params.yaml", "export.pinned_model") == (
        f"params.yaml: export.pinned_model: {name!r} is not a valid registry name (rule: {NAME_RULE})"
    )
    assert (
        NAME_RULE == "pattern [a-z0-9][a-z0-9._+-]{0,99}"
    )  # the whole name (fullmatch: no trailing newline)


def test_inside_returns_the_path_or_refuses_one_that_leaves(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    (root / "models").mkdir(parents=True)
    path = root / "models" / ".." / "models" / "x"
    assert inside(root, path) is path
    (root / "link").symlink_to(tmp_path)
    for bad in (root / ".." / "elsewhere", root / "link" / "x"):
        with pytest.raises(RegistryError) as e:
            inside(root, bad)
        assert str(e.value) == (
            f"{bad}: resolves to {bad.resolve()}, outside the registry {root.resolve()}: refused"
        )


def test_check_safetensors_refuses_text_truncation_and_an_empty_file(tmp_path: Path) -> None:
    good = tmp_path / "good.safetensors"
    write_weights(good)
    assert check_safetensors(good) is None
    text = tmp_path / "text.safetensors"
    text.write_text("not weights")
    message = error(check_safetensors, text)
    assert message.startswith(f"{text}: not a valid safetensors file: ") and message.endswith(
        " (rule: safetensors)"
    )
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-5])
    assert error(check_safetensors, cut).startswith(f"{cut}: not a valid safetensors file: ")
    from safetensors.numpy import save_file

    empty = tmp_path / "empty.safetensors"
    save_file({}, str(empty))
    assert (
        error(check_safetensors, empty) == f"{empty}: holds no tensors (rule: a non-empty safetensors file)"
    )
    missing = tmp_path / "missing.safetensors"
    assert error(check_safetensors, missing).startswith(f"{missing}: not a valid safetensors file: ")


def checkpoint(root: Path) -> Path:
    root.mkdir(parents=True)
    write_weights(root / "model.safetensors")
    (root / "tokenizer.json").write_text("{}")
    (root / "state.json").write_text(
        json.dumps({"model_md5": md5_file(root / "model.safetensors"), "step": 3})
    )
    return root


def test_a_complete_checkpoint_gives_its_state(tmp_path: Path) -> None:
    ckpt = checkpoint(tmp_path / "ckpt")
    assert check_checkpoint(ckpt) == {"model_md5": md5_file(ckpt / "model.safetensors"), "step": 3}


@pytest.mark.parametrize("name", PINNED_FILES)
def test_a_checkpoint_missing_a_file_is_refused_naming_it(tmp_path: Path, name: str) -> None:
    ckpt = checkpoint(tmp_path / "ckpt")
    (ckpt / name).unlink()
    assert error(check_checkpoint, ckpt) == f"{ckpt / name}: missing (rule: a complete checkpoint directory)"


@pytest.mark.parametrize("state", [[1], {"model_md5": 3}, {"step": 1}])
def test_a_state_without_its_model_md5_is_refused(tmp_path: Path, state) -> None:
    ckpt = checkpoint(tmp_path / "ckpt")
    (ckpt / "state.json").write_text(json.dumps(state))
    assert error(check_checkpoint, ckpt) == (
        f"{ckpt / 'state.json'}: model_md5: missing (rule: a checkpoint state.json)"
    )


def test_weights_that_differ_from_their_state_are_refused(tmp_path: Path) -> None:
    ckpt = checkpoint(tmp_path / "ckpt")
    recorded = md5_file(ckpt / "model.safetensors")
    write_weights(ckpt / "model.safetensors", 2.0)
    assert error(check_checkpoint, ckpt) == (
        f"{ckpt / 'model.safetensors'}: model_md5: content md5 {md5_file(ckpt / 'model.safetensors')} differs "
        f"from the {recorded} state.json recorded (rule: an undamaged checkpoint)"
    )
    (ckpt / "model.safetensors").write_text("not weights")
    assert "not a valid safetensors file" in error(check_checkpoint, ckpt)


def test_an_export_equal_to_its_manifest_gives_its_md5s(tmp_path: Path) -> None:
    manifest = write_export(tmp_path / "x")
    assert check_against_manifest(tmp_path / "x", manifest) == {
        n: f["md5"] for n, f in manifest["files"].items()
    }


def test_an_export_that_differs_from_its_manifest_is_refused_naming_the_file(tmp_path: Path) -> None:
    export = tmp_path / "x"
    manifest = write_export(export)
    (export / "zz-extra.txt").write_text("x")
    rule = "(rule: exactly the manifest's files)"
    assert (
        error(check_against_manifest, export, manifest)
        == f"{export / 'zz-extra.txt'}: not listed in manifest.json {rule}"
    )
    (export / "zz-extra.txt").unlink()
    (export / "README.md").unlink()
    assert error(check_against_manifest, export, manifest) == (
        f"{export / 'README.md'}: listed in manifest.json but missing {rule}"
    )
    manifest = write_export(export)
    listed = manifest["files"]["config.json"]["md5"]
    (export / "config.json").write_text("edited\n")
    assert error(check_against_manifest, export, manifest) == (
        f"{export / 'config.json'}: manifest.json files.config.json: md5 {md5_file(export / 'config.json')} "
        f"(7 bytes) differs from the manifest's {listed} ({manifest['files']['config.json']['bytes']} bytes) "
        "(rule: files unchanged since export (re-export instead of editing))"
    )
    manifest = write_export(export)
    manifest["files"]["config.json"]["bytes"] += 1
    assert "differs from the manifest's" in error(check_against_manifest, export, manifest)


def test_a_pinned_folder_equal_to_its_pin_counts_four_files(tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "registry")
    assert check_pinned(reg, "tiny") == 4


@pytest.mark.parametrize(
    ("name", "key"), list(zip(PINNED_FILES, ("model_md5", "state_md5", "tokenizer_md5"), strict=True))
)
def test_a_pinned_file_that_differs_or_is_gone_is_named_with_its_key(
    tmp_path: Path, name: str, key: str
) -> None:
    reg = make_registry(tmp_path / "registry")
    path = reg.pinned_dir("tiny") / name
    pin = reg.pin("tiny")
    path.write_text("altered")
    assert (
        error(check_pinned, reg, "tiny")
        == f"{path}: {key}: missing or differs from pin.json (rule: md5 {pin[key]})"
    )
    path.unlink()
    assert (
        error(check_pinned, reg, "tiny")
        == f"{path}: {key}: missing or differs from pin.json (rule: md5 {pin[key]})"
    )


def pinned_as(root: Path, folder: str, model: str, weights_text: str | None = None) -> Registry:
    """A registry whose pin.json in pinned/<folder> says `model` (and optionally holds text as weights)."""
    reg = make_registry(root, folder)
    pin_path = reg.pinned_dir(folder) / "pin.json"
    pin = json.loads(pin_path.read_text())
    if weights_text is not None:
        (reg.pinned_dir(folder) / "model.safetensors").write_text(weights_text)
        pin["model_md5"] = md5_file(reg.pinned_dir(folder) / "model.safetensors")
    pin["model"] = model
    pin_path.unlink()
    write_once(pin_path, seal({k: v for k, v in pin.items() if k != "content_sha256"}))
    (root / "index.json").unlink()
    index.create(root)
    return Registry(root)


def test_a_pin_that_names_another_model_is_refused(tmp_path: Path) -> None:
    reg = pinned_as(tmp_path / "registry", "tiny", "other")
    path = reg.pinned_dir("tiny") / "pin.json"
    assert error(check_pinned, reg, "tiny") == f"{path}: model: 'other' is not the folder name 'tiny'"


def test_pinned_weights_that_are_not_safetensors_are_refused(tmp_path: Path) -> None:
    reg = pinned_as(tmp_path / "registry", "tiny", "tiny", weights_text="text, not weights")
    assert "model.safetensors: not a valid safetensors file" in error(check_pinned, reg, "tiny")


def test_validate_everything_reads_every_file_and_counts_them(tmp_path: Path) -> None:
    from judge_trees import bless

    reg = make_registry(tmp_path / "registry")
    bless(reg, "tiny", {"a": "1" * 32}, "fp32", "c" * 32)
    bless(reg, "tiny", {"a": "2" * 32}, "bf16", "c" * 32)
    assert validate_everything(Registry(reg.root)) == 4 + 2
    (reg.root / "goldens").mkdir()
    assert validate_everything(Registry(reg.root)) == 6


@pytest.mark.parametrize(
    ("where", "rule"),
    [
        ("pinned/tiny/notes.txt", "only model.safetensors, pin.json, state.json, tokenizer.json"),
        ("models/tiny/notes.txt", "only v1.json"),
        ("goldens/env/notes.txt", "no other files"),
    ],
)
def test_a_stray_file_is_named_with_the_rule_of_its_folder(tmp_path: Path, where: str, rule: str) -> None:
    from judge_trees import bless

    reg = make_registry(tmp_path / "registry")
    bless(reg, "tiny", {"a": "1" * 32}, "fp32", "c" * 32)
    path = reg.root / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    index.record(reg.root, [path])
    assert (
        error(validate_everything, Registry(reg.root))
        == f"{path}: unknown file in the registry (rule: {rule})"
    )


def test_a_folder_name_that_is_not_a_registry_name_is_refused(tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "registry")
    path = reg.root / "goldens" / "Bad Name" / "notes.txt"
    path.parent.mkdir(parents=True)
    path.write_text("x")
    index.record(reg.root, [path])
    assert error(validate_everything, Registry(reg.root)) == (
        f"{path.parent}: folder name: 'Bad Name' is not a valid registry name (rule: {NAME_RULE})"
    )


def test_validate_everything_checks_the_index_first(tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "registry")
    (reg.pinned_dir("tiny") / "state.json").unlink()
    with pytest.raises(index.IndexProblem, match=r"state\.json: missing: registry/index\.json lists it"):
        validate_everything(Registry(reg.root))


def test_validate_everything_counts_every_kind(tmp_path: Path) -> None:
    from conftest import REPO
    from judge_trees import bless, make_golden

    reg = make_registry(tmp_path / "registry")
    bless(reg, "tiny", {"a": "1" * 32}, "fp32", "c" * 32)
    bless(reg, "tiny", {"a": "2" * 32}, "bf16", "c" * 32)
    make_golden(reg, "cpu-a")
    env = "cpu-x86-64-amd-epyc-avx512-0e5b3315-torch2.13.0+cpu-t2"
    baseline = reg.root / "baselines" / env / "v1.json"
    write_once(baseline, json.loads((REPO / "registry" / "baselines" / env / "v1.json").read_text()))
    index.record(reg.root, [baseline])
    assert validate_everything(Registry(reg.root)) == 2 + 1 + 1 + 4
    (reg.root / "baselines" / env / "notes.txt").write_text("x")
    index.record(reg.root, [reg.root / "baselines" / env / "notes.txt"])
    assert error(validate_everything, Registry(reg.root)) == (
        f"{reg.root / 'baselines' / env / 'notes.txt'}: unknown file in the registry (rule: only v1.json)"
    )
