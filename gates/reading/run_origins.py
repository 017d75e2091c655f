"""What the provenance gate judges, read: this machine (runs/env.json), the machine each training run
was made on (its own environment facts, hashed), train_single's stage in dvc.yaml, and
reports/repro.json (sealed like a registry file, and of this dvc.lock or said not to be). Files in,
plain values out; gates/judges/provenance.py opens nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contracts import artifact_table
from contracts.fileio import md5_file
from contracts.machine import facts_hash, machine_facts
from contracts.validate import ValidationError
from gates.reading.artifacts import ArtifactError, Artifacts
from registry.sealed import CONTENT_HASH, content_hash

ENV, ENV_STAGE = "runs/env.json", "env"
REPRO = "reports/repro.json"
FRESH = "train_single"  # fresh_train's run: trained on this machine, never restored
RUNS = {"single": "train_single", "thread": "train@thread", "proc": "train@proc"}


@dataclass(frozen=True)
class RunMachine:
    launcher: str
    stage: str
    env_id: str
    machine: str  # the hash of the run's own machine facts


@dataclass(frozen=True)
class MachineRecords:
    here: str  # runs/env.json's machine hash, recomputed from its facts
    runs: tuple[RunMachine, ...]  # each training stage this pipeline has
    fresh_stage: dict[str, Any] = field(default_factory=dict)  # dvc.yaml's train_single stage ({}: none)
    repro: dict[str, Any] | None = None  # reports/repro.json (stages None: of another dvc.lock); None: absent


def this_machine(a: Artifacts) -> str:
    """runs/env.json's machine hash, recomputed from its facts (a record that disagrees is an error)."""
    env = a.json(ENV, "env.schema.json", ENV_STAGE)
    here = facts_hash(env["machine"])
    if here != env["machine_hash"]:
        raise ArtifactError(f"{ENV}: machine_hash {env['machine_hash']}, its facts hash to {here}")
    return here


def run_machines(a: Artifacts) -> tuple[RunMachine, ...]:
    """Each training run's launcher, stage, env_id and machine hash recomputed from its own facts."""
    out = []
    for launcher, stage in RUNS.items():
        if a.lock.in_pipeline(stage):
            env_of_run = a.json(f"runs/{launcher}/metrics.json", "metrics.schema.json", stage)["env"]
            made = facts_hash(machine_facts(env_of_run["dispatch_facts"]))
            out.append(RunMachine(launcher, stage, env_of_run["env_id"], made))
    return tuple(out)


def fresh_stage(root: Path) -> dict[str, Any]:
    """dvc.yaml's train_single stage as written (its outs' `cache:` options), {} when it has none."""
    try:
        stages = (yaml.safe_load((root / "dvc.yaml").read_text()) or {}).get("stages") or {}
    except (OSError, yaml.YAMLError, AttributeError) as e:
        raise ArtifactError(f"dvc.yaml: cannot be read: {e}") from None
    return stages.get(FRESH) or {}


def repro_record(root: Path) -> dict[str, Any] | None:
    """reports/repro.json when pipeline.repro wrote one (a plain `dvc repro` writes none). It is written
    outside DVC, so it is sealed (`content_sha256`, as registry files): a record edited by hand is an
    error; one of another dvc.lock (an earlier repro) says nothing of this tree: None, said so."""
    path = root / REPRO
    if not path.exists():
        return None
    try:
        rec = artifact_table.read("repro", path)
    except ValidationError as e:
        raise ArtifactError(f"{e}; next: rerun python -m pipeline.repro, or delete {REPRO}") from None
    if rec[CONTENT_HASH] != content_hash(rec):
        raise ArtifactError(
            f"{REPRO}: {CONTENT_HASH} does not match its content: edited by hand (rule: only python -m "
            f"pipeline.repro writes it); next: rerun python -m pipeline.repro, or delete {REPRO}"
        )
    lock = root / "dvc.lock"
    return (
        rec
        if rec["dvc_lock_md5"] == (md5_file(lock) if lock.is_file() else None)
        else {**rec, "stages": None}
    )


def read_machines(a: Artifacts, t: Any = None) -> MachineRecords:
    """Every record provenance judges, in the order the gate always read them."""
    here = this_machine(a)
    return MachineRecords(here, run_machines(a), fresh_stage(a.root), repro_record(a.root))


def read_machines_for_picture(a: Artifacts, t: Any = None) -> MachineRecords:
    """What the picture draws: this machine and each run's (dvc.yaml and the repro record unread)."""
    return MachineRecords(this_machine(a), run_machines(a))
