"""Export: byte-determinism, HF layout, and the closed loop through transformers (which must be able to fail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TinyData, tiny_spec, tiny_text
from xtrain.export import ExportError, export, hf_tensor_names
from xtrain.launch import run_single
from xtrain.verify import closed_loop, perturbed_copy

ATOL = {"fp32": 1e-4, "bf16": 1e-2}


@pytest.fixture(scope="module", params=["tied", "untied"])
def checkpoint(request, tiny_data: TinyData, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp(f"ckpt-{request.param}")
    run_single(
        tiny_spec(
            tiny_data, run_dir=run_dir, model={"tie_embeddings": request.param == "tied"}, train={"steps": 30}
        )
    )
    return run_dir


def test_export_is_byte_identical_across_processes_and_paths(checkpoint: Path, tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / f"elsewhere-{i}" / "deep" / "export"
        subprocess.run(
            [sys.executable, "-m", "xtrain.export", str(checkpoint), str(out)],
            check=True,
            cwd=tmp_path,
            capture_output=True,
        )
        outs.append(out)
    files = sorted(p.name for p in outs[0].iterdir())
    assert files == [
        "config.json",
        "generation_config.json",
        "manifest.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    for name in files:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


def test_export_has_the_qwen3_layout(checkpoint: Path, tmp_path: Path) -> None:
    from safetensors import safe_open

    manifest = export(checkpoint, tmp_path / "e", "fp32")
    cfg = json.loads((tmp_path / "e" / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3ForCausalLM"] and cfg["model_type"] == "qwen3"
    with safe_open(tmp_path / "e" / "model.safetensors", "pt") as f:
        names = set(f.keys())
        assert f.metadata() == {"format": "pt"}
    from xtrain.checkpoint import read_state
    from xtrain.checkpoint_dir import resolve_checkpoint
    from xtrain.config import ModelConfig

    expected = hf_tensor_names(ModelConfig(**read_state(resolve_checkpoint(checkpoint))["config"]["model"]))
    assert names == set(expected)
    assert ("lm_head.weight" in names) == (not cfg["tie_word_embeddings"])
    assert manifest["source_checkpoint"]["step"] == 30


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_closed_loop_passes_on_the_export_and_its_control_fails(
    checkpoint: Path, tmp_path: Path, dtype: str
) -> None:
    from xtrain.checkpoint_dir import resolve_checkpoint

    export(checkpoint, tmp_path / "e", dtype)
    report = closed_loop(
        tmp_path / "e", resolve_checkpoint(checkpoint), tiny_text(3000, seed=5), 2, 12, 16, ATOL
    )
    c, n = report["check"], report["negative_control"]
    print(
        f"{dtype}: logits max abs diff {c['logits_max_abs_diff']:.3g}, control {n['logits_max_abs_diff']:.3g}"
    )
    assert report["passed"], report["failures"]
    assert c["tokens_compared"] == 32 and c["prompts_with_token_mismatch"] == 0
    assert c["logits_max_abs_diff"] < ATOL[dtype]
    assert not c["missing_keys"] and not c["unexpected_keys"]
    assert not n["passed"] and n["logits_max_abs_diff"] > ATOL[dtype]
    assert report["dtype"] == dtype


def test_closed_loop_fails_on_a_wrong_config(checkpoint: Path, tmp_path: Path) -> None:
    """A subtly wrong export (RoPE base) loads fine in transformers but computes something else."""
    from xtrain.checkpoint_dir import resolve_checkpoint

    export(checkpoint, tmp_path / "e", "fp32")
    cfg_path = tmp_path / "e" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["rope_parameters"]["rope_theta"] = cfg["rope_theta"] = 500.0
    cfg_path.write_text(json.dumps(cfg))
    report = closed_loop(
        tmp_path / "e", resolve_checkpoint(checkpoint), tiny_text(3000, seed=5), 2, 12, 8, ATOL
    )
    assert not report["passed"]
    assert any("logits max abs diff" in f for f in report["failures"])


def test_a_control_that_cannot_fail_fails_the_closed_loop(
    checkpoint: Path, tmp_path: Path, monkeypatch
) -> None:
    import xtrain.verify as verify

    def harmless_copy(src: Path, dest: Path, tensor: str) -> Path:
        import shutil

        shutil.copytree(src, dest)
        return dest

    monkeypatch.setattr(verify, "perturbed_copy", harmless_copy)
    from xtrain.checkpoint_dir import resolve_checkpoint

    export(checkpoint, tmp_path / "e", "fp32")
    report = closed_loop(
        tmp_path / "e", resolve_checkpoint(checkpoint), tiny_text(3000, seed=5), 1, 12, 4, ATOL
    )
    assert not report["passed"]
    assert any("negative control passed" in f for f in report["failures"])


def test_perturbed_copy_changes_exactly_one_tensor(checkpoint: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    export(checkpoint, tmp_path / "e", "fp32")
    perturbed_copy(tmp_path / "e", tmp_path / "p", "model.layers.0.mlp.down_proj.weight")
    a, b = load_file(tmp_path / "e" / "model.safetensors"), load_file(tmp_path / "p" / "model.safetensors")
    changed = [k for k in a if not a[k].equal(b[k])]
    assert changed == ["model.layers.0.mlp.down_proj.weight"]


def test_export_refuses_a_checkpoint_that_is_not_qwen3(checkpoint: Path, tmp_path: Path) -> None:
    import shutil

    from safetensors.torch import load_file, save_file

    from xtrain.checkpoint_dir import resolve_checkpoint

    broken = tmp_path / "ckpt"
    shutil.copytree(resolve_checkpoint(checkpoint), broken)
    tensors = load_file(broken / "model.safetensors")
    tensors["model.layers.0.mlp.gate_proj.weight"] = tensors["model.layers.0.mlp.gate_proj.weight"][:-1]
    save_file(tensors, broken / "model.safetensors")
    with pytest.raises(ExportError, match=r"gate_proj\.weight: shape"):
        export(broken, tmp_path / "e")
    assert not (tmp_path / "e").exists()  # nothing half-written


def test_export_cli_reports_a_missing_checkpoint(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "xtrain.export", str(tmp_path / "nope"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 1 and "no checkpoint here" in proc.stderr
