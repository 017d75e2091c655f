"""Byte-level BPE tokenizer (Hugging Face `tokenizers`) and corpus encoding.

Byte-level means every string round-trips; one special token, `<|endoftext|>` (id 0), separates
documents and is the bos/eos of the exported model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import save
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from contracts.fileio import atomic_write_bytes, atomic_write_text
from contracts.validate import ValidationError
from xtrain.core.corpus import EOT, SEPARATOR

if TYPE_CHECKING:
    import torch

RETOKENIZE = "re-run the tokenizer stage (dvc repro tokenizer)"


def train_tokenizer(train_text: str, vocab_size: int, min_frequency: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Train document by document so the separator is never split into merges.
    tok.train_from_iterator((d for d in train_text.split(SEPARATOR) if d), trainer=trainer)
    return tok


def save_tokenizer(tok: Tokenizer, path: Path) -> None:
    atomic_write_text(path, tok.to_str(pretty=True))


def load_tokenizer(path: str | Path) -> Tokenizer:
    if not Path(path).is_file():
        raise ValidationError(str(path), "", "tokenizer file not found", hint=RETOKENIZE)
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # the tokenizers library raises a bare Exception for a broken file
        problem = " ".join(str(e).split())[:200]
        raise ValidationError(str(path), "", f"not a valid tokenizer file: {problem}", hint=RETOKENIZE) from e


def encode_text(tok: Tokenizer, text: str) -> np.ndarray:
    """Encode a split: documents are encoded separately and joined with the end-of-text id."""
    eot = tok.token_to_id(EOT)
    ids: list[int] = []
    # encode_batch_fast: the same ids without offsets, which cost half the stage's CPU (4.8 of 9.5
    # CPU-s for the default corpus on a 2-core Xeon; ids compared equal on both splits)
    docs = text.split(SEPARATOR)
    for i, enc in enumerate(tok.encode_batch_fast(docs, add_special_tokens=False)):
        if i:
            ids.append(eot)
        ids.extend(enc.ids)
    return np.array(ids, dtype=np.int32)


def save_tokens(path: Path, train: np.ndarray | torch.Tensor, val: np.ndarray | torch.Tensor) -> None:
    """numpy, not torch: the tokenizer stage never imports torch (2.5 CPU-s on a 2-core Xeon, on the
    main job's critical path); the bytes are those safetensors.torch writes for the same int32 ids."""
    splits = {"train": train, "val": val}
    atomic_write_bytes(path, save({k: np.ascontiguousarray(np.asarray(v)) for k, v in splits.items()}))


def load_token_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """The train and val token ids as numpy arrays, for checks that need no torch (a launcher's
    preflight); a missing, truncated or foreign file is one line naming it."""
    from safetensors.numpy import load_file

    return read_token_file(path, load_file)


def load_tokens(path: str | Path) -> dict[str, torch.Tensor]:
    """The train and val token tensors; a missing, truncated or foreign file is one line naming it."""
    from safetensors.torch import load_file  # the trainer's side: torch is imported there anyway

    return read_token_file(path, load_file)


def read_token_file(path: str | Path, load_file: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """`load_file` (safetensors' numpy or torch reader) on the token file, its splits checked."""
    if not Path(path).is_file():
        raise ValidationError(str(path), "", "token file not found", hint=RETOKENIZE)
    try:
        splits = load_file(str(path))
    except SafetensorError as e:
        raise ValidationError(str(path), "", f"not a valid safetensors file: {e}", hint=RETOKENIZE) from e
    except TypeError as e:  # a dtype numpy cannot hold (bfloat16): not token ids either
        raise ValidationError(
            str(path), "", f"not integer token ids: {e}", "train and val token ids", RETOKENIZE
        ) from e
    return require_token_splits(path, splits)


def require_token_splits(path: str | Path, splits: dict[str, Any]) -> dict[str, Any]:
    """Both splits present, 1-D, integer (numpy arrays or torch tensors: "int" names both's dtypes)."""
    for split in ("train", "val"):
        t = splits.get(split)
        if t is None or t.ndim != 1 or "int" not in str(t.dtype):
            raise ValidationError(
                str(path), split, "missing or not a 1-D integer tensor", "train and val token ids", RETOKENIZE
            )
    return splits


def require_fit(splits: dict[str, Any], seq_len: int, source: str) -> None:
    """Refuse (naming train.seq_len) a split too short to cut one sequence of seq_len+1 tokens."""
    for split in ("train", "val"):
        n = len(splits[split])
        if n <= seq_len + 1:
            raise ValidationError(
                source,
                "train.seq_len",
                f"the {split} split has {n} tokens, fewer than train.seq_len+2={seq_len + 2}",
                "each split longer than train.seq_len+1 tokens",
                "use a larger corpus or data.val_fraction, or a smaller train.seq_len",
            )


def require_ids(splits: dict[str, Any], vocab_size: int, source: str, tokenizer: str) -> None:
    """Refuse token ids outside the tokenizer's vocabulary (the model's embedding rows): an id
    >= vocab_size would index past the embedding, and one never sampled would pass silently."""
    for split in ("train", "val"):
        tokens = splits[split]
        if len(tokens) == 0:
            continue
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValidationError(
                source,
                split,
                f"token id {bad} is outside the vocabulary of {tokenizer} ({vocab_size} tokens)",
                f"ids in [0, {vocab_size})",
                "re-run the tokenizer stage (dvc repro tokenizer) so tokens and tokenizer match",
            )
