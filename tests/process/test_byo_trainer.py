"""Gate your own trainer (issue #25): runs recorded by runrecord from a real transformers.Trainer and
a plain PyTorch loop, single device and torchrun world 2 (gloo), judged by the loss_match gate's
own function. Positive controls pass; DDP mistakes users make fail with a message naming why.

The Trainer's world-2 runs (the correct one, each mistake, grad accumulation set differently) are
made by one torchrun start (tests/byo_example_runs.py: the script's own main() per run, in turn).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TinyData, code_first
from gates.judges import ddp
from gates.judges.outcome import Outcome
from gates.reading import expect

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

HF = REPO / "examples" / "hf-trainer" / "train.py"
PLAIN = REPO / "examples" / "plain-loop" / "train.py"
LOSS_MATCH = {"max_rel": 1e-3, "cpu": {"first_step_rtol": 1e-5, "prefix_steps": 64, "final_val_atol": 0.01}}


def started(cmd: list[str], cwd: Path) -> None:
    env = {**code_first(REPO), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]


def recorded(run_dir: Path) -> dict:
    m = json.loads((run_dir / "metrics.json").read_text())
    # the record agrees with its own config: config_hash its identity, length, evals, world (the gates'
    # own check, gates/reading/expect.py: a project of its own is judged from its records alone)
    assert expect.run_problems(None, m["launcher"], m) == []
    return m


def script_args(data: TinyData, run_dir: Path, *extra: str) -> list[str]:
    return [
        "--tokens",
        str(data.tokens),
        "--vocab-size",
        str(data.vocab_size),
        "--run-dir",
        str(run_dir),
        *extra,
    ]


def run(script: Path, data: TinyData, run_dir: Path, world: int, *extra: str) -> dict:
    start = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}"]
    started(
        [*(start if world > 1 else [sys.executable]), str(script), *script_args(data, run_dir, *extra)],
        run_dir.parent,
    )
    return recorded(run_dir)


def verdict(single: dict, got: dict) -> Outcome:
    outcome = ddp.equivalence(single, got, "proc", LOSS_MATCH)
    print(f"{outcome.status}: {outcome.message}")
    return outcome


@pytest.fixture(scope="module")
def hf_single(tiny_data: TinyData, tmp_path_factory) -> dict:
    return run(HF, tiny_data, tmp_path_factory.mktemp("hf") / "single", 1)


HF_PROC = {  # name -> the script's extra arguments, world 2
    **{
        mistake: ("--mistake", mistake)
        for mistake in ("eval_first", "whole_batch", "rank_seed", "same_shard")
    },
    "grad_accum2": ("--grad-accum", "2", "--steps", "2"),
    "proc": (),
}


@pytest.fixture(scope="module")
def hf_proc(tiny_data: TinyData, tmp_path_factory) -> dict[str, dict]:
    """The Trainer's world-2 runs, one torchrun start (tests/byo_example_runs.py)."""
    root = tmp_path_factory.mktemp("hf-proc")
    runs = [script_args(tiny_data, root / name, *extra) for name, extra in HF_PROC.items()]
    (root / "runs.json").write_text(json.dumps(runs))
    start = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    started([*start, str(Path(__file__).parents[1] / "byo_example_runs.py"), str(root / "runs.json")], root)
    return {name: recorded(root / name) for name in HF_PROC}


def test_a_plain_loop_under_torchrun_matches_one_device(tiny_data: TinyData, tmp_path: Path) -> None:
    single = run(PLAIN, tiny_data, tmp_path / "single", 1)
    outcome = verdict(single, run(PLAIN, tiny_data, tmp_path / "proc", 2))
    assert outcome.status == "pass", outcome.message
    assert single["format"] == "xtrain-metrics/1" and single["determinism"]["recorder"].startswith(
        "runrecord"
    )


def test_a_transformers_trainer_under_torchrun_matches_one_device(hf_single: dict, hf_proc: dict) -> None:
    got = hf_proc["proc"]
    outcome = verdict(hf_single, got)
    assert outcome.status == "pass", outcome.message
    assert got["samples"] == hf_single["samples"] and got["cross_rank"]["max_abs_diff"] == 0.0
    assert [e["step"] for e in got["eval"]] == [0, 8, 16, 24]  # examples/hf-trainer/params.yaml


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("eval_first", "first step: step 0 differs beyond summation order"),  # ranks never synchronise
        (
            "whole_batch",
            "samples: samples differ at 24 of 24 steps, first step 0: the ranks consumed 16 rows",
        ),
        ("rank_seed", "samples: samples differ at 24 of 24 steps, first step 0: 8 rows but other samples"),
        # every rank reads the whole dataset in one order: the same rows on each rank, the shards overlap
        ("same_shard", "samples: samples differ at 24 of 24 steps, first step 0: 8 rows but other samples"),
    ],
)
def test_ddp_mistakes_with_the_real_trainer_fail(
    hf_single: dict, hf_proc: dict, mistake: str, named: str
) -> None:
    got = hf_proc[mistake]
    outcome = verdict(hf_single, got)
    assert outcome.status == "fail" and named in outcome.message, outcome.message
    if mistake == "eval_first":  # the replicas drifted apart: cross_rank sees it too
        assert got["cross_rank"]["max_abs_diff"] > 1e-3


def test_grad_accumulation_set_differently_is_refused_naming_the_key(hf_single: dict, hf_proc: dict) -> None:
    got = hf_proc["grad_accum2"]
    outcome = verdict(hf_single, got)
    assert outcome.status == "fail" and "train.grad_accum 2 vs 1" in outcome.message, outcome.message
