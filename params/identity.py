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
from collections.abc import Mapping
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
    fa, fb = _flat(a), _flat(b)
    keys = sorted(k for k in fa.keys() | fb.keys() if k not in fa or k not in fb or fa[k] != fb[k])
    shown = ", ".join(f"{k} {fb.get(k, '<absent>')!r} vs {fa.get(k, '<absent>')!r}" for k in keys[:limit])
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return f"differing keys: {shown}{more}" if keys else "the configs are equal: a hash was edited"
