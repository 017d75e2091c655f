"""The example's params.yaml -> the run record's config, Qwen3Config and TrainingArguments.

params.yaml follows the main project's schema, because today's gates validate it and derive the
config identity a run must have from it (gates/expect.py: the sha256 of the canonical JSON of
{seed, model (with the tokenizer's vocab_size), train} without the bookkeeping keys). The record's
config is built the same way here, so runs/*/metrics.json carries the identity the gates expect.
Only yaml is read: the example does not import the xtrain trainer's config code.

Every model/train key is either honoured by Trainer (mapped below) or refused in one line: a run
must never claim a config it did not train with.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
BOOKKEEPING = ("log_every", "ckpt_every", "keep_checkpoints")  # never change the numbers


class ParamsError(Exception):
    """A params.yaml value the Trainer example cannot honour."""


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(path: str | Path = HERE / "params.yaml") -> dict[str, Any]:
    """params.yaml with its active profile applied (validation is the gates' job)."""
    raw = yaml.safe_load(Path(path).read_text())
    return _merge(raw, raw["profiles"].get(raw["profile"]) or {})


def record_config(p: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """{seed, model, train}: what the run record's config_hash is computed from."""
    train = {k: v for k, v in p["train"].items() if k not in BOOKKEEPING}
    return {"seed": p["seed"], "model": {"vocab_size": vocab_size, **p["model"]}, "train": train}


def refuse_unsupported(p: dict[str, Any]) -> None:
    m, t = p["model"], p["train"]
    problems = {
        "model.dropout": (m["dropout"] != 0, "Qwen3 has no residual dropout: 0.0"),
        "model.recompute": (m["recompute"], "false (not mapped to gradient_checkpointing here)"),
        "train.device": (t["device"] != "cpu", "cpu (the example's CPU/gloo runs)"),
        "train.precision": (t["precision"] != "fp32", "fp32 on cpu"),
        "train.compile": (t["compile"], "false"),
        "train.fused_adamw": (t["fused_adamw"], "false on cpu"),
    }
    for key, (bad, allowed) in problems.items():
        if bad:
            raise ParamsError(
                f"error: params.yaml: {key}: not honoured by the Trainer example (allowed: {allowed})"
            )


def qwen3_kwargs(p: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    m = p["model"]
    return {
        "vocab_size": vocab_size,
        "hidden_size": m["dim"],
        "num_hidden_layers": m["n_layers"],
        "num_attention_heads": m["n_heads"],
        "num_key_value_heads": m["n_kv_heads"],
        "head_dim": m["dim"] // m["n_heads"],
        "intermediate_size": m["ffn_dim"],
        "max_position_embeddings": m["max_seq_len"],
        "rope_parameters": {"rope_type": "default", "rope_theta": float(m["rope_theta"])},
        "rms_norm_eps": m["norm_eps"],
        "tie_word_embeddings": m["tie_embeddings"],
        "attention_dropout": m["attn_dropout"],
        "initializer_range": m["init_std"],
    }


def training_kwargs(p: dict[str, Any], per_device: int) -> dict[str, Any]:
    """TrainingArguments from train: (schedule: linear warmup, then cosine to min_lr)."""
    t = p["train"]
    return {
        "max_steps": t["steps"],
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": t["grad_accum"],
        "learning_rate": t["lr"],
        "lr_scheduler_type": "cosine_with_min_lr",
        "lr_scheduler_kwargs": {"min_lr": t["min_lr"]},
        "warmup_steps": t["warmup_steps"],
        "weight_decay": t["weight_decay"],
        "adam_beta1": t["beta1"],
        "adam_beta2": t["beta2"],
        "adam_epsilon": t["adam_eps"],
        "max_grad_norm": t["grad_clip"],
        "eval_steps": t["eval_every"],
        "full_determinism": t["deterministic"],
        "seed": p["seed"],
        "data_seed": p["seed"],
    }
