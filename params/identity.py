"""Config identity (torch-free): the one definition of what makes two runs the same configuration.

A run's config is a JSON dict `{seed, model, train, ...}`: everything that determines the numbers
it produces. Its identity is the sha256 of its sorted-key JSON, first 16 hex digits, with the
bookkeeping keys of `train` left out (they change when a run logs or checkpoints, never what it
computes). Our trainer (`RunConfig.config_hash`), `runrecord` (any user's loop) and the gates (a
record's `config_hash` against its own `config`) all call `config_identity`; `config_diff` names
the keys two configs differ in, for the gates' messages.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

# Train settings that never change the numbers a run produces (logging and checkpoint cadence).
BOOKKEEPING = ("log_every", "ckpt_every", "keep_checkpoints")


def identity_view(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a config its identity is computed from: the config without train's bookkeeping."""
    view = dict(config)
    train = view.get("train")
    if isinstance(train, Mapping):
        view["train"] = {k: v for k, v in train.items() if k not in BOOKKEEPING}
    return view


def config_identity(config: Mapping[str, Any]) -> str:
    """The config_hash of a run of this config (the goldens and baselines in registry/ are keyed by it)."""
    text = json.dumps(identity_view(config), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, Mapping):
        return {prefix: d}
    return {
        k: v for key, sub in d.items() for k, v in _flat(sub, f"{prefix}.{key}" if prefix else key).items()
    }


def config_diff(a: Mapping[str, Any], b: Mapping[str, Any], limit: int = 3) -> str:
    """Which config keys differ, so a user sees `train.grad_accum 1 vs 2`, not only two hashes
    (each key shows b's value, then a's)."""
    changes = config_changes(a, b)
    more = f" and {len(changes) - limit} more" if len(changes) > limit else ""
    shown = describe_changes(changes[:limit])
    return f"differing keys: {shown}{more}" if changes else "the configs are equal: a hash was edited"


# Config keys that name where a run writes, how often it logs or checkpoints, or which experiment
# tracker sees it: never what it computes. A difference in them is never blamed for a difference in
# what two runs did (gates/judges/ddp.py check_observed). Matched (fnmatch) against a flattened key
# (`train.out_dir`) or its last part (`out_dir`). Projects add theirs in params.yaml
# gates.loss_match.cosmetic_keys. Not the identity: config_identity leaves out BOOKKEEPING only, so
# the hashes of existing records and goldens stay as they are.
COSMETIC = (
    "out_dir",
    "*_dir",
    "*_path",
    "log_interval",
    "log_every",
    "ckpt_every",
    "keep_checkpoints",
    "always_save_checkpoint",
    "wandb_*",
    "mlflow_*",
    "tensorboard*",
    "run_name",
)


def is_cosmetic(key: str, extra: Sequence[str] = ()) -> bool:
    """Whether the flattened config key `key` is cosmetic by default or by the project's `extra` patterns."""
    leaf = key.rpartition(".")[2]
    return any(fnmatchcase(key, p) or fnmatchcase(leaf, p) for p in (*COSMETIC, *extra))


def config_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """Every flattened key the two configs differ in, sorted: (key, b's value, a's value); a key one
    config lacks shows '<absent>'."""
    fa, fb = _flat(a), _flat(b)
    keys = sorted(k for k in fa.keys() | fb.keys() if k not in fa or k not in fb or fa[k] != fb[k])
    return [(k, fb.get(k, "<absent>"), fa.get(k, "<absent>")) for k in keys]


def describe_changes(changes: Sequence[tuple[str, Any, Any]]) -> str:
    """`out_dir 'out-proc' vs 'out-single', seed 2 vs 1`: the keys as config_changes gives them."""
    return ", ".join(f"{k} {b!r} vs {a!r}" for k, b, a in changes)
