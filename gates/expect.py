"""What a run must look like, from the resolved params.yaml (torch-free): the gates compare a
run's shape against this before comparing its numbers, so a cut, padded or mislabelled run is
refused with a message instead of being judged on whatever it happens to contain.
"""

from __future__ import annotations

from typing import Any

from params.cadence import eval_steps
from params.config import Params


def config_hash(params: Params, vocab_size: int) -> str:
    """The config hash a run of these params has (the vocabulary comes from the trained tokenizer)."""
    return params.run_config(vocab_size).config_hash()


def run_problems(params: Params, run: str, m: dict[str, Any]) -> list[str]:
    """Every way runs/<run>/metrics.json disagrees with what params say it must be."""
    t = params["train"]
    where = f"runs/{run}/metrics.json"
    steps = t["steps"]
    out = []
    vocab = m["config"]["model"].get("vocab_size")
    if not isinstance(vocab, int) or vocab < 1:
        out.append(f"{where}: config.model.vocab_size {vocab!r} is not a vocabulary size")
    elif m["config_hash"] != (want_hash := config_hash(params, vocab)):
        out.append(f"{where}: config_hash {m['config_hash']}, params.yaml gives {want_hash}")
    if m["steps"] != steps:
        out.append(f"{where}: steps {m['steps']}, params.yaml train.steps is {steps}")
    for series in ("train_loss", "grad_norm", "lr"):
        if len(m[series]) != steps:
            out.append(f"{where}: {series} has {len(m[series])} values for {steps} steps")
    got_evals = [e["step"] for e in m["eval"]]
    if got_evals != eval_steps(t):
        out.append(f"{where}: eval steps {got_evals}, params.yaml implies {eval_steps(t)}")
    if m["world"] != params.world(run):
        out.append(f"{where}: world {m['world']}, params.yaml says {params.world(run)}")
    ranks = [r["rank"] for r in m["cross_rank"]["per_rank"]]
    if ranks != list(range(m["world"])):
        out.append(f"{where}: cross_rank lists ranks {ranks} for world {m['world']}")
    return out
