"""registry/__main__.py under mutation (docs/judge-mutation.md): verify and bless, in-process, torch-free.

`registry verify` (the registry_check stage and the CLI share the export gate's comparison), the
verify report and table, blessing a version (a reason, the pin, write-once, the diff, nothing to
bless), the series of a golden, list, validate and index, on a hand-built registry and export.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from contracts.fileio import md5_file
from judge_trees import PINNED_FILES, bless, make_registry, write_export
from registry import __main__ as cli
from registry.store import Registry, RegistryError

SOURCE = "c" * 32


@pytest.fixture()
def tree(tmp_path: Path) -> tuple[Registry, Path]:
    reg = make_registry(tmp_path / "registry")
    manifest = write_export(tmp_path / "export", source_md5=reg.pin("tiny")["model_md5"])
    bless(
        reg, "tiny", {n: f["md5"] for n, f in manifest["files"].items()}, "fp32", reg.pin("tiny")["model_md5"]
    )
    return Registry(reg.root), tmp_path / "export"


def test_verify_reports_each_file_and_the_source_checkpoint(tree) -> None:
    reg, export = tree
    report = cli.verify(reg, export, "tiny", None)
    assert report["format"] == "xtrain-registry-check/1" and report["passed"] is True
    assert (report["model"], report["version"], report["dtype"]) == ("tiny", 1, "fp32")
    assert report["files"][0] == {"name": "README.md", "expected": md5_file(export / "README.md"),
                                  "actual": md5_file(export / "README.md"), "ok": True}  # fmt: skip
    assert report["source_checkpoint"] == {
        "expected": reg.pin("tiny")["model_md5"],
        "actual": reg.pin("tiny")["model_md5"],
        "ok": True,
    }
    (export / "extra.bin").write_text("x")
    report = cli.verify(reg, export, "tiny", 1)
    extra = next(f for f in report["files"] if f["name"] == "extra.bin")
    assert report["passed"] is False and extra == {
        "name": "extra.bin", "expected": None, "actual": md5_file(export / "extra.bin"), "ok": False}  # fmt: skip
    with pytest.raises(Exception, match="not a valid registry name"):
        cli.verify(reg, export, "Bad Name", None)


def test_the_verify_table(tree, capsys) -> None:
    reg, export = tree
    (export / "config.json").write_text("changed\n")
    report = cli.verify(reg, export, "tiny", None)
    cli.print_verify(report, export)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{export} vs registry tiny v1 (fp32):"
    assert out[1] == f"  {'file':<24} {'expected md5':<34} {'actual md5':<34} ok"
    row = next(line for line in out if line.startswith("  config.json"))
    assert row.endswith(" NO") and md5_file(export / "config.json") in row
    assert out[-1] == "FAIL: the export differs from the blessed version"
    assert out[-2].startswith("  (source checkpoint)") and out[-2].endswith(" yes")


def args(**kw) -> argparse.Namespace:
    base = {
        "export_dir": None,
        "model": "tiny",
        "version": None,
        "report": None,
        "no_fail": False,
        "params": "params.yaml",
    }
    return argparse.Namespace(**{**base, **kw})


def test_verify_command_exit_codes_and_report(tree, tmp_path: Path, capsys) -> None:
    reg, export = tree
    assert cli.verify_command(reg, args(export_dir=str(export))) == 0
    (export / "config.json").write_text("changed\n")
    assert cli.verify_command(reg, args(export_dir=str(export))) == 1
    out = tmp_path / "check.json"
    assert cli.verify_command(reg, args(export_dir=str(export), no_fail=True, report=str(out))) == 0
    assert json.loads(out.read_text())["passed"] is False
    capsys.readouterr()


def test_a_reason_is_required() -> None:
    for bad in (None, "", "   short   ", "123456789"):
        with pytest.raises(RegistryError) as e:
            cli.need_reason(bad)
        assert str(e.value) == (
            "bless needs --reason with at least 10 characters saying why (never bless only to make an unexplained "
            "failure pass)"
        )
    assert cli.need_reason("  ten chars!  ") == "ten chars!" and cli.MIN_REASON == 10


def test_blessing_a_changed_export_adds_the_next_version_with_its_diff(tree, capsys) -> None:
    reg, export = tree
    assert cli.bless_version(reg, export, "tiny", "same bytes again", "params.yaml") == 0
    assert capsys.readouterr().out == f"{export} is identical to tiny v1 (fp32): nothing to bless\n"
    old = md5_file(export / "config.json")
    (export / "config.json").write_text("new config\n")
    manifest = json.loads((export / "manifest.json").read_text())
    manifest["files"]["config.json"] = {"md5": md5_file(export / "config.json"), "bytes": 11}
    (export / "manifest.json").write_text(json.dumps(manifest))
    assert cli.bless_version(reg, export, "tiny", "config changed on purpose", "params.yaml") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["diff from tiny v1:", f"  config.json: {old} -> {md5_file(export / 'config.json')}"]
    assert out[2] == f"blessed {reg.root / 'models' / 'tiny' / 'v2.json'}"
    v2 = Registry(reg.root).version("tiny", "fp32")
    assert (v2.version, v2.data["reason"], v2.data["source_checkpoint_md5"]) == (
        2,
        "config changed on purpose",
        reg.pin("tiny")["model_md5"],
    )
    assert (
        v2.data["files"]["config.json"] == md5_file(export / "config.json")
        and v2.data["exporter"] == "xtrain-export/1"
    )


def test_a_first_version_in_a_dtype_has_no_diff(tmp_path: Path, capsys) -> None:
    reg = make_registry(tmp_path / "registry")
    export = tmp_path / "export"
    write_export(export, dtype="bf16", source_md5=reg.pin("tiny")["model_md5"])
    assert cli.bless_version(reg, export, "tiny", "first bf16 export", "params.yaml") == 0
    assert capsys.readouterr().out == f"blessed {reg.root / 'models' / 'tiny' / 'v1.json'}\n"


def test_an_export_of_another_checkpoint_or_edited_is_refused(tree, tmp_path: Path) -> None:
    reg, export = tree
    other = tmp_path / "other"
    write_export(other, source_md5="d" * 32)
    with pytest.raises(RegistryError) as e:
        cli.bless_version(reg, other, "tiny", "a reason here", "params.yaml")
    assert str(e.value) == (
        f"{other} was exported from checkpoint md5 {'d' * 32}, not from tiny's pinned checkpoint "
        f"({reg.pin('tiny')['model_md5']})"
    )
    (export / "config.json").write_text("edited by hand\n")
    with pytest.raises(Exception, match="files unchanged since export"):
        cli.bless_version(reg, export, "tiny", "a reason here", "params.yaml")


def test_series_of_a_golden() -> None:
    assert cli.series({0: 1.0, 4: 2.0, 2: 3.0}) == {
        "start_step": 0, "end_step": 4, "step_interval": 2, "values": {"0": 1.0, "2": 3.0, "4": 2.0}}  # fmt: skip
    assert cli.series({3: 1.0}) == {"start_step": 3, "end_step": 3, "step_interval": 1, "values": {"3": 1.0}}
    assert cli.series({0: 1.0, 1: 2.0, 5: 3.0})["step_interval"] == 1


def test_list_validate_and_index(tree, tmp_path: Path, capsys) -> None:
    reg, _ = tree
    assert cli.list_all(reg) == 0
    out = capsys.readouterr().out.splitlines()
    v1 = reg.versions("tiny")[0].data
    assert out == [
        "model tiny",
        f"  v1  fp32  model.safetensors {v1['files']['model.safetensors']}  {v1['provenance']['time_utc']}  {v1['reason']}",
    ]
    assert cli.main(["--root", str(reg.root), "validate"]) == 0
    assert capsys.readouterr().out == f"registry: {4 + 1} files valid, {len(PINNED_FILES) + 2} indexed\n"
    assert cli.main(["--root", str(reg.root), "list"]) == 0
    capsys.readouterr()
    assert cli.main(["--root", str(reg.root), "index"]) == 2  # exists: a one-line error
    assert "exists: the index changes only with bless / pin" in capsys.readouterr().err
    fresh = tmp_path / "fresh"
    (fresh / "models").mkdir(parents=True)
    (fresh / "models" / "a.txt").write_text("a")
    assert cli.main(["--root", str(fresh), "index"]) == 0
    assert capsys.readouterr().out == f"registry: indexed 1 files in {fresh / 'index.json'}\n"


def test_bless_dispatches_and_needs_a_reason_first(tree, capsys) -> None:
    reg, export = tree
    assert cli.main(["--root", str(reg.root), "bless", "--export", str(export), "--model", "tiny"]) == 2
    assert "bless needs --reason" in capsys.readouterr().err
    assert (
        cli.main(
            [
                "--root",
                str(reg.root),
                "bless",
                "--export",
                str(export),
                "--model",
                "tiny",
                "--reason",
                "the same bytes",
            ]
        )
        == 0
    )
    assert "nothing to bless" in capsys.readouterr().out
    assert cli.main(["--root", str(reg.root), "verify", str(export), "--model", "tiny"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("PASS")
