"""Export: byte-determinism, HF layout, and the closed loop through transformers and ONNX Runtime (which must be able to fail)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TinyData, tiny_spec, tiny_text
from xtrain.core.launch import run_single
from xtrain.export.closed_loop_run import closed_loop, perturbed_copy
from xtrain.export.hf_folder import ExportError, export, hf_tensor_names

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
            [sys.executable, "-m", "pipeline.export", str(checkpoint), str(out)],
            check=True,
            cwd=tmp_path,
            capture_output=True,
        )
        outs.append(out)
    files = sorted(p.name for p in outs[0].iterdir())
    assert files == [
        "README.md",
        "config.json",
        "generation_config.json",
        "manifest.json",
        "model.gguf",
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
    from contracts.checkpoint_dir import resolve_checkpoint
    from params.config import ModelConfig
    from xtrain.core.checkpoint_files import read_state

    expected = hf_tensor_names(ModelConfig(**read_state(resolve_checkpoint(checkpoint))["config"]["model"]))
    assert names == set(expected)
    assert ("lm_head.weight" in names) == (not cfg["tie_word_embeddings"])
    assert manifest["source_checkpoint"]["step"] == 30


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_closed_loop_passes_on_the_export_and_its_control_fails(
    checkpoint: Path, tmp_path: Path, dtype: str
) -> None:
    from contracts.checkpoint_dir import resolve_checkpoint

    export(checkpoint, tmp_path / "e", dtype)
    report = closed_loop(
        tmp_path / "e", resolve_checkpoint(checkpoint), tiny_text(3000, seed=5), 2, 12, 16, ATOL
    )
    assert report["passed"], report["failures"]
    assert report["dtype"] == dtype
    for name, e in report["engines"].items():
        c, n = e["check"], e["negative_control"]
        print(
            f"{dtype} {name}: logits diff {c['logits_max_abs_diff']:.3g}, control {n['logits_max_abs_diff']:.3g}"
        )
        atol = ATOL["fp32" if name == "onnxruntime" else dtype]  # ONNX Runtime computes in fp32
        assert c["tokens_compared"] == 32 and c["prompts_with_token_mismatch"] == 0
        assert all(s["ours"] == s["engine"] and len(s["ours"]) == 16 for s in c["samples"])
        assert c["logits_max_abs_diff"] < atol
        assert not n["passed"] and n["logits_max_abs_diff"] > atol
    t = report["engines"]["transformers"]["check"]
    assert not t["missing_keys"] and not t["unexpected_keys"]


def test_the_closed_loop_report_is_the_same_on_a_second_run(checkpoint: Path, tmp_path: Path) -> None:
    """The report is a DVC out keyed by the environment (docs/run-cache.md): it holds the engines'
    numbers and no wall time, so two runs here write the same bytes and a clone on this environment
    can restore the committed one from a shared run cache. Seen: 6 of 6 main jobs identical."""
    from contracts.checkpoint_dir import resolve_checkpoint

    export(checkpoint, tmp_path / "e", "fp32")
    first, second = (
        closed_loop(tmp_path / "e", resolve_checkpoint(checkpoint), tiny_text(3000, seed=5), 2, 8, 8, ATOL)
        for _ in range(2)
    )
    assert first["passed"] and all("seconds" not in e for e in first["engines"].values())
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_closed_loop_fails_on_a_wrong_config(checkpoint: Path, tmp_path: Path) -> None:
    """A subtly wrong export (RoPE base) loads fine in transformers but computes something else."""
    from contracts.checkpoint_dir import resolve_checkpoint

    export(checkpoint, tmp_path / "e", "fp32")
    cfg_path = tmp_path / "e" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["rope_parameters"]["rope_theta"] = cfg["rope_theta"] = 500.0
    cfg_path.write_text(json.dumps(cfg))
    report = closed_loop(
        tmp_path / "e", resolve_checkpoint(checkpoint), tiny_text(3000, seed=5), 2, 12, 8, ATOL
    )
    assert not report["passed"]
    for name in ("transformers", "onnxruntime"):  # both read the same wrong config.json
        assert any(f.startswith(f"{name}: logits max abs diff") for f in report["failures"]), name


def test_a_control_that_cannot_fail_fails_the_closed_loop(
    checkpoint: Path, tmp_path: Path, monkeypatch
) -> None:
    import xtrain.export.closed_loop_run as verify

    def harmless_copy(src: Path, dest: Path, tensor: str) -> Path:
        import shutil

        shutil.copytree(src, dest)
        return dest

    monkeypatch.setattr(verify, "perturbed_copy", harmless_copy)
    monkeypatch.setattr(verify, "perturbed", lambda model_bytes, tensor: model_bytes)
    from contracts.checkpoint_dir import resolve_checkpoint

    export(checkpoint, tmp_path / "e", "fp32")
    report = closed_loop(
        tmp_path / "e", resolve_checkpoint(checkpoint), tiny_text(3000, seed=5), 1, 12, 4, ATOL
    )
    assert not report["passed"]
    for name in ("transformers", "onnxruntime"):
        assert f"{name}: negative control passed" in " ".join(report["failures"]), name


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

    from contracts.checkpoint_dir import resolve_checkpoint

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
        [sys.executable, "-m", "pipeline.export", str(tmp_path / "nope"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    # exit 2: CheckpointNotFound's own code, as the stage reports it (the one-checkpoint CLI used to say 1)
    assert proc.returncode == 2 and "no checkpoint here" in proc.stderr


def test_model_card_loads_and_is_byte_stable(checkpoint: Path, tmp_path: Path, monkeypatch) -> None:
    from huggingface_hub import ModelCard

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    manifest = export(checkpoint, tmp_path / "a", "fp32", name="tiny-model")
    export(checkpoint, tmp_path / "elsewhere" / "b", "fp32", name="tiny-model")
    text = (tmp_path / "a" / "README.md").read_text()
    assert text == (tmp_path / "elsewhere" / "b" / "README.md").read_text()
    assert re.search(r"\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d", text) is None  # no dates or times
    card = ModelCard.load(tmp_path / "a" / "README.md")
    data = card.data.to_dict()
    assert data["library_name"] == "transformers" and data["pipeline_tag"] == "text-generation"
    assert data["license"] == "apache-2.0" and data["model_name"] == "tiny-model"
    assert data["xtrain_config_hash"] == manifest["source_checkpoint"]["config_hash"]
    assert "| steps | 30 |" in card.text


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_gguf_reads_back_equal_to_the_safetensors(checkpoint: Path, tmp_path: Path, dtype: str) -> None:
    import gguf

    from contracts.gguf_check import check_gguf

    manifest = export(checkpoint, tmp_path / "e", dtype)
    result = check_gguf(tmp_path / "e")
    assert result["problems"] == []
    assert result["tensors"] == result["tensors_compared"] == manifest["n_tensors"]
    reader = gguf.GGUFReader(tmp_path / "e" / "model.gguf")
    matrix_types = {t.tensor_type.name for t in reader.tensors if len(t.shape) > 1}
    assert matrix_types == {"F32" if dtype == "fp32" else "BF16"}
    assert reader.fields["tokenizer.ggml.pre"].contents() == "gpt-2"


def test_gguf_check_catches_a_flipped_tensor_byte(checkpoint: Path, tmp_path: Path) -> None:
    import gguf

    from contracts.gguf_check import check_gguf

    export(checkpoint, tmp_path / "e", "fp32")
    path = tmp_path / "e" / "model.gguf"
    target = next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.1.ffn_up.weight")
    data = bytearray(path.read_bytes())
    data[target.data_offset + 5] ^= 0x01
    path.write_bytes(bytes(data))
    problems = check_gguf(tmp_path / "e")["problems"]
    assert problems == [
        "tensor blk.1.ffn_up.weight: 1 of 2048 values differ from model.layers.1.mlp.up_proj.weight"
    ]


def test_gguf_check_catches_metadata_that_disagrees_with_config(checkpoint: Path, tmp_path: Path) -> None:
    from contracts.gguf_check import check_gguf

    export(checkpoint, tmp_path / "e", "fp32")
    cfg_path = tmp_path / "e" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["rope_theta"], cfg["num_key_value_heads"] = 500.0, 4
    cfg_path.write_text(json.dumps(cfg))
    problems = check_gguf(tmp_path / "e")["problems"]
    assert any(p.startswith("metadata qwen3.rope.freq_base: 10000.0") for p in problems), problems
    assert any(p.startswith("metadata qwen3.attention.head_count_kv: 2") for p in problems), problems


def test_llama_cpp_greedy_tokens_match_ours(checkpoint: Path, tmp_path: Path) -> None:
    """llama.cpp itself, where llama-cpp-python is installed (docs/deploying.md says how to build it)."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed (docs/deploying.md)")
    from contracts.checkpoint_dir import resolve_checkpoint
    from xtrain.export.closed_loop_run import greedy, load_ours, prompts_from_text

    export(checkpoint, tmp_path / "e", "fp32")
    ours, tok = load_ours(resolve_checkpoint(checkpoint), "fp32")
    llm = llama_cpp.Llama(model_path=str(tmp_path / "e" / "model.gguf"), n_ctx=64, n_threads=1, verbose=False)
    for text in prompts_from_text(tiny_text(3000, seed=5), tok, 2, 12):
        ids = tok.encode(text).ids
        assert llm.tokenize(text.encode(), add_bos=False, special=False) == ids
        theirs = []
        for t in llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
            theirs.append(t)
            if len(theirs) == 16:
                break
        assert theirs == greedy(ours, ids, 16)


