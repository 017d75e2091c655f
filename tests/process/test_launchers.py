"""DDP launchers: thread-per-rank and process-per-rank (real torchrun) share one train step.

Numerical invariants against single-device training, the seed design's dropout-after-eval bug,
and multi-node rendezvous on loopback. All tests here start several ranks, so they share one
xdist group and run one after another (on a shared GPU runner, parallel DDP tests deadlock).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TINY_TRAIN, TinyData, tiny_cli, tiny_spec
from contracts.numbers import max_rel
from gates.judges import ddp
from gates.judges.training import train_mode_problem, with_train_mode
from proc_runs import ProcRuns
from xtrain.core.launch import run_single, run_threads
from xtrain.core.launch_plan import torchrun_cmd

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]
LOSS_MATCH = {"max_rel": 1e-3, "cpu": {"first_step_rtol": 1e-5, "prefix_steps": 64, "final_val_atol": 0.01}}


def torchrun(
    data: TinyData, run_dir: Path, world: int, *extra: str, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    cmd = torchrun_cmd(world, "pipeline.train", "proc", *tiny_cli(data, run_dir, *extra))
    return subprocess.run(
        cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout, env={**os.environ, **(env or {})}
    )


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.fixture(scope="module")
def reference(tiny_data: TinyData, tmp_path_factory) -> dict:
    """The single-device run every DDP run is compared with (written through the real writer)."""
    run_dir = tmp_path_factory.mktemp("single")
    run_single(tiny_spec(tiny_data, run_dir=run_dir, train={"cpu_threads": 2}))
    return metrics(run_dir)


@pytest.mark.parametrize("world", [2, 4])
def test_thread_launcher_matches_single_device(
    tiny_data: TinyData, reference: dict, tmp_path: Path, world: int
) -> None:
    run_threads(
        tiny_spec(tiny_data, launcher="thread", run_dir=tmp_path, train={"cpu_threads": 2}), world, 30
    )
    m = metrics(tmp_path)
    rel = max_rel(m["train_loss"], reference["train_loss"])
    print(
        f"thread world {world}: loss vs single max rel {rel:.3g}, cross-rank {m['cross_rank']['max_abs_diff']}"
    )
    assert m["world"] == world and m["launcher"] == "thread"
    assert rel < 1e-3
    assert max_rel([e["loss"] for e in m["eval"]], [e["loss"] for e in reference["eval"]]) < 1e-3
    assert m["cross_rank"]["max_abs_diff"] == 0.0  # fixed-order reduction: ranks are bit-identical
    assert len(m["cross_rank"]["per_rank"]) == world


@pytest.fixture(scope="module")
def proc_run(proc_runs: ProcRuns) -> dict:
    """torchrun at world 2 on the tiny config (shared with test_cuda.py's gloo control)."""
    return proc_runs.get(2).metrics


def test_proc_launcher_matches_single_device_and_threads(
    tiny_data: TinyData, reference: dict, proc_run: dict, tmp_path: Path
) -> None:
    rel = max_rel(proc_run["train_loss"], reference["train_loss"])
    assert proc_run["world"] == 2 and proc_run["launcher"] == "proc" and rel < 1e-3
    assert proc_run["cross_rank"]["max_abs_diff"] < 1e-6
    run_threads(tiny_spec(tiny_data, launcher="thread", run_dir=tmp_path, train={"cpu_threads": 2}), 2, 30)
    parity = max_rel(proc_run["train_loss"], metrics(tmp_path)["train_loss"])
    print(
        f"proc world 2: vs single {rel:.3g}, vs thread {parity:.3g}, cross-rank "
        f"{proc_run['cross_rank']['max_abs_diff']}"
    )
    assert parity < 1e-3


def test_explicit_allreduce_gives_the_same_trajectory_as_ddp(
    tiny_data: TinyData, proc_run: dict, tmp_path: Path
) -> None:
    proc = torchrun(tiny_data, tmp_path, 2, "launchers.grad_sync=allreduce")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert max_rel(metrics(tmp_path)["train_loss"], proc_run["train_loss"]) < 1e-6


def test_loss_match_detects_a_different_run(reference: dict, tiny_data: TinyData, tmp_path: Path) -> None:
    """Negative control: a run that differs (another seed) is far outside the 1e-3 tolerance."""
    run_threads(tiny_spec(tiny_data, launcher="thread", run_dir=tmp_path, seed=7), 2, 30)
    assert max_rel(metrics(tmp_path)["train_loss"], reference["train_loss"]) > 1e-2


# --- the seed design's bug: dropout silently off under DDP after an eval -----------------------------


@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_dropout_stays_live_after_eval_under_ddp(
    tiny_data: TinyData, tmp_path: Path, proc_runs: ProcRuns, launcher: str
) -> None:
    launch = thread_launch(tiny_data, tmp_path) if launcher == "thread" else proc_launch(proc_runs)
    no_dropout = launch(0.0, 6)
    with_eval = launch(0.1, 6)
    without_eval = launch(0.1, 0)
    # p>0 changes the trajectory, before and after the eval at step 6 ...
    assert with_eval[:6] != no_dropout[:6] and with_eval[6:] != no_dropout[6:]
    # ... and an eval in the middle changes nothing: masks after it are the ones a run without
    # eval draws. Had eval left the model in eval mode, steps 6.. would differ.
    assert with_eval == without_eval


def thread_launch(tiny_data: TinyData, tmp_path: Path):
    def launch(p: float, eval_every: int) -> list[float]:
        run_dir = tmp_path / f"p{p}-e{eval_every}"
        model, train = {"dropout": p, "attn_dropout": p}, {"eval_every": eval_every, "cpu_threads": 2}
        run_threads(tiny_spec(tiny_data, launcher="thread", run_dir=run_dir, model=model, train=train), 2, 30)
        return metrics(run_dir)["train_loss"]

    return launch


def proc_launch(proc_runs: ProcRuns):
    """The session's shared torchrun runs: p=0 with the tiny config's eval every 6 steps is the plain
    run (proc_run above), p=0.1 with it the dropout run test_ddp_gate.py reads; only p=0.1 without an
    eval is launched here. Two world-2 launches fewer in the serial ddp chain."""

    def launch(p: float, eval_every: int) -> list[float]:
        assert TINY_TRAIN["eval_every"] == 6  # the shared runs' cadence
        sets = () if p == 0 else (f"model.dropout={p}", f"model.attn_dropout={p}")
        sets += () if eval_every == 6 else (f"train.eval_every={eval_every}",)
        return proc_runs.get(2, *sets).metrics["train_loss"]

    return launch


def test_a_step_in_eval_mode_is_recorded_and_fails_the_ddp_gates(
    tiny_data: TinyData, tmp_path: Path, monkeypatch, capfd
) -> None:
    """The trainer records, the gates decide (T21): an eval that forgets model.train() no longer stops
    the run; the real thread launcher records the steps it trained in eval mode, prints one warning
    per rank, and loss_match's judge fails them (launcher_parity and pilot.* use the same check)."""
    import xtrain.core.train as train_mod

    dropout = {"dropout": 0.2}
    run_single(tiny_spec(tiny_data, run_dir=tmp_path / "single", model=dropout))  # correct: the reference
    single = metrics(tmp_path / "single")
    assert single["eval_mode_steps"] == [] and train_mode_problem(single, "runs/single", "single") is None
    real = train_mod.evaluate

    def forgetful_evaluate(model, data, spec, comm):
        loss = real(model, data, spec, comm)
        model.eval()
        return loss

    monkeypatch.setattr(train_mod, "evaluate", forgetful_evaluate)
    capfd.readouterr()
    run_threads(tiny_spec(tiny_data, launcher="thread", run_dir=tmp_path / "thread", model=dropout), 2, 30)
    thread = metrics(tmp_path / "thread")
    assert thread["eval_mode_steps"] == list(range(12))  # the eval at step 0 left it in eval mode
    warnings = [x for x in capfd.readouterr().err.splitlines() if "model in eval mode at training step" in x]
    assert len(warnings) == 2 and "rank 0" in warnings[0] + warnings[1], warnings  # one line per rank
    runs = [("single", single), ("thread", thread)]
    o = with_train_mode(ddp.equivalence(single, thread, "thread", LOSS_MATCH), runs)
    assert o.status == "fail", o.message
    assert o.message.startswith(
        "model in eval mode at training steps 0..11 on thread (dropout would be silently off: the seed's T21)"
    ), o.message
    # absent is "not recorded": a fail for xtrain's own trainer, allowed only for another recorder
    bare = {k: v for k, v in single.items() if k != "eval_mode_steps"}
    assert "eval_mode_steps missing" in (train_mode_problem(bare, "runs/single/metrics.json", "single") or "")
    foreign = {**bare, "determinism": {**bare["determinism"], "recorder": "runrecord 1.1"}}
    assert train_mode_problem(foreign, "runs/single/metrics.json", "single") is None


# --- torchrun across two "nodes" on loopback ---------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_on_loopback_match_one_node(tiny_data: TinyData, proc_run: dict, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo"}
    nodes = []
    for node_rank in (0, 1):
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--node-rank",
            str(node_rank),
            "--nproc-per-node",
            "1",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--rdzv-id",
            f"xtrain-test-{port}",
            "--max-restarts",
            "0",
            "-m",
            "pipeline.train",
            "proc",
            *tiny_cli(tiny_data, tmp_path / "run"),
        ]
        nodes.append(
            subprocess.Popen(
                cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outs = [n.communicate(timeout=120) for n in nodes]
    for n, (_, err) in zip(nodes, outs, strict=True):
        assert n.returncode == 0, err[-3000:]
    m = metrics(tmp_path / "run")
    assert m["world"] == 2
    # One process per node, one thread each: the same arithmetic as one node with two processes.
    assert max_rel(m["train_loss"], proc_run["train_loss"]) < 1e-6
    assert m["cross_rank"]["max_abs_diff"] == 0.0


# --- grad accumulation and resume behave the same under DDP ------------------------------------------


def test_grad_accumulation_under_ddp_matches_single_device(tiny_data: TinyData, tmp_path: Path) -> None:
    """k = 2 micro-batches: DDP's no_sync path (proc) and the flat all-reduce (thread) vs single device."""
    run_single(tiny_spec(tiny_data, run_dir=tmp_path / "single", train={"grad_accum": 2, "cpu_threads": 2}))
    ref = metrics(tmp_path / "single")["train_loss"]
    run_threads(
        tiny_spec(
            tiny_data,
            launcher="thread",
            run_dir=tmp_path / "thread",
            train={"grad_accum": 2, "cpu_threads": 2},
        ),
        2,
        30,
    )
    proc = torchrun(tiny_data, tmp_path / "proc", 2, "train.grad_accum=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert max_rel(metrics(tmp_path / "thread")["train_loss"], ref) < 1e-3
    assert max_rel(metrics(tmp_path / "proc")["train_loss"], ref) < 1e-3
    assert metrics(tmp_path / "proc")["cross_rank"]["max_abs_diff"] < 1e-6


def test_a_ddp_run_resumed_after_a_crash_equals_an_uninterrupted_one(
    tiny_data: TinyData, tmp_path: Path, proc_runs: ProcRuns
) -> None:
    dropout = ("model.dropout=0.1", "model.attn_dropout=0.1")  # the run test_ddp_gate.py reads
    crashed = torchrun(tiny_data, tmp_path / "part", 2, *dropout, env={"XTRAIN_FAULT": "raise@1:8"})
    assert crashed.returncode != 0 and "rank 1 failed" in crashed.stderr
    assert not (tmp_path / "part" / "metrics.json").exists()
    resumed = subprocess.run(
        torchrun_cmd(
            2, "pipeline.train", "proc", *tiny_cli(tiny_data, tmp_path / "part", *dropout), "--resume"
        ),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = proc_runs.get(2, *dropout).metrics, metrics(tmp_path / "part")
    assert b["resumed_from_step"] == 6
    assert b["train_loss"] == a["train_loss"] and b["param_digest"] == a["param_digest"]
