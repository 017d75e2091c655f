"""gates/judges/export_md5.py under mutation (docs/judge-mutation.md): the pinned re-export vs the registry.

A torch-free tree (tests/judge_trees.py): exports/pinned with its manifest, a registry with a pinned
checkpoint and a blessed version, dvc.lock's entry for the export. Each test breaks one thing the
gate must see: a pinned file against its pin (tokenizer.json too), an export file against its
manifest or its blessed md5, the source checkpoint, the dtype.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.fileio import md5_file
from gates.judges.export_md5 import GATE
from gates.judges.gate import NoPicture, Picture
from gates.judges.outcome import Outcome
from gates.reading.artifacts import ArtifactError, Artifacts
from gates.reading.exports import export_problems, read_export_md5, read_export_md5_picture
from gates.reading.registry_records import pinned_problems, registry_of
from judge_trees import PINNED_FILES, Tree, bless, make_registry, reindex, write_export
from registry import index

SOURCE = "c" * 32


def export_md5(a: Artifacts) -> Outcome:
    """The gate on a tree: read (gates/reading/exports.py), then judged."""
    return GATE.run(a, {})


def export_md5_picture(a: Artifacts, t: dict) -> Picture:
    return GATE.draw(a, t)


def build(tmp_path: Path, dtype: str = "fp32", blessed_dtype: str = "fp32") -> Tree:
    tree = Tree(tmp_path, params={"export": {"pinned_model": "tiny", "dtype": dtype}})
    manifest = write_export(tmp_path / "exports" / "pinned", dtype, SOURCE)
    reg = make_registry(tmp_path / "registry")
    bless(reg, "tiny", {n: f["md5"] for n, f in manifest["files"].items()}, blessed_dtype, SOURCE)
    tree.record_out("export", "exports/pinned")
    return tree


def rewrite(tree: Tree, rel: str, text: str) -> None:
    """Change one export file and its manifest entry, and re-record the folder in dvc.lock: only the
    blessed md5 can tell."""
    path = tree.root / rel
    path.write_text(text)
    mpath = path.parent / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["files"][path.name] = {"md5": md5_file(path), "bytes": path.stat().st_size}
    mpath.write_text(json.dumps(manifest))
    tree.record_out("export", "exports/pinned")


def test_a_faithful_re_export_passes(tmp_path: Path) -> None:
    out = export_md5(build(tmp_path).artifacts())
    assert (out.status, out.measured, out.threshold) == ("pass", "7/7 files equal", "equal")
    assert out.message == "re-export of the pinned checkpoint reproduces tiny v1 (fp32)"


@pytest.mark.parametrize("name", PINNED_FILES)
def test_a_pinned_file_that_differs_from_its_pin_is_an_error(tmp_path: Path, name: str) -> None:
    """The index re-sealed over an altered pinned file (the one thing it cannot stop): pin.json's md5
    still catches it, tokenizer.json included."""
    tree = build(tmp_path)
    path = tmp_path / "registry" / "pinned" / "tiny" / name
    path.write_text("altered\n")
    reindex(registry_of(tree.artifacts()), path)
    with pytest.raises(ArtifactError) as e:
        export_md5(tree.artifacts())
    assert str(e.value).startswith(f"registry/pinned/tiny/{name}: md5 ")
    assert ", pin.json recorded " in str(e.value) and "re-export with dvc repro export" in str(e.value)


def test_pinned_problems_names_each_altered_or_absent_file(tmp_path: Path) -> None:
    tree = build(tmp_path)
    reg = registry_of(tree.artifacts())
    assert pinned_problems(tree.artifacts(), reg, "tiny") == []
    pinned = tmp_path / "registry" / "pinned" / "tiny"
    (pinned / "tokenizer.json").write_text("another tokenizer\n")
    (pinned / "state.json").unlink()
    index.write(reg.root, {k: v for k, v in index.read(reg.root).items() if not k.endswith("state.json")})
    reindex(reg, pinned / "tokenizer.json")
    pin = reg.pin("tiny")
    assert pinned_problems(tree.artifacts(), reg, "tiny") == [
        f"registry/pinned/tiny/state.json: md5 (absent), pin.json recorded {pin['state_md5']}",
        f"registry/pinned/tiny/tokenizer.json: md5 {md5_file(pinned / 'tokenizer.json')}, "
        f"pin.json recorded {pin['tokenizer_md5']}",
    ]


def test_a_changed_export_file_fails_naming_it(tmp_path: Path) -> None:
    tree = build(tmp_path)
    blessed = md5_file(tmp_path / "exports" / "pinned" / "config.json")
    rewrite(tree, "exports/pinned/config.json", "another config\n")
    out = export_md5(tree.artifacts())
    assert (out.status, out.measured, out.threshold) == ("fail", "6/7 files equal", "equal")
    now = md5_file(tmp_path / "exports" / "pinned" / "config.json")
    assert out.message.startswith(
        f"exports/pinned differs from tiny v1 (fp32): config.json: expected {blessed}, got {now}. "
        "The exporter's output changed. Next: python -m registry verify exports/pinned; "
    )
    assert out.message.endswith("python -m registry bless --reason '...'")


def test_an_export_file_the_version_does_not_list_fails(tmp_path: Path) -> None:
    tree = build(tmp_path)
    rewrite(tree, "exports/pinned/extra.bin", "an extra file\n")
    out = export_md5(tree.artifacts())
    assert (out.status, out.measured) == ("fail", "7/8 files equal")
    assert (
        f"extra.bin: expected (absent), got {md5_file(tmp_path / 'exports/pinned/extra.bin')}" in out.message
    )


def test_another_source_checkpoint_fails(tmp_path: Path) -> None:
    tree = build(tmp_path)
    mpath = tmp_path / "exports" / "pinned" / "manifest.json"
    manifest = json.loads(mpath.read_text())
    manifest["source_checkpoint"]["model_md5"] = "d" * 32
    mpath.write_text(json.dumps(manifest))
    tree.record_out("export", "exports/pinned")
    out = export_md5(tree.artifacts())
    assert (out.status, out.measured) == ("fail", "7/7 files equal")
    assert f"(source checkpoint): expected {SOURCE}, got {'d' * 32}" in out.message


def test_an_export_file_not_in_its_manifest_is_an_error(tmp_path: Path) -> None:
    tree = build(tmp_path)
    (tmp_path / "exports" / "pinned" / "stray.txt").write_text("stray\n")
    tree.record_out("export", "exports/pinned")
    with pytest.raises(
        ArtifactError, match=r"^exports/pinned/stray.txt: md5 [0-9a-f]{32}, its manifest lists"
    ):
        export_md5(tree.artifacts())


def test_export_problems_sees_both_sides() -> None:
    manifest = {"files": {"a": {"md5": "1" * 32}, "gone": {"md5": "2" * 32}}}
    assert export_problems("exports/x", manifest, {"a": "1" * 32, "new": "3" * 32}) == [
        f"exports/x/gone: md5 (absent), its manifest lists {'2' * 32}",
        f"exports/x/new: md5 {'3' * 32}, its manifest lists (absent)",
    ]


def test_an_export_in_another_dtype_than_params_is_an_error(tmp_path: Path) -> None:
    tree = build(tmp_path)
    tree.params["export"]["dtype"] = "bf16"
    with pytest.raises(ArtifactError, match=r"^exports/pinned is fp32, params.yaml export.dtype is bf16 \("):
        export_md5(tree.artifacts())


def test_no_blessed_version_in_this_dtype_fails(tmp_path: Path) -> None:
    out = export_md5(build(tmp_path, blessed_dtype="bf16").artifacts())
    assert (out.status, out.measured, out.threshold) == ("fail", None, "equal")
    assert out.message.startswith("registry/models/tiny: no a fp32 version blessed")


def test_the_picture_is_the_gates_own_comparison(tmp_path: Path) -> None:
    tree = build(tmp_path)
    rewrite(tree, "exports/pinned/config.json", "another config\n")
    pic = export_md5_picture(tree.artifacts(), {})
    assert "blessed md5 (tiny v1)" in pic.html and pic.html.count("DIFFERS") == 1
    assert pic.html.count("<tr class='ok'>") == 7  # six files and the source checkpoint
    assert pic.caption.startswith("Each file of exports/pinned against the md5 blessed in tiny v1.")
    with pytest.raises(NoPicture, match="no a fp32 version"):
        export_md5_picture(build(tmp_path / "other", blessed_dtype="bf16").artifacts(), {})


def test_the_gate_unit_runs_the_comparison(tmp_path: Path) -> None:
    assert GATE.run(build(tmp_path).artifacts(), {}).status == "pass"
    assert GATE.threshold({}) == "every file equal" and GATE.takes == ()


def test_the_gate_records_every_file_it_read_by_its_path_in_the_tree(tmp_path: Path) -> None:
    a = build(tmp_path).artifacts()
    assert export_md5(a).status == "pass"
    reg = tmp_path / "registry"
    assert set(a.read) == {
        *(f"exports/pinned/{p.name}" for p in (tmp_path / "exports" / "pinned").iterdir()),
        *(f"registry/pinned/tiny/{n}" for n in PINNED_FILES),
        "registry/models/tiny/v1.json",
    }
    assert a.read["registry/models/tiny/v1.json"]["md5"] == md5_file(reg / "models" / "tiny" / "v1.json")


def test_every_problem_is_named_in_one_error(tmp_path: Path) -> None:
    tree = build(tmp_path)
    tree.params["export"]["dtype"] = "bf16"
    path = tmp_path / "registry" / "pinned" / "tiny" / "state.json"
    path.write_text("altered\n")
    reindex(registry_of(tree.artifacts()), path)
    with pytest.raises(ArtifactError) as e:
        export_md5(tree.artifacts())
    assert str(e.value) == (
        f"registry/pinned/tiny/state.json: md5 {md5_file(path)}, pin.json recorded "
        f"{registry_of(tree.artifacts()).pin('tiny')['state_md5']}; "
        "exports/pinned is fp32, params.yaml export.dtype is bf16 "
        "(re-export with dvc repro export, or restore the registry)"
    )


def test_a_blessed_file_missing_from_the_export_fails_naming_both_sides(tmp_path: Path) -> None:
    tree = build(tmp_path)
    reg = registry_of(tree.artifacts())
    files = {**reg.version("tiny", "fp32").data["files"], "added.bin": "e" * 32}
    bless(reg, "tiny", files, "fp32", SOURCE)
    rewrite(tree, "exports/pinned/config.json", "another config\n")
    out = export_md5(tree.artifacts())
    assert out.measured == "6/8 files equal"
    assert f"added.bin: expected {'e' * 32}, got (absent); config.json: expected " in out.message


def test_the_picture_reads_what_the_verdict_reads_of_a_sound_export(tmp_path: Path) -> None:
    tree = build(tmp_path)
    r = read_export_md5(tree.artifacts(), {})
    assert (r.model, r.dtype, r.registry_problem, r.pinned.model, r.pinned.version) == (
        "tiny",
        "fp32",
        None,
        "tiny",
        1,
    )
    assert all(c.ok for c in r.pinned.files) and r.pinned.source.ok and len(r.pinned.files) == 7
    assert read_export_md5_picture(tree.artifacts(), {}) == r
    wrong = read_export_md5_picture(build(tmp_path / "bf16", blessed_dtype="bf16").artifacts(), {})
    assert (wrong.pinned, wrong.dtype) == (None, "fp32") and "fp32" in wrong.registry_problem