def test_one_checkpoint_options_refuse_the_stage_form(tmp_path: Path) -> None:
    """pipeline.export is both the stage and the one-checkpoint command: --dtype without CKPT OUTDIR
    would be a second route to params.yaml's export.dtype, so it is refused."""
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.export", "--dtype", "bf16"], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 2 and "go with CKPT OUTDIR" in proc.stderr


def torch_export_bytes(checkpoint: Path, cast) -> bytes:
    """model.safetensors as the torch exporter wrote it: `cast` each fp32 weight, safetensors.torch.save."""
    import torch
    from safetensors.torch import load_file, save

    from contracts.checkpoint_dir import resolve_checkpoint

    weights = load_file(str(resolve_checkpoint(checkpoint) / "model.safetensors"))
    if json.loads((resolve_checkpoint(checkpoint) / "state.json").read_text())["config"]["model"][
        "tie_embeddings"
    ]:
        weights.pop("lm_head.weight", None)
    return save({k: cast(weights[k], torch).contiguous() for k in sorted(weights)}, metadata={"format": "pt"})


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_numpy_export_writes_the_bytes_torch_wrote(checkpoint: Path, tmp_path: Path, dtype: str) -> None:
    """The export stage reads and casts with numpy (it never imports torch): its model.safetensors is
    byte for byte `tensor.to(dtype)` + safetensors.torch.save, the exporter before it."""
    export(checkpoint, tmp_path / "e", dtype)
    wanted = {"fp32": "float32", "bf16": "bfloat16"}[dtype]
    torch_bytes = torch_export_bytes(checkpoint, lambda t, torch: t.to(getattr(torch, wanted)))
    assert (tmp_path / "e" / "model.safetensors").read_bytes() == torch_bytes


