"""Blessing perf baselines: the raw timing windows and peak memory of each training stage.

    python -m registry bless --perf --reason "why these numbers are the new normal"

Reads runs/{single,thread,proc}/metrics.json (those present), keeps the raw fields the perf gates
recompute from, and writes registry/baselines/<env_id>/v<N>.json write-once like a golden, after
showing the diff from the previous version. env_id is the first present stage's (single first).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from contracts import artifact_table
from contracts.perf_record import STAGES, median_spread, stage_perf
from contracts.validate import load_schema, validate
from registry.checks import check_finite
from registry.provenance import provenance
from registry.sealed import seal
from registry.store import Registry, RegistryError, write_once

STAGE_KEYS = ("launcher", "env_id", "world", "device", "config_hash", "tokens_per_step", "perf")


def stage_entry(metrics: dict[str, Any], path: Path) -> dict[str, Any]:
    if "perf" not in metrics:
        raise RegistryError(f"{path}: perf: missing (written before perf recording; rerun the stage)")
    return {**{k: metrics[k] for k in STAGE_KEYS if k in metrics}, "env_id": metrics["env"]["env_id"]}


def read_stages(runs: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stage entries, env of the first stage) from every metrics file present under `runs`."""
    stages, env = {}, None
    for launcher in STAGES:
        path = runs / launcher / "metrics.json"
        if path.exists():
            metrics = check_finite(artifact_table.read("metrics", path), str(path))
            stages[launcher] = stage_entry(metrics, path)
            env = env or metrics["env"]
    if env is None:
        raise RegistryError(f"{runs}: no runs/<launcher>/metrics.json to bless (run dvc repro first)")
    return stages, env


def summary(stage: dict[str, Any]) -> str:
    p = stage_perf(stage)
    med, spread = median_spread(p.rates) if p.rates else (math.nan, math.nan)
    return f"{med:,.0f} tok/s (spread {100 * spread:.0f}%), peak {max(p.peaks) / 2**20:,.0f} MiB"


def show_diff(last: dict[str, Any] | None, stages: dict[str, Any]) -> None:
    if last is None:
        print("first perf baseline for this environment:")
    else:
        print(f"diff from {last['env_id']} v{last['version']}:")
    for launcher, stage in stages.items():
        old = (last or {}).get("stages", {}).get(launcher)
        before = summary(old) if old else "(absent)"
        print(f"  {launcher:<7} {before}  ->  {summary(stage)}")


def bless_baseline(reg: Registry, runs: Path, reason: str, params: str) -> int:
    stages, env = read_stages(runs)
    env_id = env["env_id"]
    last = reg.baseline(env_id)
    if last is not None and last.data["stages"] == stages:
        print(f"perf baseline for {env_id} is identical to v{last.version}: nothing to bless")
        return 0
    show_diff(None if last is None else last.data, stages)
    path = reg.next_path(reg.root / "baselines" / env_id)
    entry = {
        "format": "xtrain-perf-baseline/1",
        "env_id": env_id,
        "version": int(path.stem[1:]),
        "stages": stages,
        "provenance": provenance(env, params),
        "reason": reason,
    }
    entry = seal(entry)  # like every registry file: a hand edit is refused on read
    validate(entry, load_schema("baseline.schema.json"), str(path))
    write_once(path, entry)
    reg.record(path)
    print(f"blessed perf baseline {path}")
    return 0
