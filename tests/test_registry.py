"""Registry: write-once versions, bless needs a reason, verify catches one byte, broken files are clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TinyData, tiny_spec
from registry.__main__ import main as registry_main
from registry.store import Registry, RegistryError, write_once
from xtrain.export import export
from xtrain.fileio import md5_file
from xtrain.launch import run_single


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "registry", *args], capture_output=True, text=True, cwd=cwd)


def test_the_repository_registry_is_valid() -> None:
    proc = cli("validate")
    assert proc.returncode == 0, proc.stderr
    reg = Registry()
    assert reg.versions("xtrain-tiny") and reg.pin("xtrain-tiny")["model_md5"]


def test_re_export_of_the_pinned_checkpoint_reproduces_the_blessed_md5s(tmp_path: Path) -> None:
    """The export-determinism hard gate, on whatever machine runs the tests."""
    reg = Registry()
    for dtype in ("fp32", "bf16"):
        out = tmp_path / dtype
        export(reg.pinned_dir("xtrain-tiny"), out, dtype)
        proc = cli("verify", str(out), "--model", "xtrain-tiny")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "PASS" in proc.stdout


@pytest.fixture()
def scratch(tiny_data: TinyData, tmp_path: Path) -> tuple[Registry, Path]:
    """A scratch registry holding a pinned tiny checkpoint and its fp32 export."""
    run_single(tiny_spec(tiny_data, run_dir=tmp_path / "run"))
    root = tmp_path / "registry"
    assert (
        registry_main(
            [
                "--root",
                str(root),
                "pin",
                str(tmp_path / "run"),
                "--model",
                "tiny",
                "--reason",
                "a pinned checkpoint for the tests",
            ]
        )
        == 0
    )
    export(root / "pinned" / "tiny", tmp_path / "export", "fp32")
    return Registry(root), tmp_path / "export"


def bless(reg: Registry, export_dir: Path, *extra: str) -> int:
    return registry_main(
        ["--root", str(reg.root), "bless", "--model", "tiny", "--export", str(export_dir), *extra]
    )


def test_bless_refuses_without_a_reason(scratch, capsys) -> None:
    reg, export_dir = scratch
    assert bless(reg, export_dir) == 2
    assert bless(reg, export_dir, "--reason", "because") == 2
    assert "needs --reason" in capsys.readouterr().err
    assert not reg.versions("tiny")


def test_bless_adds_versions_and_never_rewrites(scratch, capsys) -> None:
    reg, export_dir = scratch
    assert bless(reg, export_dir, "--reason", "first blessing of the tiny export") == 0
    v1 = reg.versions("tiny")[0]
    v1_bytes = v1.path.read_bytes()
    assert bless(reg, export_dir, "--reason", "the same export again, nothing changed") == 0
    assert "nothing to bless" in capsys.readouterr().out
    assert len(reg.versions("tiny")) == 1
    # A changed export (an exporter change: file and manifest agree) becomes v2, with the diff
    # shown; v1 is untouched.
    cfg = export_dir / "tokenizer_config.json"
    cfg.write_text(cfg.read_text().replace("PreTrainedTokenizerFast", "PreTrainedTokenizerFast "))
    manifest = json.loads((export_dir / "manifest.json").read_text())
    manifest["files"]["tokenizer_config.json"] = {"md5": md5_file(cfg), "bytes": cfg.stat().st_size}
    (export_dir / "manifest.json").write_text(json.dumps(manifest))
    assert bless(reg, export_dir, "--reason", "tokenizer config changed on purpose") == 0
    out = capsys.readouterr().out
    assert "diff from tiny v1" in out and "tokenizer_config.json" in out
    assert [e.version for e in reg.versions("tiny")] == [1, 2]
    assert v1.path.read_bytes() == v1_bytes
    with pytest.raises(RegistryError, match="never rewritten"):
        write_once(v1.path, {"anything": 1})


def test_verify_names_the_file_that_changed_by_one_byte(scratch, capsys) -> None:
    reg, export_dir = scratch
    bless(reg, export_dir, "--reason", "first blessing of the tiny export")
    capsys.readouterr()
    assert registry_main(["--root", str(reg.root), "verify", str(export_dir), "--model", "tiny"]) == 0
    capsys.readouterr()
    weights = export_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x01
    weights.write_bytes(bytes(data))
    report = export_dir.parent / "check.json"
    assert (
        registry_main(
            ["--root", str(reg.root), "verify", str(export_dir), "--model", "tiny", "--report", str(report)]
        )
        == 1
    )
    out = capsys.readouterr().out
    bad = [line for line in out.splitlines() if line.strip().startswith("model.safetensors")]
    assert bad and bad[0].rstrip().endswith("NO"), out
    assert "FAIL" in out
    assert [f["name"] for f in json.loads(report.read_text())["files"] if not f["ok"]] == [
        "model.safetensors"
    ]


def test_golden_bless_records_the_run_for_this_environment(
    scratch, tiny_data: TinyData, tmp_path: Path
) -> None:
    reg, export_dir = scratch
    metrics = tmp_path / "run" / "metrics.json"
    assert (
        registry_main(
            [
                "--root",
                str(reg.root),
                "bless",
                "--golden",
                "--metrics",
                str(metrics),
                "--export",
                str(export_dir),
                "--reason",
                "golden for the tiny run",
            ]
        )
        == 0
    )
    env_id = json.loads(metrics.read_text())["env"]["env_id"]
    golden = reg.golden(env_id)
    assert golden is not None and golden.data["tier"] == "exact"
    assert len(golden.data["metrics"]["train_loss"]["values"]) == 12


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (lambda d: d.update(version="one"), "version"),
        (lambda d: d["files"].update({"model.safetensors": "not-an-md5"}), "files.model.safetensors"),
        (lambda d: d.pop("reason"), "reason: missing required key"),
    ],
)
def test_a_hand_broken_registry_file_is_a_one_line_schema_error(scratch, breakage, expected: str) -> None:
    reg, export_dir = scratch
    bless(reg, export_dir, "--reason", "first blessing of the tiny export")
    path = reg.versions("tiny")[0].path
    data = json.loads(path.read_text())
    breakage(data)
    path.write_text(json.dumps(data))
    proc = cli("--root", str(reg.root), "list")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and expected in lines[0], proc.stderr


def test_a_registry_file_that_is_not_json_is_a_clear_error(scratch) -> None:
    reg, export_dir = scratch
    bless(reg, export_dir, "--reason", "first blessing of the tiny export")
    path = reg.versions("tiny")[0].path
    path.write_text("{ not json")
    proc = cli("--root", str(reg.root), "validate")
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr and "Traceback" not in proc.stderr
