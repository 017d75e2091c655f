"""Read model.gguf back and compare it with the export it came from (torch-free: the gates use it).

Every safetensors tensor must be in the GGUF under its Qwen3 GGUF name with the same shape and the
same values bit for bit (compared as float32 bit patterns: F32 tensors are the same bytes; BF16
matrices are the same bytes; norm weights of a bf16 export are their exact F32 upcast), no tensor
extra, and the metadata must equal config.json and tokenizer.json.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from contracts.gguf_format import ARCH, GGUF_FILE, PRE_TOKENIZER, gguf_name, vocab
from contracts.validate import load_json


def _f32_bits(raw: bytes, dtype: str) -> np.ndarray:
    """Values as float32 bit patterns (uint32): F32 as stored, BF16 widened exactly (bits << 16)."""
    if dtype in ("F32", "f32"):
        return np.frombuffer(raw, dtype="<u4")
    if dtype in ("BF16", "bf16"):
        return np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    raise ValueError(f"tensor type {dtype}: only F32 and BF16 are exported")


def read_safetensors(path: Path) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    """name -> (dtype, shape, raw bytes), read straight from the file (numpy has no bfloat16)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    return {
        k: (v["dtype"], tuple(v["shape"]), data[base + v["data_offsets"][0] : base + v["data_offsets"][1]])
        for k, v in header.items()
    }


def _field(reader: gguf.GGUFReader, key: str) -> Any:
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def compare_tensors(reader: gguf.GGUFReader, st: dict[str, Any], n_layers: int) -> list[str]:
    problems = []
    got = {t.name: t for t in reader.tensors}
    want = {gguf_name(k, n_layers): k for k in st}
    for name in sorted(set(got) - set(want)):
        problems.append(f"tensor {name}: in the GGUF, not in model.safetensors")
    for name, hf in sorted(want.items()):
        t = got.get(name)
        if t is None:
            problems.append(f"tensor {name} ({hf}): missing from the GGUF")
            continue
        dtype, shape, raw = st[hf]
        g_shape = tuple(reversed([int(d) for d in t.shape]))
        if g_shape != shape:
            problems.append(f"tensor {name}: shape {g_shape}, safetensors {shape}")
            continue
        a, b = _f32_bits(bytes(t.data.tobytes()), t.tensor_type.name), _f32_bits(raw, dtype)
        if dtype == "F32" and t.tensor_type.name != "F32":
            problems.append(f"tensor {name}: {t.tensor_type.name} in the GGUF, F32 in the export")
        elif a.shape != b.shape or not np.array_equal(a, b):
            n_diff = int(np.count_nonzero(a != b)) if a.shape == b.shape else -1
            problems.append(f"tensor {name}: {n_diff} of {b.size} values differ from {hf}")
    return problems


def expected_metadata(config: dict[str, Any]) -> dict[str, Any]:
    arch = gguf.MODEL_ARCH_NAMES[ARCH]
    f32 = lambda x: float(np.float32(x))  # noqa: E731 (GGUF stores these as float32)
    return {
        "general.architecture": arch,
        f"{arch}.block_count": config["num_hidden_layers"],
        f"{arch}.attention.head_count": config["num_attention_heads"],
        f"{arch}.attention.head_count_kv": config["num_key_value_heads"],
        f"{arch}.embedding_length": config["hidden_size"],
        f"{arch}.feed_forward_length": config["intermediate_size"],
        f"{arch}.context_length": config["max_position_embeddings"],
        f"{arch}.attention.key_length": config["head_dim"],
        f"{arch}.attention.value_length": config["head_dim"],
        f"{arch}.rope.freq_base": f32(config["rope_theta"]),
        f"{arch}.attention.layer_norm_rms_epsilon": f32(config["rms_norm_eps"]),
        f"{arch}.vocab_size": config["vocab_size"],
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": PRE_TOKENIZER,
        "tokenizer.ggml.bos_token_id": config["bos_token_id"],
        "tokenizer.ggml.eos_token_id": config["eos_token_id"],
    }


def check_gguf(export_dir: Path) -> dict[str, Any]:
    """Compare export_dir/model.gguf with the export's safetensors, config.json and tokenizer.json."""
    config = load_json(str(export_dir / "config.json"))
    tokenizer = load_json(str(export_dir / "tokenizer.json"))
    reader = gguf.GGUFReader(export_dir / GGUF_FILE)
    st = read_safetensors(export_dir / "model.safetensors")
    problems = compare_tensors(reader, st, config["num_hidden_layers"])
    for key, want in expected_metadata(config).items():
        got = _field(reader, key)
        if got != want:
            problems.append(f"metadata {key}: {got!r}, config.json says {want!r}")
    tokens, types, merges = vocab(tokenizer, config["vocab_size"])
    for key, want in (("tokens", tokens), ("token_type", types), ("merges", merges)):
        got = _field(reader, f"tokenizer.ggml.{key}")
        if got != want:
            problems.append(f"metadata tokenizer.ggml.{key}: differs from tokenizer.json")
    return {
        "problems": problems,
        "tensors": len(reader.tensors),
        "tensors_compared": len(st),
        "metadata_compared": len(expected_metadata(config)) + 3,
    }
