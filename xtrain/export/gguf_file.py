"""model.gguf: the export's tensors and tokenizer for llama.cpp, written with gguf-py's GGUFWriter (torch-free).

llama.cpp's convert_hf_to_gguf.py refuses our tokenizer: it hashes the pre-tokenizer's output and
knows only published tokenizers. Ours is GPT-2-style byte-level BPE trained here, so we write the
GGUF ourselves with `tokenizer.ggml.pre = "gpt-2"` (verified token for token against llama.cpp).

Qwen3 needs no weight permutation (NEOX RoPE, unlike LLaMA), so every tensor is the safetensors
tensor under its GGUF name: fp32 exports are F32 throughout; bf16 exports keep matrices BF16 and
write 1-D norm weights as F32, as convert_hf_to_gguf.py does (bf16 -> f32 is exact).
Bytes are deterministic: tensors in sorted HF-name order, metadata in a fixed order, no times or paths.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from contracts.gguf_format import ARCH, PRE_TOKENIZER, gguf_name, vocab
from xtrain.export.model_card import LICENSE

FILE_TYPES = {"fp32": gguf.LlamaFileType.ALL_F32, "bf16": gguf.LlamaFileType.MOSTLY_BF16}


def add_metadata(w: gguf.GGUFWriter, name: str, config: dict[str, Any], dtype: str) -> None:
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    w.add_license(LICENSE)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_head_count_kv(config["num_key_value_heads"])
    w.add_key_length(config["head_dim"])
    w.add_value_length(config["head_dim"])
    w.add_rope_freq_base(config["rope_theta"])
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    w.add_vocab_size(config["vocab_size"])
    w.add_file_type(FILE_TYPES[dtype])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


def add_tokenizer(w: gguf.GGUFWriter, tokenizer: dict[str, Any], config: dict[str, Any]) -> None:
    tokens, types, merges = vocab(tokenizer, config["vocab_size"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(PRE_TOKENIZER)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(config["bos_token_id"])
    w.add_eos_token_id(config["eos_token_id"])
    w.add_pad_token_id(config["pad_token_id"])
    w.add_add_bos_token(False)  # GPT-2 style: the prompt is encoded as is


def write_gguf(
    path: Path,
    tensors: dict[str, np.ndarray],
    config: dict[str, Any],
    tokenizer_json: str,
    name: str,
    dtype: str,
) -> None:
    """Write `tensors` (HF names; float32 arrays, or uint16 arrays holding bf16 bits) as a Qwen3 GGUF."""
    w = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[ARCH])
    add_metadata(w, name, config, dtype)
    add_tokenizer(w, json.loads(tokenizer_json), config)
    for hf_name in sorted(tensors):
        arr = tensors[hf_name]
        raw = gguf.GGMLQuantizationType.BF16 if arr.dtype == np.uint16 else gguf.GGMLQuantizationType.F32
        w.add_tensor(gguf_name(hf_name, config["num_hidden_layers"]), arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
