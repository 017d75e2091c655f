"""launcher_parity judged like loss_match (gates/ddp.py launcher_parity), at world 4 on real launchers.

At world 4 on H200s the two launchers' reductions summed in other orders and the old whole-run
bound failed at step 14 (rel 0.068) though both matched single device. The gate now checks what
survives chaos exactly (samples, dropout masks), step 0 tightly, a prefix and the final val loss.
Positive control: thread and torchrun at world 4 on the tiny config pass. Negative controls at
world 4: torchrun with summed gradients, and with every rank reading rank 0's shard, fail; runs at
different worlds are refused.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import PARAMS, REPO, TinyData, tiny_cli, tiny_spec
from gates import ddp
from gates.__main__ import load_thresholds
from gates.outcome import Outcome
from xtrain.launch import run_threads, torchrun_cmd

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

DROPOUT = {"dropout": 0.1, "attn_dropout": 0.1}
WORLD = 4


@pytest.fixture(scope="module")
def loss_match() -> dict:
    return load_thresholds(PARAMS)["loss_match"]


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def torchrun(data: TinyData, run_dir: Path, world: int, fault: str | None = None) -> dict:
    sets = [f"model.{k}={v}" for k, v in DROPOUT.items()]
    cmd = torchrun_cmd(world, "pipeline.train", "proc", *tiny_cli(data, run_dir, *sets))
    env = {k: v for k, v in os.environ.items() if k != "XTRAIN_FAULT"}
    if fault:
        env["XTRAIN_FAULT"] = fault
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return metrics(run_dir)


def parity(thread: dict, proc: dict, loss_match: dict) -> Outcome:
    outcome = ddp.equivalence(thread, proc, "proc", loss_match, ref="thread")
    print(f"parity world {proc['world']}: {outcome.status}: {outcome.message}")
    return outcome


@pytest.fixture(scope="module")
def thread4(tiny_data: TinyData, tmp_path_factory) -> dict:
    run_dir = tmp_path_factory.mktemp("thread4")
    spec = tiny_spec(tiny_data, launcher="thread", run_dir=run_dir, model=DROPOUT, train={"cpu_threads": 2})
    run_threads(spec, WORLD, 60)
    return metrics(run_dir)


def test_thread_and_torchrun_at_world_4_pass(
    tiny_data: TinyData, thread4: dict, loss_match: dict, tmp_path: Path
) -> None:
    outcome = parity(thread4, torchrun(tiny_data, tmp_path, WORLD), loss_match)
    assert outcome.status == "pass", outcome.message
    assert "world 4 vs 4" in outcome.message and "exactly the thread rows" in outcome.message


@pytest.mark.parametrize(("fault", "check"), [("grad_sum@*:0", "first step"), ("same_shard@*:0", "samples")])
def test_a_ddp_bug_in_one_launcher_fails_parity_at_world_4(
    tiny_data: TinyData, thread4: dict, loss_match: dict, tmp_path: Path, fault: str, check: str
) -> None:
    outcome = parity(thread4, torchrun(tiny_data, tmp_path, WORLD, fault), loss_match)
    assert outcome.status == "fail" and f"{check}: " in outcome.message, outcome.message


def test_runs_at_different_worlds_are_refused(
    tiny_data: TinyData, thread4: dict, loss_match: dict, tmp_path: Path
) -> None:
    outcome = parity(thread4, torchrun(tiny_data, tmp_path, 2), loss_match)
    assert outcome.status == "fail" and "runs/proc ran at world 2, runs/thread at world 4" in outcome.message
