"""Model probes: identities the model's feature paths must keep, measured on its own modules.

Why: the pipeline's runs train with dropout 0, so the dropout paths never run there, and the pilot
judges launchers against each other, so a bug all launchers share passes it. Issue #24's campaign
found two such bugs: the attention-dropout path tiling kv heads instead of interleaving them, and
dropout without its 1/(1-p) rescale. Each probe records raw numbers; gates/judges/probes.py judges them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn.functional as F

from params.config import ModelConfig
from xtrain.core.model import Attention, Dropout

PROBE_P = 0.1  # the pilot's dropout cell rate
ROWS, SEQ = 8, 64


def attention_paths(cfg: ModelConfig, seed: int) -> dict[str, Any]:
    """The explicit attention the dropout path takes, at p = 0, against torch's SDPA (with GQA) on
    the same q, k, v: the two must agree to float rounding."""
    g = torch.Generator().manual_seed(seed)
    hd, seq = cfg.head_dim, min(SEQ, cfg.max_seq_len)
    q = torch.randn(2, cfg.n_heads, seq, hd, generator=g)
    k, v = (torch.randn(2, cfg.n_kv_heads, seq, hd, generator=g) for _ in range(2))
    attn = Attention(dataclasses.replace(cfg, attn_dropout=0.0), layer=0, dropout=Dropout()).train()
    with torch.no_grad():
        explicit = attn._attention_with_dropout(q, k, v)  # the path under test, masks off (p = 0)
        sdpa = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=cfg.n_kv_heads != cfg.n_heads
        )
    return {
        "n_heads": cfg.n_heads,
        "n_kv_heads": cfg.n_kv_heads,
        "max_abs_diff": float((explicit - sdpa).abs().max()),
        "max_abs_ref": float(sdpa.abs().max()),
    }


def dropout_mean(dim: int, seed: int, p: float = PROBE_P) -> dict[str, Any]:
    """Dropout on ones: the mean must stay 1 (inverted dropout) and a fraction p must be dropped."""
    drop = Dropout()
    drop.seed = seed
    ones = torch.ones(ROWS, SEQ, dim)
    with torch.no_grad():
        out = drop(ones, p, True, layer=0, site=0)
    return {
        "p": p,
        "n": ones.numel(),
        "sum_out": float(out.double().sum()),
        "dropped": int((out == 0).sum()),
    }


def run_probes(cfg: ModelConfig, seed: int) -> dict[str, Any]:
    return {"attention_paths": attention_paths(cfg, seed), "dropout_mean": dropout_mean(cfg.dim, seed)}