def test_a_truncating_bf16_cast_is_told_apart(checkpoint: Path, tmp_path: Path) -> None:
    """Negative control of the test above: bf16 by truncation (the low 16 bits dropped, no rounding)
    gives other bytes, so the comparison sees a rounding rule that differs from torch's."""

    def truncated(t, torch):
        return (t.view(torch.int32) >> 16).to(torch.int16).view(torch.bfloat16)

    export(checkpoint, tmp_path / "e", "bf16")
    assert (tmp_path / "e" / "model.safetensors").read_bytes() != torch_export_bytes(checkpoint, truncated)


def test_a_checkpoint_of_other_than_float32_weights_is_refused_naming_the_file(
    checkpoint: Path, tmp_path: Path
) -> None:
    import numpy as np
    from safetensors.numpy import load_file, save_file

    from contracts.checkpoint_dir import resolve_checkpoint

    ckpt = tmp_path / "ckpt"
    shutil.copytree(resolve_checkpoint(checkpoint), ckpt)
    weights = load_file(str(ckpt / "model.safetensors"))
    save_file({k: v.astype(np.float64) for k, v in weights.items()}, str(ckpt / "model.safetensors"))
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.export", str(ckpt), str(tmp_path / "out")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{ckpt / 'model.safetensors'}" in proc.stderr and "float32" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
