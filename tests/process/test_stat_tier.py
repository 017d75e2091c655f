"""The statistical tier end to end on a tiny real run: nanoGPT's model with dropout 0.1 inside SDPA,
3 single-device replicas (rec.reseed(k)) and two DDP runs at world 2 under gloo, one correct, one
with the loss not divided by the accumulation on rank 1 (examples/nanogpt/stat_campaign.py run);
the judge (gates/judges/replicas.py) passes the correct run and fails the mistake naming the
gradients. Negative control: the mistake's own run is the one that fails; the same replicas pass
the correct one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gates.judges.replicas import StatTier, judge_replicas

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]
ROOT = Path(__file__).resolve().parents[2]


def test_replicas_and_ddp_runs_are_judged_in_the_statistical_tier(tmp_path):
    records = tmp_path / "records.json"
    cmd = [
        sys.executable,
        str(ROOT / "examples/nanogpt/stat_campaign.py"),
        "run",
        "--pool",
        "3",
        "--nulls",
        "1",
    ]
    cmd += ["--per-mistake", "1", "--mistakes", "accum_undivided", "--steps", "12", "--port", "29671"]
    done = subprocess.run([*cmd, "--records", str(records)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(records.read_text())
    assert data["meta"]["errors"] == []
    runs = data["records"]
    reps = [(f"runs/single-r{r['job']['replica']}", r) for r in runs if r["job"]["kind"] == "single"]
    ddp = {r["job"]["mistake"]: ("runs/proc", r) for r in runs if r["job"]["kind"] == "ddp"}
    assert len(reps) == 3 and set(ddp) == {"none", "accum_undivided"}
    assert len({r["train_loss"][-1] for _, r in reps}) == 3  # the replicas drew other dropout
    assert all(r["replica"]["tier"] == "statistical" and r["dropout"]["masks"] == "unseeded" for _, r in reps)
    good = judge_replicas(reps, ddp["none"], StatTier())
    assert good.status == "pass", good.message
    assert good.message.startswith("statistical tier (K=3")
    bad = judge_replicas(reps, ddp["accum_undivided"], StatTier())
    assert bad.status == "fail" and "grad_norm level" in bad.message
    assert "Next: the gradients differ from single's replicas: your loss scaling" in bad.message
