"""The example's own params.yaml -> the run record's config, Qwen3Config and TrainingArguments.

params.yaml is the example's: `qwen3:` (the model), `trainer:` (the optimisation and the data the
Trainer reads), `torchrun:`, `reload:`, and what it asks of the main project (data:, tokenizer: for
the corpus and tokenizer stages; gates: for `python3 -m gates check`). The gates take a run's shape
and identity from its record, so the record's config is what determines the numbers:
{seed, model: qwen3 + the tokenizer's vocab_size, train: trainer}; runrecord computes its identity
(params/identity.py) and the gates check the record's length and evals against its train.steps and
train.eval_every. params.yaml is read by the project's one YAML loader (contracts/yamlfile.py: a
regular file of at most 1 MiB, no aliases or duplicate keys, YAML as DVC reads it, one-line errors);
the example does not import the xtrain trainer's config code.

Every qwen3/trainer key is mapped below; a missing, unknown or mistyped key is refused in one line
naming the file and the key: a run must never claim a config it did not train with.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, NoReturn

from contracts import yamlfile
from contracts.errors import clip
from contracts.validate import ValidationError

HERE = Path(__file__).resolve().parent
INT, NUMBER, BOOL = "an integer", "a number", "true or false"
SECTIONS: dict[str, dict[str, str]] = {
    "qwen3": {
        **dict.fromkeys(("dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "max_seq_len"), INT),
        **dict.fromkeys(("rope_theta", "norm_eps", "attn_dropout", "init_std"), NUMBER),
        "tie_embeddings": BOOL,
    },
    "trainer": {
        **dict.fromkeys(("seq_len", "global_batch", "grad_accum", "steps", "warmup_steps"), INT),
        **dict.fromkeys(("eval_every", "eval_batches", "cpu_threads"), INT),
        **dict.fromkeys(("lr", "min_lr", "weight_decay", "beta1", "beta2", "adam_eps", "grad_clip"), NUMBER),
        "deterministic": BOOL,
    },
    "torchrun": {"world": INT},
    "reload": {**dict.fromkeys(("prompts", "prompt_tokens", "new_tokens"), INT), "logits_atol": NUMBER},
}


class ParamsError(Exception):
    """A params.yaml value the Trainer example cannot honour."""


def _is(kind: str, value: Any) -> bool:
    if kind == BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == INT:
        return isinstance(value, int)
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))  # never .nan


def check(p: Any, source: str) -> dict[str, Any]:
    """The example's own sections: every key present, known and of its type."""

    def bad(key: str, problem: str) -> ParamsError:
        return ParamsError(f"error: {source}: {key}: {problem}")

    if not isinstance(p, dict):  # the file's whole text is one scalar or a list
        raise bad("(top level)", f"{clip(repr(p), 60)} is not a mapping of sections")
    if not _is(INT, p.get("seed")):
        raise bad("seed", f"{p.get('seed')!r} is not an integer")
    for section, keys in SECTIONS.items():
        body = p.get(section)
        if not isinstance(body, dict):
            raise bad(section, "missing (a mapping of " + ", ".join(keys) + ")")
        if unknown := sorted(body.keys() - keys.keys(), key=str):
            known = ", ".join(keys)
            raise bad(
                f"{section}.{unknown[0]}",
                f"unknown key (not honoured by the Trainer example; known: {known})",
            )
        for key, kind in keys.items():
            if key not in body:
                raise bad(f"{section}.{key}", "missing")
            if not _is(kind, body[key]):
                raise bad(f"{section}.{key}", f"{body[key]!r} is not {kind}")
    return p


def load(path: str | Path = HERE / "params.yaml") -> dict[str, Any]:
    """params.yaml, read by the one loader, its example-owned sections checked."""
    try:
        raw = yamlfile.load_file(path, hint="pass --params")
    except ValidationError as e:
        raise ParamsError(f"error: {e}") from None
    return check(raw, Path(path).name)


def exit_2(e: ParamsError) -> NoReturn:
    """A refused params file: its one line, exit 2 (bad input), as the project's commands do."""
    print(e, file=sys.stderr, flush=True)
    raise SystemExit(2)


def record_config(p: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """{seed, model, train}: what the run record's config (and so its config_hash) holds."""
    return {"seed": p["seed"], "model": {"vocab_size": vocab_size, **p["qwen3"]}, "train": dict(p["trainer"])}


def qwen3_kwargs(p: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    m = p["qwen3"]
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
    """TrainingArguments from trainer: (schedule: linear warmup, then cosine to min_lr)."""
    t = p["trainer"]
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
