"""Your own trainer, judged (issue #34): a user's script (tests/byo_user_loop.py, not the examples)
with dropout 0.1, recorded by runrecord, run on one device and under real torchrun (CPU, gloo,
world 2), judged by the gates' own functions (loss_match's equivalence with its train-mode check,
cross_rank's per-rank facts, fresh_train against a golden blessed by the real `registry bless
--golden`). Correct code with dropout passes; training left in eval mode fails naming train mode; six
classic DDP mistakes each fail with a message naming the user's side; the controls pass.

Every run of a launcher is made by one process (one torchrun start for thirteen runs): the runs are
shared by every case of this module.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, TinyData, code_first
from gates.judges import ddp, fresh_train
from gates.judges.outcome import Outcome
from gates.judges.training import with_train_mode
from gates.reading import expect
from gates.reading.registry_records import choose_golden
from registry.store import Registry

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

SCRIPT = Path(__file__).parents[1] / "byo_user_loop.py"
LOSS_MATCH = {"max_rel": 1e-3, "cpu": {"first_step_rtol": 1e-5, "prefix_steps": 64, "final_val_atol": 0.01}}
FRESH = {"unblessed": "fail", "approx": {"cpu": {"loss_rtol": 1e-4, "max_steps_out": 2, "eval_rtol": 1e-4}}}
CROSS_RANK_MAX = 1e-6
SINGLE = {
    "base": {},
    "eval_mode": {"mistake": "eval_mode"},
    "accum2": {"grad_accum": 2},
    "accum_undivided": {"grad_accum": 2, "mistake": "accum_undivided"},
    "dropout_off": {"dropout_mode": "off"},
}
PROC = {
    "base": {},
    "eval_mode": {"mistake": "eval_mode"},
    "no_sampler": {"mistake": "no_sampler"},
    "rank_init_seed": {"mistake": "rank_init_seed"},
    "rank0_loss": {"mistake": "rank0_loss"},
    "accum_one_side": {"mistake": "accum_one_side"},
    "sched_twice": {"mistake": "sched_twice"},
    "accum_undivided": {"grad_accum": 2, "mistake": "accum_undivided"},
    "eval_pad": {"eval_rows": 9, "mistake": "eval_pad"},
    "torch_ddp": {"ddp": "torch"},  # the controls
    "threads": {"threads": 2},
    "eval_batch": {"eval_batch": 3},
    "accum2": {"grad_accum": 2},
    "dropout_off": {"dropout_mode": "off"},
}


def launch(data: TinyData, root: Path, launcher: str, runs: dict[str, dict]) -> dict[str, dict]:
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
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {}
    for name in runs:
        m = json.loads((root / launcher / name / "metrics.json").read_text())
        assert expect.run_problems(None, m["launcher"], m) == []  # each record agrees with itself
        out[name] = m
    return out


@pytest.fixture(scope="module")
def runs(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict]]:
    root = tmp_path_factory.mktemp("byo-user")
    t0 = time.perf_counter()
    out = {"single": launch(tiny_data, root, "single", SINGLE), "proc": launch(tiny_data, root, "proc", PROC)}
    print(f"{len(SINGLE)} single runs, {len(PROC)} torchrun world-2 runs: {time.perf_counter() - t0:.1f} s")
    out["root"] = {"path": root}  # type: ignore[assignment]
    return out


def verdict(runs: dict, single: str, proc: str) -> Outcome:
    s, p = runs["single"][single], runs["proc"][proc]
    o = with_train_mode(ddp.equivalence(s, p, "proc", LOSS_MATCH), [("single", s), ("proc", p)])
    print(f"{proc}: {o.status}: {o.message}")
    return o


def test_correct_code_with_dropout_matches_one_device(runs: dict) -> None:
    o = verdict(runs, "base", "base")
    assert o.status == "pass", o.message
    single, proc = runs["single"]["base"], runs["proc"]["base"]
    assert single["dropout"] == {"masks": "seeded", "modules": 7, "p": [0.1]}  # 7 nn.Dropout, seeded
    assert all(single["samples"]["dropout_hash_sum"]), "every step drew masks"
    assert proc["samples"]["dropout_hash_sum"] == single["samples"]["dropout_hash_sum"]
    assert single["eval_mode_steps"] == proc["eval_mode_steps"] == []
    assert o.not_applied == {}  # every check applied: train mode and masks were recorded
    assert "drew the same masks as single" in o.message


@pytest.mark.parametrize("name", ["torch_ddp", "threads", "eval_batch"])
def test_the_controls_pass(runs: dict, name: str) -> None:
    o = verdict(runs, "base", name)
    assert o.status == "pass", o.message


def test_grad_accumulation_on_both_sides_passes(runs: dict) -> None:
    o = verdict(runs, "accum2", "accum2")
    assert o.status == "pass", o.message


def test_dropout_switched_off_passes_and_says_the_masks_were_not_compared(runs: dict) -> None:
    o = verdict(runs, "dropout_off", "dropout_off")
    assert o.status == "pass", o.message
    assert o.not_applied == {
        "dropout masks": "dropout switched off for these runs (runrecord dropout='off': 7 dropouts at p 0.1 "
        "set to 0): no masks to compare"
    }
    assert "dropout masks: not applied: dropout switched off" in o.message
    mixed = with_train_mode(  # one run seeded, the other off: not one comparison
        ddp.equivalence(runs["single"]["base"], runs["proc"]["dropout_off"], "proc", LOSS_MATCH), []
    )
    assert mixed.status == "fail" and "compare runs of one setting" in mixed.message, mixed.message


def test_training_left_in_eval_mode_fails_naming_train_mode(runs: dict) -> None:
    o = verdict(runs, "eval_mode", "eval_mode")  # the same bug in both runs: the numbers agree
    assert o.status == "fail"
    assert o.message.startswith("model in eval mode at training steps 0..7 on single"), o.message
    assert "model in eval mode at training steps 0..7 on proc" in o.message
    assert "no masks, like single, though the model has dropout" in o.message  # not "no dropout"


@pytest.mark.parametrize(
    ("mistake", "named"),
    [
        ("no_sampler", "samples differ at 8 of 8 steps, first step 0: 8 rows but other samples"),
        ("no_sampler", "your sampler"),
        ("rank_init_seed", "the gradients differ (grad_norm first out at step 0)"),
        ("rank_init_seed", "your init"),
        ("rank0_loss", "the logged training loss differs while the gradient norms and the validation"),
        ("rank0_loss", "your loss logging"),
        ("sched_twice", "your lr schedule"),
        ("eval_pad", "training agrees (train losses and gradient norms) and only the validation loss"),
        ("eval_pad", "your eval set"),
    ],
)
def test_ddp_mistakes_fail_naming_the_users_side(runs: dict, mistake: str, named: str) -> None:
    o = verdict(runs, "base", mistake)
    assert o.status == "fail" and named in o.message, o.message
    assert "xtrain/core" not in o.message  # the hints name the user's code, not the harness's


def test_accumulation_on_one_side_only_passes_with_the_key_as_information(runs: dict) -> None:
    """grad_accum 2 under torchrun only: the same rows per step, each micro-batch loss divided by 2, so
    the same training; once refused for its config ("differing keys: train.grad_accum 2 vs 1"), now
    judged by what the runs did (issue 54 item 1)."""
    o = verdict(runs, "base", "accum_one_side")
    assert o.status == "pass", o.message
    assert o.message.endswith("config keys differ, no observed quantity does: train.grad_accum 2 vs 1")


def test_a_scheduler_stepped_twice_on_one_rank_fails_cross_rank(runs: dict) -> None:
    per_rank = runs["proc"]["sched_twice"]["cross_rank"]["per_rank"]
    assert per_rank[1]["max_abs_diff"] > 1e3 * CROSS_RANK_MAX  # the ranks' weights parted
    assert runs["proc"]["base"]["cross_rank"]["max_abs_diff"] <= CROSS_RANK_MAX  # the control


def test_grad_accumulation_undivided_on_both_sides_fails_only_against_a_golden(runs: dict) -> None:
    # the DDP gate cannot see a bug both runs share...
    assert verdict(runs, "accum_undivided", "accum_undivided").status == "pass"
    # ...a golden blessed from a good run can: the real `registry bless --golden`, no export
    root = runs["root"]["path"]
    good = root / "single" / "accum2" / "metrics.json"
    cmd = [sys.executable, "-m", "registry", "--root", str(root / "registry"), "bless", "--golden"]
    cmd += ["--metrics", str(good), "--reason", "the user's good run with grad_accum 2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=code_first(REPO))
    assert proc.returncode == 0 and "the run alone: no export" in proc.stdout, proc.stderr
    reg = Registry(root / "registry")
    bad_run = runs["single"]["accum_undivided"]
    bad = fresh_train.judge(bad_run, choose_golden(reg, bad_run)[0], FRESH, None, "fail")
    print(bad.message)
    assert bad.status == "fail" and bad.threshold == "exact", bad.message
    # clipping at 1.0 hides the doubled gradient from the losses; the grad norms show it at step 0
    assert "grad_norm differs at 8 steps, first step 0 (golden" in bad.message and ", x2)" in bad.message
    assert "parameter digest differ" in bad.message
    good_run = runs["single"]["accum2"]
    ok = fresh_train.judge(good_run, choose_golden(reg, good_run)[0], FRESH, None, "fail")  # the control
    assert (
        ok.status == "pass" and "grad norms, 3 val losses and 1 parameter digest bit-identical" in ok.message
    )
