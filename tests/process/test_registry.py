"""Registry: write-once versions, bless needs a reason, verify catches one byte, broken files are clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TinyData, tiny_spec
from contracts.fileio import md5_file
from registry.__main__ import main as registry_main
from registry.store import Registry, RegistryError, write_once
from xtrain.core.launch import run_single
from xtrain.export.hf_folder import export


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


# ---- hostile input: names, containment, damaged pins, hand-edited exports, stray files ------------


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_golden_env_id_cannot_escape_the_registry(scratch, tmp_path: Path) -> None:
    reg, export_dir = scratch
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    metrics["env"]["env_id"] = "../../../../golden_escape"
    hostile = tmp_path / "hostile_metrics.json"
    hostile.write_text(json.dumps(metrics))
    before = tree(tmp_path)
    proc = cli(
        *("--root", str(reg.root), "bless", "--golden", "--metrics", str(hostile)),
        *("--export", str(export_dir), "--reason", "an attempt to write outside"),
    )
    line = one_line_error(proc)
    assert str(hostile) in line and "env.env_id" in line, line
    assert tree(tmp_path) == before
    assert not list(tmp_path.parent.rglob("golden_escape*")) and not list(REPO.parent.glob("golden_escape*"))


@pytest.mark.parametrize("model", ["../../../x", "Tiny", "a/b", ".hidden", "x" * 101, ""])
def test_pin_refuses_a_model_name_outside_the_pattern(scratch, tmp_path: Path, model: str) -> None:
    reg, _ = scratch
    proc = cli(
        "--root", str(reg.root), "pin", str(tmp_path / "run"), "--model", model, "--reason", "hostile name"
    )
    assert "--model: model:" in one_line_error(proc) and "pattern" in proc.stderr
    assert sorted(p.name for p in (reg.root / "pinned").iterdir()) == ["tiny"]


def test_inside_refuses_a_path_that_resolves_outside(tmp_path: Path) -> None:
    from registry.checks import inside

    assert inside(tmp_path, tmp_path / "models" / "a" / "v1.json")
    with pytest.raises(RegistryError, match="outside the registry"):
        inside(tmp_path / "registry", tmp_path / "registry" / ".." / "escape.json")


def test_pin_refuses_a_checkpoint_whose_weights_are_not_safetensors(scratch, tmp_path: Path) -> None:
    reg, _ = scratch
    from contracts.checkpoint_dir import resolve_checkpoint

    ckpt = resolve_checkpoint(tmp_path / "run")
    (ckpt / "model.safetensors").write_text("plain text, not weights")
    proc = cli(
        "--root", str(reg.root), "pin", str(ckpt), "--model", "tiny2", "--reason", "a damaged checkpoint"
    )
    assert "model.safetensors: not a valid safetensors file" in one_line_error(proc)
    assert not (reg.root / "pinned" / "tiny2").exists()
    assert not [p for p in (reg.root / "pinned").iterdir() if p.name.startswith(".")]


def test_pin_refuses_a_checkpoint_that_differs_from_its_state(scratch, tmp_path: Path) -> None:
    reg, _ = scratch
    from contracts.checkpoint_dir import resolve_checkpoint

    weights = resolve_checkpoint(tmp_path / "run") / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x01
    weights.write_bytes(bytes(data))
    proc = cli(
        "--root", str(reg.root), "pin", str(weights.parent), "--model", "tiny2", "--reason", "flipped byte"
    )
    assert "model.safetensors: model_md5: content md5" in one_line_error(proc)


def test_validate_covers_pins_without_versions_and_every_file(scratch) -> None:
    reg, _ = scratch
    assert not reg.versions("tiny")  # a pin, no blessed version yet
    ok = cli("--root", str(reg.root), "validate")
    assert ok.returncode == 0 and "4 files valid" in ok.stdout, ok.stdout + ok.stderr  # pin.json + 3 files
    pinned = reg.pinned_dir("tiny")
    good = (pinned / "model.safetensors").read_bytes()
    (pinned / "model.safetensors").write_text("plain text")
    assert "model.safetensors: model_md5: missing or differs from pin.json" in one_line_error(
        cli("--root", str(reg.root), "validate")
    )
    (pinned / "model.safetensors").write_bytes(good)
    (reg.root / "models" / "tiny").mkdir(parents=True)
    (reg.root / "models" / "tiny" / "notes.txt").write_text("stray")
    assert "notes.txt: unknown file in the registry" in one_line_error(
        cli("--root", str(reg.root), "validate")
    )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda d: (d / "config.json").write_text((d / "config.json").read_text() + " "),
            "config.json: manifest",
        ),
        (lambda d: (d / "extra.txt").write_text("x"), "extra.txt: not listed in manifest.json"),
        (
            lambda d: (d / "tokenizer_config.json").unlink(),
            "tokenizer_config.json: listed in manifest.json but",
        ),
    ],
    ids=["whitespace", "extra file", "missing file"],
)
def test_bless_refuses_an_export_edited_by_hand(scratch, edit, expected: str) -> None:
    reg, export_dir = scratch
    edit(export_dir)
    for golden in ((), ("--golden", "--metrics", str(export_dir.parent / "run" / "metrics.json"))):
        proc = cli(
            *("--root", str(reg.root), "bless", "--model", "tiny", "--export", str(export_dir), *golden),
            *("--reason", "bless a hand-edited export"),
        )
        assert expected in one_line_error(proc)
    assert not reg.versions("tiny") and not reg.env_ids()
