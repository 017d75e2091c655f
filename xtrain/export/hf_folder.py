"""Export a checkpoint as a Hugging Face model folder (Qwen3 layout), byte for byte reproducible.

    export(ckpt, out_dir, dtype="fp32", tokenizer=None, name=None)
    python -m pipeline.export CKPT OUTDIR [--dtype fp32|bf16] [--name NAME]      # its command line

CKPT is a checkpoint directory, or a run directory (its `checkpoints/latest` is used). OUTDIR gets:
    config.json               Qwen3ForCausalLM config (both rope forms, so old and new transformers read it)
    generation_config.json    greedy defaults, bos/eos
    model.safetensors         HF tensor names; lm_head omitted when tied; one metadata key (stable bytes)
    tokenizer.json            the training tokenizer, byte for byte
    tokenizer_config.json     PreTrainedTokenizerFast, so AutoTokenizer loads it offline
    README.md                 the model card: Hub front matter, config hash, training figures (xtrain/export/model_card.py)
    model.gguf                the same tensors and tokenizer for llama.cpp (xtrain/export/gguf_file.py)
    manifest.json             md5 and size of every file above, the source checkpoint's md5, exporter version

Nothing that varies between machines or runs is written: no paths, times, hostnames or library
versions; JSON has sorted keys. Exporting the same checkpoint anywhere gives the same md5s.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save

from contracts import artifact_table, outputs
from contracts.checkpoint_dir import resolve_checkpoint
from contracts.errors import moved
from contracts.fileio import canonical_json, md5_file, read_regular
from contracts.validate import ValidationError
from params.config import ModelConfig
from xtrain.core.checkpoint_files import load_weight_arrays, read_state
from xtrain.core.corpus import EOT
from xtrain.export.gguf_file import write_gguf
from xtrain.export.model_card import model_card

EXPORTER = "xtrain-export/1"
SAFE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_TOKENIZER_BYTES = 64 << 20  # ours are ~0.1-1 MB
MANIFEST_FORMAT = outputs.EXPORT_MANIFEST_FORMAT  # "xtrain-export-manifest/1"
HF_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16"}
DTYPES = tuple(HF_DTYPE_NAMES)


class ExportError(RuntimeError):
    pass


def hf_tensor_names(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The tensors transformers' Qwen3ForCausalLM expects, with shapes (lm_head absent when tied)."""
    hd, kv, H = cfg.head_dim, cfg.n_kv_heads, cfg.dim
    names: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (cfg.vocab_size, H),
        "model.norm.weight": (H,),
    }
    for i in range(cfg.n_layers):
        p = f"model.layers.{i}."
        names.update(
            {
                p + "input_layernorm.weight": (H,),
                p + "post_attention_layernorm.weight": (H,),
                p + "self_attn.q_proj.weight": (cfg.n_heads * hd, H),
                p + "self_attn.k_proj.weight": (kv * hd, H),
                p + "self_attn.v_proj.weight": (kv * hd, H),
                p + "self_attn.o_proj.weight": (H, cfg.n_heads * hd),
                p + "self_attn.q_norm.weight": (hd,),
                p + "self_attn.k_norm.weight": (hd,),
                p + "mlp.gate_proj.weight": (cfg.ffn_dim, H),
                p + "mlp.up_proj.weight": (cfg.ffn_dim, H),
                p + "mlp.down_proj.weight": (H, cfg.ffn_dim),
            }
        )
    if not cfg.tie_embeddings:
        names["lm_head.weight"] = (cfg.vocab_size, H)
    return names


def hf_config(cfg: ModelConfig, dtype: str, eot_id: int) -> dict[str, Any]:
    rope = {"rope_type": "default", "rope_theta": float(cfg.rope_theta)}
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.dim,
        "intermediate_size": cfg.ffn_dim,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        # transformers >= 5 reads rope_parameters; 4.x reads rope_theta/rope_scaling. Write both.
        "rope_parameters": rope,
        "rope_theta": float(cfg.rope_theta),
        "rope_scaling": None,
        "tie_word_embeddings": cfg.tie_embeddings,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": cfg.n_layers,
        "initializer_range": cfg.init_std,
        "use_cache": True,
        "bos_token_id": eot_id,
        "eos_token_id": eot_id,
        "pad_token_id": eot_id,
        "dtype": HF_DTYPE_NAMES[dtype],
        "torch_dtype": HF_DTYPE_NAMES[dtype],
    }


