"""Reading the statistical tier's runs: the single-device replicas and the DDP run, as plain records.

The replicas are the dvc.yaml stages `train_replica@0`, `train_replica@1`, ... (a `foreach` over the
replica indices), each writing runs/single-r<k>/metrics.json; the DDP run is runs/<launcher> as for the
exact tier. Reads only; the verdict is gates/judges/replicas.py's (docs/statistical-tier.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gates.reading.artifacts import Artifacts

REPLICA_STAGE = "train_replica@{k}"
REPLICA_DIR = "runs/single-r{k}"
DDP_STAGE = {"thread": "train@thread", "proc": "train@proc"}
MAX_REPLICAS = 1000  # a bound on the scan, far above any K a campaign measured


@dataclass(frozen=True)
class ReplicaRuns:
    replicas: list[tuple[str, dict[str, Any]]]  # ("runs/single-r0", its metrics.json), in index order
    run: tuple[str, dict[str, Any]]  # ("runs/proc", its metrics.json)


def replica_stages(in_pipeline: Any) -> list[str]:
    """The replica stages this pipeline has: train_replica@0, @1, ... up to the first index it lacks."""
    found = []
    for k in range(MAX_REPLICAS):
        stage = REPLICA_STAGE.format(k=k)
        if not in_pipeline(stage):
            break
        found.append(stage)
    return found


def read_replica_runs(a: Artifacts, launcher: str) -> ReplicaRuns:
    """Every replica's metrics.json and the DDP run's, validated and checked against dvc.lock."""
    replicas = []
    for k, stage in enumerate(replica_stages(a.lock.in_pipeline)):
        name = REPLICA_DIR.format(k=k)
        replicas.append((name, a.json(f"{name}/metrics.json", "metrics.schema.json", stage)))
    name = f"runs/{launcher}"
    return ReplicaRuns(
        replicas, (name, a.json(f"{name}/metrics.json", "metrics.schema.json", DDP_STAGE[launcher]))
    )
