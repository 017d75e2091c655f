"""Real trainers as they are (issue #54 item 3), in real processes: a user's loop that evaluates on
rank 0 alone (nanoGPT's estimate_loss) under real torchrun (CPU, gloo, world 2) finishes and writes
its record, no dummy eval on rank 1, no "Connection closed by peer"; evals at any steps are compared
at the steps both runs have, and two runs without one common eval step are named; a setting the
recorder refuses is one line on stderr (exit 2), not a traceback.

The negative controls: a planted DDP mistake still fails with rank-0 evals; runs without a common
eval step fail naming it; with XTRAIN_DEBUG=1 the refusal's traceback is back (the one line is the
recorder's hook, not an accident of the script).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TinyData, code_first
from contracts.plain_words import internal_words
from gates.judges import ddp
from gates.judges.outcome import Outcome
from gates.judges.training import with_train_mode
from gates.reading import expect

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

SCRIPT = Path(__file__).parents[1] / "byo_user_loop.py"
LOSS_MATCH = {"max_rel": 1e-3, "cpu": {"first_step_rtol": 1e-5, "prefix_steps": 64, "final_val_atol": 0.01}}
SINGLE = {"base": {}, "any": {"eval_at": [0, 3, 8]}}  # steps 8, eval_every 4: base evaluates at 0, 4, 8
PROC = {
    "rank0": {"eval_rank0": True},
    "rank0_any": {"eval_rank0": True, "eval_at": [0, 5, 8]},
    "rank0_disjoint": {"eval_rank0": True, "eval_at": [1, 7]},
    "rank0_rank0_loss": {"eval_rank0": True, "mistake": "rank0_loss"},
}


def started(data: TinyData, root: Path, launcher: str, runs: dict[str, dict]) -> subprocess.CompletedProcess:
    spec = [{"run_dir": str(root / launcher / name), **opts} for name, opts in runs.items()]
    (root / f"{launcher}.json").write_text(json.dumps(spec))
    args = [str(SCRIPT), "--tokens", str(data.tokens), "--vocab-size", str(data.vocab_size)]
    start = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    cmd = [
        *(start if launcher == "proc" else [sys.executable]),
        *args,
        "--runs",
        str(root / f"{launcher}.json"),
    ]
    env = {**code_first(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=600, env=env)


def launch(data: TinyData, root: Path, launcher: str, runs: dict[str, dict]) -> dict[str, dict]:
    proc = started(data, root, launcher, runs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Connection closed by peer" not in proc.stderr
    out = {}
    for name in runs:
        m = json.loads((root / launcher / name / "metrics.json").read_text())
        assert expect.run_problems(None, m["launcher"], m) == []  # each record agrees with itself
        out[name] = m
    return out


@pytest.fixture(scope="module")
def runs(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict]]:
    root = tmp_path_factory.mktemp("byo-meet")
    return {
        "single": launch(tiny_data, root, "single", SINGLE),
        "proc": launch(tiny_data, root, "proc", PROC),
    }


def verdict(runs: dict, single: str, proc: str) -> Outcome:
    s, p = runs["single"][single], runs["proc"][proc]
    o = with_train_mode(ddp.equivalence(s, p, "proc", LOSS_MATCH), [("single", s), ("proc", p)])
    print(f"{single} vs {proc}: {o.status}: {o.message}")
    return o


def test_evals_on_rank_0_alone_are_recorded_and_match_one_device(runs: dict) -> None:
    got = runs["proc"]["rank0"]
    assert got["world"] == 2 and [e["step"] for e in got["eval"]] == [0, 4, 8]
    o = verdict(runs, "base", "rank0")
    assert o.status == "pass", o.message
    assert "val_loss@0 rel" in o.message and "3 evals" in o.message and "final val" in o.message


def test_negative_control_the_old_rule_kills_the_rank_0_eval_run(tiny_data: TinyData, tmp_path: Path) -> None:
    """runrecord 1.3's finish() re-planted in the same loop: rank 1, which evaluated nothing, is refused
    and the run dies after training (the failure issue #54 measured): the test above can fail."""
    proc = started(tiny_data, tmp_path, "proc", {"old": {"eval_rank0": True, "old_eval_rule": True}})
    assert proc.returncode != 0
    assert (
        "error: runrecord: finish: eval: evals at steps [] (rule: train.eval_every implies [0, 4, 8])"
        in proc.stderr
    )
    assert not (tmp_path / "proc" / "old" / "metrics.json").exists()


def test_evals_at_any_steps_are_compared_at_the_steps_both_runs_have(runs: dict) -> None:
    assert [e["step"] for e in runs["single"]["any"]["eval"]] == [0, 3, 8]
    assert [e["step"] for e in runs["proc"]["rank0_any"]["eval"]] == [0, 5, 8]
    o = verdict(runs, "any", "rank0_any")
    assert o.status == "pass", o.message
    assert "2 evals" in o.message  # steps 0 and 8, both runs'
    o = verdict(runs, "base", "rank0_any")  # last evals at 8 on both sides, 0 and 8 in common
    assert o.status == "pass" and "2 evals" in o.message, o.message


def test_runs_without_a_common_eval_step_are_named(runs: dict) -> None:
    o = verdict(runs, "base", "rank0_disjoint")
    assert o.status == "fail", o.message
    assert "end: no common eval step: single evaluated at steps [0, 4, 8], the other at [1, 7]" in o.message
    assert internal_words(o.message) == [], o.message


def test_a_mistake_still_fails_with_rank_0_evals(runs: dict) -> None:
    o = verdict(runs, "base", "rank0_rank0_loss")  # rank 0's evals are the record's: they agree
    assert o.status == "fail", o.message
    assert (
        "the logged training loss differs while the gradient norms and the validation losses agree"
        in o.message
    )
    assert internal_words(o.message) == [], o.message


REFUSED = """
import torch
from torch import nn
from runrecord import RunRecorder
model = nn.Sequential(nn.Embedding(10, 8), nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1))
RunRecorder({"seed": 0, "model": {}, "train": {"steps": 2}}, tokens_per_step=4, model=model)
print("trained")
"""


@pytest.mark.parametrize("debug", ["", "1"])
def test_a_refused_setting_is_one_line_before_training(tmp_path: Path, debug: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(REFUSED)
    env = {**code_first(REPO), "XTRAIN_DEBUG": debug}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert proc.returncode == 2 and "trained" not in proc.stdout, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("error: runrecord: RunRecorder: dropout: ") and "drawn inside torch's kernels" in last
    )
    if debug:  # the negative control: the traceback is the hook's to hide, and it is back when asked
        assert proc.stderr.startswith("Traceback (most recent call last):"), proc.stderr
    else:
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
