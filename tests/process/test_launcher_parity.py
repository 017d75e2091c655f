"""launcher_parity judged like loss_match (gates/judges/ddp.py launcher_parity), at world 4 on real launchers.

At world 4 on H200s the two launchers' reductions summed in other orders and the old whole-run
bound failed at step 14 (rel 0.068) though both matched single device. The gate now checks what
survives chaos exactly (samples, dropout masks), step 0 tightly, a prefix and the final val loss.
Positive control: thread and torchrun at world 4 on the tiny config pass. Negative controls at
world 4: torchrun with summed gradients, and with every rank reading rank 0's shard, fail; runs at
different worlds are refused.
"""

from __future__ import annotations

import pytest

from conftest import PARAMS, TinyData, tiny_spec
from gates.judges import ddp
from gates.judges.outcome import Outcome
from params.config import load_thresholds
from proc_runs import ProcRuns
from test_ddp_gate import DROPOUT, metrics, torchrun
from xtrain.core.launch import run_threads

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

WORLD = 4


@pytest.fixture(scope="module")
def loss_match() -> dict:
    return load_thresholds(PARAMS)["loss_match"]


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


def test_thread_and_torchrun_at_world_4_pass(thread4: dict, loss_match: dict, proc_runs: ProcRuns) -> None:
    outcome = parity(thread4, torchrun(proc_runs, world=WORLD), loss_match)
    assert outcome.status == "pass", outcome.message
    assert "world 4 vs 4" in outcome.message and "exactly the thread rows" in outcome.message


@pytest.mark.parametrize(("fault", "check"), [("grad_sum@*:0", "first step"), ("same_shard@*:0", "samples")])
def test_a_ddp_bug_in_one_launcher_fails_parity_at_world_4(
    thread4: dict, loss_match: dict, proc_runs: ProcRuns, fault: str, check: str
) -> None:
    outcome = parity(thread4, torchrun(proc_runs, fault, WORLD), loss_match)
    assert outcome.status == "fail" and f"{check}: " in outcome.message, outcome.message


def test_runs_at_different_worlds_are_refused(thread4: dict, loss_match: dict, proc_runs: ProcRuns) -> None:
    outcome = parity(thread4, torchrun(proc_runs, world=2), loss_match)
    assert outcome.status == "fail" and "runs/proc ran at world 2, runs/thread at world 4" in outcome.message