def export_tensors(weights: dict[str, np.ndarray], cfg: ModelConfig, dtype: str) -> dict[str, np.ndarray]:
    expected = hf_tensor_names(cfg)
    tensors = {k: v for k, v in weights.items() if not (cfg.tie_embeddings and k == "lm_head.weight")}
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ExportError(
            f"checkpoint tensors do not match the Qwen3 layout: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise ExportError(f"{name}: shape {tuple(tensors[name].shape)}, Qwen3 layout expects {shape}")
    target = numpy_dtype(dtype)
    return {k: np.ascontiguousarray(tensors[k].astype(target)) for k in sorted(tensors)}


def numpy_dtype(dtype: str) -> np.dtype:
    """The export's dtype in numpy (the export never imports torch): float32, or ml_dtypes' bfloat16, which
    rounds to nearest even as torch does (the same bytes: tests/process/test_export.py) and safetensors writes as
    BF16. Imported for bf16 only: it costs 1.5 CPU-s here, the fp32 export none."""
    if dtype == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(np.float32)


def gguf_arrays(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """float32 arrays; bf16 matrices as their raw bits (uint16), bf16 1-D tensors widened to float32."""
    return {
        n: a.view(np.uint16) if a.dtype.name == "bfloat16" and a.ndim > 1 else a.astype(np.float32)
        for n, a in tensors.items()
    }


def source_name(ckpt: Path, name: str | None) -> str:
    """The card's and GGUF's model name: `name`, else a pinned checkpoint's registry name, else "xtrain"."""
    if name is None:
        pin = ckpt / "pin.json"
        name = json.loads(pin.read_text())["model"] if pin.exists() else "xtrain"
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        # the name is written into the card's markdown and front matter and the GGUF: no newline, no markup
        raise ValidationError("--name", "", f"{str(name)[:80]!r} is not a safe model name", SAFE_NAME.pattern)
    return name


def read_tokenizer(ckpt: Path, tokenizer: str | Path | None) -> tuple[bytes, Any, int]:
    """(the tokenizer file's bytes, the tokenizer, its end-of-text id): the checkpoint's unless given."""
    from tokenizers import Tokenizer

    tok_path = Path(tokenizer) if tokenizer else ckpt / "tokenizer.json"
    if not tok_path.exists():
        raise ExportError(
            f"{tok_path}: tokenizer not found (the checkpoint carries one; or pass --tokenizer)"
        )
    tok_bytes = read_regular(tok_path, MAX_TOKENIZER_BYTES)
    try:
        tok = Tokenizer.from_str(tok_bytes.decode("utf-8"))
    except Exception as e:  # UnicodeDecodeError, or the bare Exception of the tokenizers library
        problem = " ".join(str(e).split())[:200]
        raise ValidationError(
            str(tok_path), "", f"not a valid tokenizer file: {problem}", "a tokenizer.json"
        ) from e
    eot_id = tok.token_to_id(EOT)
    if eot_id is None:
        raise ExportError(f"{tok_path}: has no {EOT} token")
    return tok_bytes, tok, eot_id


def generation_config(eot_id: int) -> dict[str, Any]:
    return {"bos_token_id": eot_id, "eos_token_id": eot_id, "pad_token_id": eot_id, "do_sample": False}


def tokenizer_config(cfg: ModelConfig) -> dict[str, Any]:
    """PreTrainedTokenizerFast, so AutoTokenizer loads the folder offline."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": EOT,
        "eos_token": EOT,
        "pad_token": EOT,
        "unk_token": None,
        "model_max_length": cfg.max_seq_len,
        "clean_up_tokenization_spaces": False,
    }


def build_manifest(
    folder: Path, dtype: str, ckpt: Path, state: dict[str, Any], tensors: dict[str, np.ndarray]
) -> dict[str, Any]:
    """md5 and size of every file in `folder`, the source checkpoint, the exporter version."""
    return {
        "format": MANIFEST_FORMAT,
        "exporter": EXPORTER,
        "dtype": dtype,
        "architecture": "Qwen3ForCausalLM",
        "files": {f.name: {"md5": md5_file(f), "bytes": f.stat().st_size} for f in sorted(folder.iterdir())},
        "source_checkpoint": {
            "model_md5": md5_file(ckpt / "model.safetensors"),
            "step": state["step"],
            "config_hash": state["config_hash"],
            "param_digest": state["param_digest"],
        },
        "n_tensors": len(tensors),
        "n_params": sum(int(a.size) for a in tensors.values()),
    }


def export(
    ckpt: str | Path,
    out_dir: str | Path,
    dtype: str = "fp32",
    tokenizer: str | Path | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Write the HF folder atomically and return its manifest.

    `name` titles the card and the GGUF; by default a pinned checkpoint's registry name (pin.json),
    else "xtrain", so any re-export of a pinned checkpoint reproduces its blessed bytes.
    """
    if dtype not in DTYPES:
        raise ExportError(f"dtype {dtype!r}: expected one of {sorted(DTYPES)}")
    outputs.check(out_dir, outputs.EXPORT)  # before any work: OUTDIR is absent or a previous export
    ckpt = resolve_checkpoint(ckpt)
    state = read_state(ckpt)
    name = source_name(ckpt, name)
    cfg = ModelConfig(**state["config"]["model"])
    tok_bytes, tok, eot_id = read_tokenizer(ckpt, tokenizer)
    tensors = export_tensors(load_weight_arrays(ckpt), cfg, dtype)
    config = hf_config(cfg, dtype, eot_id)
    files: dict[str, bytes] = {
        "README.md": model_card(name, state, dtype, tok.get_vocab_size()).encode(),
        "config.json": canonical_json(config).encode(),
        "generation_config.json": canonical_json(generation_config(eot_id)).encode(),
        # One metadata key only: safetensors writes several keys in random order (issue #584).
        "model.safetensors": save(tensors, metadata={"format": "pt"}),
        "tokenizer.json": tok_bytes,
        "tokenizer_config.json": canonical_json(tokenizer_config(cfg)).encode(),
    }
    with outputs.staged_folder(out_dir, outputs.EXPORT) as tmp:
        for fname, data in files.items():
            (tmp / fname).write_bytes(data)
        write_gguf(tmp / "model.gguf", gguf_arrays(tensors), config, tok_bytes.decode("utf-8"), name, dtype)
        manifest = build_manifest(tmp, dtype, ckpt, state, tensors)
        artifact_table.check("manifest", manifest, Path(out_dir) / "manifest.json")
        (tmp / "manifest.json").write_bytes(canonical_json(manifest).encode())
    return manifest


if __name__ == "__main__":  # the command line is pipeline/export.py
    moved(__spec__.name, "pipeline/export.py")
