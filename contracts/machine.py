"""Which machine made a record: the environment facts that belong to the machine, and their hash.

Torch-free and shared: xtrain/core/env.py writes the facts (runs/env.json and each run's metrics.json
`env.dispatch_facts`), gates/judges/provenance.py compares them. A run's threads per rank and precision are
its own (a launcher or a pilot cell sets them), not the machine's.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

PER_RUN_FACTS = ("threads_per_rank", "precision")


def facts_hash(facts: dict[str, Any]) -> str:
    """8 hex digits over the facts (sorted-key JSON): equal facts, equal hash, on every machine."""
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:8]


def machine_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """The dispatch facts without those a run sets for itself."""
    return {k: v for k, v in facts.items() if k not in PER_RUN_FACTS}
