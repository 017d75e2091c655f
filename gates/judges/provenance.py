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
from typing import Any

from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, passed
from gates.reading.run_origins import FRESH, REPRO, MachineRecords, read_machines, read_machines_for_picture

THRESHOLD = "every run's machine facts = runs/env.json's; train_single's outs uncached and never restored"


def uncached_problems(stage: dict[str, Any]) -> list[str]:
    """train_single outs (dvc.yaml's stage `stage`) that DVC's run cache could restore (`cache: false`
    missing)."""
    cached = []
    for out in (o for key in ("outs", "metrics", "plots") for o in stage.get(key) or []):
        path, opts = (out, None) if isinstance(out, str) else next(iter(out.items()))
        if (opts or {}).get("cache", True):
            cached.append(path)
    return [f"dvc.yaml: {FRESH} out {p} is cached: a run cache could restore it" for p in cached]


def machine_problems(r: MachineRecords) -> list[str]:
    """Each run made on another machine than this one."""
    return [
        f"runs/{run.launcher} was made on machine {run.machine} ({run.env_id}), this is {r.here}: a run "
        f"restored from another environment's cache (dvc repro -f {run.stage})"
        for run in r.runs
        if run.machine != r.here
    ]


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


def provenance(r: MachineRecords) -> Outcome:
    here, problems = r.here, machine_problems(r)
    problems += uncached_problems(r.fresh_stage)
    rec = r.repro
    if rec is not None and (rec["stages"] or {}).get(FRESH) == "restored":
        problems.append(f"{REPRO}: {FRESH} was restored from the run cache, not trained on this machine")
    reuse = reuse_text(rec)
    if problems:
        return failed(len(problems), THRESHOLD, "; ".join(problems) + f" ({reuse})")
    return passed(here, THRESHOLD, f"every run made on this machine ({here}); {reuse}")


def provenance_picture(r: MachineRecords, t: Thresholds) -> Picture:
    """Each run's machine (its facts' hash) beside this one's, recomputed as the gate does."""
    here = r.here
    rows = [
        f"<tr class='{'ok' if x.machine == here else 'bad'}'><td>runs/{x.launcher}</td><td><code>"
        f"{escape(x.machine)}</code></td><td>{escape(x.env_id)}</td><td>"
        f"{'here' if x.machine == here else 'ANOTHER MACHINE'}</td></tr>"
        for x in r.runs
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
    judge=lambda r, t: provenance(r),
    why="a shared run cache reuses stages across clones and machines: a verdict must say what it reused, "
    "never judge another machine's run as this one's, and fresh_train must judge a run trained here",
    investigate="reports/repro.json and runs/env.json; dvc repro -f the stage named",
    takes=(),
    picture=provenance_picture,
    read=read_machines,
    read_for_picture=read_machines_for_picture,
)
