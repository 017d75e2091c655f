"""provenance: every run was made on this machine, fresh_train's run trained here, and what was reused.

DVC's run cache, shared through a remote (docs/run-cache.md), restores a stage's outputs wherever its
command, deps and params match. runs/env.json (stage `env`, rerun by every `dvc repro`) holds this
machine's facts and the machine-dependent stages depend on it, so a restored run should come from this
environment; this gate recomputes that from the records themselves: each run's own environment facts
against runs/env.json. dvc.yaml must keep train_single's outputs uncached, so fresh_train always judges
a run trained on this machine, never one restored from the cache. reports/repro.json (written by
`python -m pipeline.repro`, not by DVC) says which stages ran, were restored or were up to date: the
verdict repeats it, so a verdict built from reused runs says so, and a train_single it calls restored
fails the gate. Written outside DVC, it is sealed like a registry file (`content_sha256`) and names the
dvc.lock it left: a hand-written record is an error (issue #51), one of an earlier repro is not used.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import yaml

from contracts import artifact_table
from contracts.fileio import md5_file
from contracts.machine import facts_hash, machine_facts
from contracts.validate import ValidationError
from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, passed
from gates.reading.artifacts import ArtifactError, Artifacts
from registry.sealed import CONTENT_HASH, content_hash

ENV, ENV_STAGE = "runs/env.json", "env"
REPRO = "reports/repro.json"
FRESH = "train_single"  # fresh_train's run: trained on this machine, never restored
RUNS = {"single": "train_single", "thread": "train@thread", "proc": "train@proc"}
THRESHOLD = "every run's machine facts = runs/env.json's; train_single's outs uncached and never restored"


def uncached_problems(root: Path) -> list[str]:
    """train_single outs that DVC's run cache could restore (dvc.yaml's `cache: false` missing)."""
    try:
        stages = (yaml.safe_load((root / "dvc.yaml").read_text()) or {}).get("stages") or {}
    except (OSError, yaml.YAMLError, AttributeError) as e:
        raise ArtifactError(f"dvc.yaml: cannot be read: {e}") from None
    body = stages.get(FRESH) or {}
    cached = []
    for out in (o for key in ("outs", "metrics", "plots") for o in body.get(key) or []):
        path, opts = (out, None) if isinstance(out, str) else next(iter(out.items()))
        if (opts or {}).get("cache", True):
            cached.append(path)
    return [f"dvc.yaml: {FRESH} out {p} is cached: a run cache could restore it" for p in cached]


def this_machine(a: Artifacts) -> str:
    """runs/env.json's machine hash, recomputed from its facts (a record that disagrees is an error)."""
    env = a.json(ENV, "env.schema.json", ENV_STAGE)
    here = facts_hash(env["machine"])
    if here != env["machine_hash"]:
        raise ArtifactError(f"{ENV}: machine_hash {env['machine_hash']}, its facts hash to {here}")
    return here


def run_machines(a: Artifacts) -> list[tuple[str, str, str, str]]:
    """(launcher, stage, env_id, machine hash recomputed from the run's own facts) per training run."""
    out = []
    for launcher, stage in RUNS.items():
        if a.lock.in_pipeline(stage):
            env_of_run = a.json(f"runs/{launcher}/metrics.json", "metrics.schema.json", stage)["env"]
            made = facts_hash(machine_facts(env_of_run["dispatch_facts"]))
            out.append((launcher, stage, env_of_run["env_id"], made))
    return out


def machine_problems(a: Artifacts) -> tuple[str, list[str]]:
    """This machine's hash, and each run made on another machine."""
    here = this_machine(a)
    return here, [
        f"runs/{launcher} was made on machine {made} ({env_id}), this is {here}: a run restored from "
        f"another environment's cache (dvc repro -f {stage})"
        for launcher, stage, env_id, made in run_machines(a)
        if made != here
    ]


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


def reuse_text(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return f"reuse not recorded ({REPRO} absent: run python -m pipeline.repro)"
    if rec["stages"] is None:
        return f"reuse not recorded ({REPRO} is of another dvc.lock: an earlier repro)"
    by: dict[str, list[str]] = {"ran": [], "restored": [], "unchanged": []}
    for stage, how in sorted(rec["stages"].items()):
        by[how].append(stage)
    where = f" from {rec['remote']}" if rec["pulled"] else ""
    parts = [f"ran here: {', '.join(by['ran']) or 'none'}"]
    if by["restored"]:
        parts.append(f"restored from the run cache{where}: {', '.join(by['restored'])}")
    if by["unchanged"]:
        parts.append(f"up to date from an earlier repro: {', '.join(by['unchanged'])}")
    return "; ".join(parts)


def provenance(a: Artifacts) -> Outcome:
    here, problems = machine_problems(a)
    problems += uncached_problems(a.root)
    rec = repro_record(a.root)
    if rec is not None and (rec["stages"] or {}).get(FRESH) == "restored":
        problems.append(f"{REPRO}: {FRESH} was restored from the run cache, not trained on this machine")
    reuse = reuse_text(rec)
    if problems:
        return failed(len(problems), THRESHOLD, "; ".join(problems) + f" ({reuse})")
    return passed(here, THRESHOLD, f"every run made on this machine ({here}); {reuse}")


def provenance_picture(a: Artifacts, t: Thresholds) -> Picture:
    """Each run's machine (its facts' hash) beside this one's, recomputed as the gate does."""
    here = this_machine(a)
    rows = [
        f"<tr class='{'ok' if made == here else 'bad'}'><td>runs/{launcher}</td><td><code>{escape(made)}</code>"
        f"</td><td>{escape(env_id)}</td><td>{'here' if made == here else 'ANOTHER MACHINE'}</td></tr>"
        for launcher, _, env_id, made in run_machines(a)
    ]
    if not rows:
        raise NoPicture("no training stage in this pipeline")
    html = (
        f"<table class='files'><tr><th>run</th><th>machine</th><th>environment</th><th>this machine: "
        f"<code>{escape(here)}</code></th></tr>{''.join(rows)}</table>"
    )
    return Picture(
        html, "Each run's machine facts, hashed, against runs/env.json's. Pass: every row is here."
    )


GATE = Gate(
    id="provenance",
    checks="each run's environment facts against runs/env.json (this machine); train_single's outs "
    "uncached in dvc.yaml; reports/repro.json: which stages ran here, were restored from DVC's run "
    "cache or were up to date",
    threshold=lambda t: THRESHOLD,
    judge=lambda a, t: provenance(a),
    why="a shared run cache reuses stages across clones and machines: a verdict must say what it reused, "
    "never judge another machine's run as this one's, and fresh_train must judge a run trained here",
    investigate="reports/repro.json and runs/env.json; dvc repro -f the stage named",
    takes=(),
    picture=provenance_picture,
)
