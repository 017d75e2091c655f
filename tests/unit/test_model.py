"""The model is Qwen3: parity with transformers' Qwen3ForCausalLM, recompute and dropout semantics."""

from __future__ import annotations

import pytest
import torch

from params.config import ModelConfig
from xtrain.core.model import build_model


def small_cfg(**kw) -> ModelConfig:
    base = dict(vocab_size=300, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96, max_seq_len=64)
    base.update(kw)
    return ModelConfig(**base)


def hf_twin(cfg: ModelConfig):
    """transformers' Qwen3ForCausalLM built from a config (no download), holding our weights."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    hc = Qwen3Config(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.dim,
        intermediate_size=cfg.ffn_dim,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim,
        rms_norm_eps=cfg.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        max_position_embeddings=cfg.max_seq_len,
        tie_word_embeddings=cfg.tie_embeddings,
        attention_dropout=0.0,
    )
    return Qwen3ForCausalLM(hc).eval()


@pytest.mark.parametrize("tied", [True, False])
def test_logits_match_transformers_qwen3(tied: bool) -> None:
    cfg = small_cfg(tie_embeddings=tied)
    ours = build_model(cfg, seed=3).eval()
    theirs = hf_twin(cfg)
    result = theirs.load_state_dict(ours.state_dict(), strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    idx = torch.randint(0, cfg.vocab_size, (3, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (ours(idx) - theirs(idx).logits).abs().max().item()
    assert diff < 1e-5, diff


def test_parity_check_can_fail() -> None:
    """Negative control: one perturbed tensor must break the parity above."""
    cfg = small_cfg()
    ours = build_model(cfg, seed=3).eval()
    theirs = hf_twin(cfg)
    theirs.load_state_dict(ours.state_dict())
    with torch.no_grad():
        theirs.model.layers[1].self_attn.k_norm.weight.mul_(1.01)
    idx = torch.randint(0, cfg.vocab_size, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (ours(idx) - theirs(idx).logits).abs().max().item() > 1e-5


def test_init_is_a_function_of_the_seed() -> None:
    a, b, c = (build_model(small_cfg(), seed=s).state_dict() for s in (7, 7, 8))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["model.layers.0.mlp.up_proj.weight"], c["model.layers.0.mlp.up_proj.weight"])


def grads_of(cfg: ModelConfig, dropout_seed: int = 0) -> dict[str, torch.Tensor]:
    model = build_model(cfg, seed=5).train()
    model.set_dropout_seed(dropout_seed)
    idx = torch.randint(0, cfg.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    model.loss(idx[:, :-1], idx[:, 1:]).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_activation_recompute_gives_bit_identical_grads(dropout: float) -> None:
    plain = grads_of(small_cfg(dropout=dropout, attn_dropout=dropout, recompute=False))
    recomputed = grads_of(small_cfg(dropout=dropout, attn_dropout=dropout, recompute=True))
    assert all(torch.equal(plain[k], recomputed[k]) for k in plain)


def test_dropout_zero_is_the_no_dropout_path_and_positive_dropout_changes_the_loss() -> None:
    cfg0 = small_cfg(dropout=0.0)
    model = build_model(cfg0, seed=5)
    idx = torch.randint(0, cfg0.vocab_size, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        eval_loss = model.eval().loss(idx[:, :-1], idx[:, 1:])
        train_loss = model.train().loss(idx[:, :-1], idx[:, 1:])
    assert torch.equal(eval_loss, train_loss)  # p=0: training forward is bitwise the eval forward
    cfgp = small_cfg(dropout=0.2, attn_dropout=0.1)
    model = build_model(cfgp, seed=5)
    with torch.no_grad():
        eval_loss = model.eval().loss(idx[:, :-1], idx[:, 1:])
        model.train()
        model.set_dropout_seed(1)
        a = model.loss(idx[:, :-1], idx[:, 1:])
        model.set_dropout_seed(2)
        b = model.loss(idx[:, :-1], idx[:, 1:])
        model.set_dropout_seed(1)
        a2 = model.loss(idx[:, :-1], idx[:, 1:])
    assert not torch.equal(a, eval_loss) and not torch.equal(a, b)
    assert torch.equal(a, a2)  # masks are a function of the seed


def test_sequence_longer_than_max_is_an_error() -> None:
    model = build_model(small_cfg(max_seq_len=8), seed=0)
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        model(torch.zeros(1, 9, dtype=torch.long))
