"""A Qwen3-architecture decoder in one readable file (nanoGPT style).

Module and parameter names are exactly Hugging Face's `Qwen3ForCausalLM` names
(`model.layers.0.self_attn.q_proj.weight`, ...), so the export is a dtype cast and a rename-free
save, and `transformers` is an independent reader of the same numbers.

Qwen3 in brief: token embedding -> N x [pre-norm RMSNorm -> grouped-query attention with a
per-head RMSNorm on q and k (QK-norm) before half-split RoPE -> residual; pre-norm RMSNorm ->
SwiGLU MLP -> residual] -> final RMSNorm -> lm_head (optionally tied to the embedding).

Dropout masks are drawn per sample: row i of a batch gets its mask from a generator re-seeded from
(step seed, the row's index in the step's global batch, layer, site). A sample therefore gets the
same mask whichever rank or micro-batch holds it, so DDP with dropout equals single-device training
up to float summation order. Masks are also independent of thread interleaving (thread-per-rank
shares one CPU generator otherwise), identical when activation recompute replays a block, and a
pure function of the step, so a resumed run draws the same masks as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from params.config import ModelConfig
from xtrain.core.fingerprint import hash32


class RMSNorm(nn.Module):
    """Qwen3RMSNorm: normalise in fp32, scale in the input dtype."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_cos_sin(
    seq_len: int, head_dim: int, theta: float, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables [T, head_dim] for the half-split (rotate_half) RoPE form, in fp32."""
    inv_freq = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim)
    )
    pos = torch.arange(seq_len, device=device, dtype=torch.float32)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return x * cos + rotate_half(x) * sin


class Dropout:
    """Seeded dropout, one mask per sample from (step seed, global row, layer, site).

    Cost: one generator re-seed and one mask kernel per row instead of one per batch (only when
    p > 0; no profile trains with dropout by default).
    """

    def __init__(self) -> None:
        self.generator: torch.Generator | None = None
        self.seed: int = 0
        self.rows: list[int] | None = None  # global batch index of each row; None: 0..B-1
        self.drawn = 0  # sum of hash32(mask seed) over the distinct masks drawn since take_drawn()
        # Activation recompute replays a block and draws its masks again (the same bits): count each
        # mask once, or the fingerprint doubles under recompute (found by the pilot's `all` cell).
        self.seen: set[int] = set()

    def __call__(self, x: torch.Tensor, p: float, training: bool, layer: int, site: int) -> torch.Tensor:
        if p == 0.0 or not training:
            return x
        g = self._generator(x.device)
        rows = self.rows if self.rows is not None else range(x.shape[0])
        if len(rows) != x.shape[0]:
            raise ValueError(f"dropout: {len(rows)} global rows set for a batch of {x.shape[0]}")
        keep = torch.empty(x.shape, device=x.device, dtype=torch.float32)
        for i, row in enumerate(rows):
            mask_seed = (self.seed * 1_000_003 + row * 65_537 + layer * 131 + site) % (2**63 - 1)
            g.manual_seed(mask_seed)
            keep[i].bernoulli_(1.0 - p, generator=g)
            if mask_seed not in self.seen:
                self.seen.add(mask_seed)
                self.drawn += hash32(mask_seed)
        return x * keep.to(x.dtype) / (1.0 - p)

    @contextlib.contextmanager
    def set_aside(self) -> Iterator[None]:
        """Outside a training step (an evaluation): no global rows (a batch's own rows 0..B-1, not the
        last micro-batch's), and no mask counted in the step's fingerprint; the step's state is back
        afterwards. A forward that draws masks here (an eval in train mode: a bug) then changes the
        eval loss instead of crashing on the row count, and the gates see it in the data."""
        saved = (self.seed, self.rows, self.drawn, self.seen)
        self.rows, self.drawn, self.seen = None, 0, set()
        try:
            yield
        finally:
            self.seed, self.rows, self.drawn, self.seen = saved

    def take_drawn(self) -> int:
        """The fingerprint of the masks drawn since the last call (0 without dropout), and reset."""
        drawn, self.drawn = self.drawn, 0
        self.seen.clear()
        return drawn

    def _generator(self, device: torch.device) -> torch.Generator:
        if self.generator is None or self.generator.device != device:
            self.generator = torch.Generator(device=device)
        return self.generator


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, dropout: Dropout) -> None:
        super().__init__()
        self.cfg, self.layer, self.dropout = cfg, layer, dropout
        hd = cfg.head_dim
        self.q_proj = nn.Linear(cfg.dim, cfg.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.dim, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * hd, cfg.dim, bias=False)
        self.q_norm = RMSNorm(hd, cfg.norm_eps)
        self.k_norm = RMSNorm(hd, cfg.norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        cfg, hd = self.cfg, self.cfg.head_dim
        q = self.q_norm(self.q_proj(x).view(B, T, cfg.n_heads, hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, cfg.n_kv_heads, hd)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, cfg.n_kv_heads, hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.training and cfg.attn_dropout > 0:
            y = self._attention_with_dropout(q, k, v)
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=cfg.n_kv_heads != cfg.n_heads
            )
        return self.o_proj(y.transpose(1, 2).reshape(B, T, cfg.n_heads * hd))

    def _attention_with_dropout(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        # Explicit attention so the probability dropout uses the seeded generator (SDPA's own
        # dropout draws from the global RNG, which thread-per-rank ranks would share).
        rep = self.cfg.n_heads // self.cfg.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        T = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        probs = scores.masked_fill(~causal, float("-inf")).softmax(-1, dtype=torch.float32).to(q.dtype)
        probs = self.dropout(probs, self.cfg.attn_dropout, True, self.layer, site=0)
        return probs @ v


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.up_proj = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.down_proj = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int, dropout: Dropout) -> None:
        super().__init__()
        self.cfg, self.layer, self.dropout = cfg, layer, dropout
        self.input_layernorm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.self_attn = Attention(cfg, layer, dropout)
        self.post_attention_layernorm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        p = self.cfg.dropout
        x = x + self.dropout(
            self.self_attn(self.input_layernorm(x), cos, sin), p, self.training, self.layer, 1
        )
        return x + self.dropout(self.mlp(self.post_attention_layernorm(x)), p, self.training, self.layer, 2)


class Qwen3Model(nn.Module):
    def __init__(self, cfg: ModelConfig, dropout: Dropout) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i, dropout) for i in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)


class Transformer(nn.Module):
    """Qwen3ForCausalLM-compatible decoder: `forward(idx) -> logits [B, T, vocab]`."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.dropout = Dropout()
        self.model = Qwen3Model(cfg, self.dropout)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        # RoPE tables as non-persistent buffers: computed once, absent from checkpoints and exports.
        # Recomputing them per call made torch.compile fuse sin/cos into every q/k kernel (8% of an
        # H200 step); caching them lazily inside forward broke CUDA-graph replays.
        self.register_buffer("rope_cos", torch.empty(0), persistent=False)
        self.register_buffer("rope_sin", torch.empty(0), persistent=False)
        self.reset_rope()

    def reset_rope(self) -> None:
        """(Re)compute the RoPE tables on the device the model lives on, with that device's math,
        as transformers does: CPU and CUDA cos/sin may differ in the last bit."""
        device = self.lm_head.weight.device
        self.rope_cos, self.rope_sin = rope_cos_sin(
            self.cfg.max_seq_len, self.cfg.head_dim, self.cfg.rope_theta, device
        )

    def set_dropout_seed(self, seed: int, rows: list[int] | None = None) -> None:
        """Seed for this step's dropout masks, and the global batch index of each row of the next
        forward (None: the rows are the whole batch, 0..B-1). See the module docstring."""
        self.dropout.seed, self.dropout.rows = seed, rows

    def init_weights(self, seed: int) -> None:
        """Deterministic init from `seed` alone (same on every rank, any device)."""
        g = torch.Generator(device="cpu").manual_seed(seed)
        std = self.cfg.init_std
        out_std = std / math.sqrt(2 * self.cfg.n_layers)  # GPT-2 style: residual projections scaled down
        with torch.no_grad():
            for name, p in self.named_parameters():  # deterministic order; tied lm_head appears once
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                else:
                    s = out_std if name.endswith(("o_proj.weight", "down_proj.weight")) else std
                    p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * s)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        if T > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {T} exceeds max_seq_len {self.cfg.max_seq_len}")
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            if self.cfg.recompute and self.training:
                x = checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self(idx)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))


def build_model(cfg: ModelConfig, seed: int, device: torch.device | str = "cpu") -> Transformer:
    model = Transformer(cfg)
    model.init_weights(seed)
    model = model.to(device)
    model.reset_rope()
    return model


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token, PaLM/nanoGPT accounting: 6 x matmul params (lm_head included,
    embedding lookup excluded) + 12 x layers x seq_len x attention width (full, not causal-halved T)."""
    hd = cfg.head_dim
    matmul = (
        cfg.n_layers
        * (cfg.dim * cfg.n_heads * hd * 2 + cfg.dim * cfg.n_kv_heads * hd * 2 + 3 * cfg.dim * cfg.ffn_dim)
        + cfg.dim * cfg.vocab_size
    )
    attn = 12 * cfg.n_layers * seq_len * cfg.n_heads * hd
    return 6.0 * matmul + attn
