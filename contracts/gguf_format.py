"""The GGUF layout the export writes and the gates read back (torch-free): one definition for both sides.

xtrain/export/gguf_file.py writes model.gguf with these names and this vocabulary; contracts/gguf_check.py
reads it back against the safetensors export. Neither side may spell them differently.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import gguf

GGUF_FILE = "model.gguf"
ARCH = gguf.MODEL_ARCH.QWEN3
PRE_TOKENIZER = "gpt-2"  # GPT-2-style byte-level BPE (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT2)


@cache
def _name_map(n_layers: int) -> gguf.TensorNameMap:
    return gguf.get_tensor_name_map(ARCH, n_layers)  # built anew on each call: ~1.5 ms, 46 per export


def gguf_name(hf_name: str, n_layers: int) -> str:
    name = _name_map(n_layers).get_name(hf_name, try_suffixes=(".weight", ".bias"))
    if name is None:
        raise KeyError(f"{hf_name}: no GGUF name for it in gguf's {gguf.MODEL_ARCH_NAMES[ARCH]} tensor map")
    return name


def vocab(tokenizer: dict[str, Any], vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """Tokens by id, their llama.cpp token types, and merges as 'a b' strings, from tokenizer.json."""
    by_id: dict[int, str] = {i: t for t, i in tokenizer["model"]["vocab"].items()}
    special = {a["id"] for a in tokenizer.get("added_tokens", []) if a.get("special")}
    for a in tokenizer.get("added_tokens", []):
        by_id[a["id"]] = a["content"]
    tokens, types = [], []
    for i in range(vocab_size):  # ids the tokenizer never uses (padded vocab) become unused tokens
        tokens.append(by_id.get(i, f"[PAD{i}]"))
        t = gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
        types.append(int(t if i in by_id else gguf.TokenType.UNUSED))
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    return tokens, types, merges
