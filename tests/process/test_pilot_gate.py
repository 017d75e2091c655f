"""The pilot stage and its gates (pipeline/pilot.py, gates/judges/pilot.py) on real runs of the tiny config.

Correct code passes every CPU cell through single, thread and torchrun. The negative controls are
the seed design's own history and the bugs the mutation campaign missed, injected from outside xtrain
(tests/bug_layer/xtrain_bugs.py through XTRAIN_TEST_PATCH, armed in every launcher's process; each is
a mutant of gates/campaigns/mutants.yaml in its fast form): each must fail its cell's gate.
- T21: under DDP the model trains in eval mode (`ddp_eval`) or without the dropout setting
  (`ddp_no_dropout`): dropout silently off.
- KI-3: activation recompute replays a block with other numbers (`recompute_drift`).
- KI-2: bf16 training without fp32 master weights (`bf16_no_master`): cuda only.
- the micro-batch loss not divided by grad_accum (`accum_undivided`).
- a resume that drops Adam's exp_avg_sq (`resume_drop_v`).
- fused AdamW that never sees the schedule (`fused_lr_frozen`); summed DDP gradients (`grad_sum`)
  fail every cell's DDP half, the base cell's included.
- T21 as it happened (`ddp_stays_eval`: an eval leaves the DDP ranks in eval mode): the trainer
  records the steps, the train-mode check fails them, and the masks-drawn check independently.
- a crash planted in one cell (the `raise` failpoint with XTRAIN_FAULT_IN=<cell>): the stage records it and exits
  0, the torchrun job restarts for the cells after it, every other cell is judged, and the crashed
  cell fails naming the launcher and the rank.
- the catalogue's `eval-in-train-mode` edit, applied to a scratch copy of the code: no crash, and
  the dropout cell's eval at step 0 differs from the base's (judged on data).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bug_layer import xtrain_bugs as bugs
from conftest import PARAMS, REPO, TINY_OVERRIDES, TinyData
from gates.campaigns import mutants
from params.config import set_in_file
from pilot_cases import index, verdict

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

FUSED_ON_CPU = "pilot.cells.cpu=[fused_adamw]"  # a GPU-profile cell; CPU trains it inside `all`
PILOT = ("pilot.steps=6", "pilot.resume_at=3", "pilot.sets.cpu=[train.cpu_threads=1]")


def make_tree(root: Path, launchers: list[str], *extra: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PARAMS, root / "params.yaml")
    lset = f"pilot.launchers=[{', '.join(launchers)}]"
    set_in_file(root / "params.yaml", [*TINY_OVERRIDES, *PILOT, lset, *extra])
    return root


def run_pilot(
    data: TinyData,
    root: Path,
    cells: list[str],
    fault: str | None = None,
    scope: str | None = None,
    code: Path = REPO,
    rc: int = 0,
    bug: str | None = None,
) -> subprocess.CompletedProcess:
    """The real stage (`code`: the checkout, or a scratch copy whose own code wins in its folder);
    `fault`, `scope`: a failpoint (XTRAIN_FAULT, XTRAIN_FAULT_IN); `bug`: a bug of the test layer."""
    cmd = [sys.executable, "-m", "pipeline.pilot", "--params", str(root / "params.yaml"), "--cells", *cells,
           "--tokens", str(data.tokens), "--tokenizer", str(data.tokenizer), "--out", str(root / "runs" / "pilot")]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("XTRAIN_FAULT", "XTRAIN_FAULT_IN", bugs.ENV)}
    if fault:
        env["XTRAIN_FAULT"] = fault
    if scope:
        env["XTRAIN_FAULT_IN"] = scope
    if bug:
        env = bugs.bug_env(bug, env)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=code, timeout=600, env=env)
    assert proc.returncode == rc, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def faulty(data: TinyData, tmp: Path, bug: str, cells: list[str], launchers: list[str], *extra: str) -> Path:
    root = make_tree(tmp / bug.split("@")[0], launchers, *extra)
    run_pilot(data, root, cells, bug=bug)
    return root


def test_bad_input_is_an_error_of_the_stage_not_a_recorded_run(tiny_data: TinyData, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "bad", ["single", "thread", "proc"])
    missing = TinyData(
        tiny_data.text, tiny_data.tokenizer, tmp_path / "none.safetensors", tiny_data.vocab_size
    )
    proc = run_pilot(missing, root, ["grad_accum"], rc=2)
    assert "none.safetensors" in proc.stderr and not (root / "runs" / "pilot").exists(), proc.stderr


def test_a_crash_in_one_cell_is_recorded_and_every_other_cell_judged(
    tiny_data: TinyData, tmp_path: Path
) -> None:
    """Rank 1 raises at step 2 in the dropout cell only, on every launcher with a rank 1: the stage
    exits 0, the torchrun job starts again for grad_accum (after dropout), and the gates judge it."""
    root = make_tree(tmp_path / "crash", ["single", "thread", "proc"])
    proc = run_pilot(tiny_data, root, ["dropout", "grad_accum"], "raise@1:2", scope="dropout")
    assert "torchrun again for grad_accum (restart 1)" in proc.stdout, proc.stdout[-2000:]
    record = index(root)
    dropout = record["runs"]["dropout"]
    assert dropout["single"] == {"status": "ok"} and set(dropout) == {"single", "thread", "proc"}
    for x in ("thread", "proc"):  # the error's one line (torchrun's rank may add who lagged behind)
        assert dropout[x]["status"] == "failed" and dropout[x]["rank"] == 1, dropout
        assert dropout[x]["error"].startswith("InjectedFault: injected fault at step 2"), dropout
    assert record["proc_restarts"] == 1
    assert all(r == {"status": "ok"} for c in ("base", "grad_accum") for r in record["runs"][c].values())
    runs = root / "runs" / "pilot"
    assert not (runs / "dropout" / "thread").exists() and not (runs / "dropout" / "proc").exists()
    for cell in ("base", "grad_accum"):
        o = verdict(root, cell)
        assert o.status == "pass" and all(f"{x}: " in o.message for x in ("single", "thread", "proc")), (
            o.message
        )
    o = verdict(root, "dropout")
    assert o.status == "fail", o.message
    for x in ("thread", "proc"):
        assert f"{x}: crashed: rank 1: InjectedFault: injected fault at step 2" in o.message, o.message
    assert "judged and passing: single" in o.message, o.message  # the single run was still judged


def test_t21_eval_left_on_under_ddp_is_recorded_and_fails_train_mode_and_masks(
    tiny_data: TinyData, tmp_path: Path
) -> None:
    root = faulty(tiny_data, tmp_path, "ddp_stays_eval@*:0", ["dropout"], ["single", "thread"])
    thread = json.loads((root / "runs" / "pilot" / "dropout" / "thread" / "metrics.json").read_text())
    assert thread["eval_mode_steps"] == list(range(6))  # the step-0 eval left the ranks in eval mode
    o = verdict(root, "dropout")
    assert o.status == "fail", o.message
    assert "thread: train mode: model in eval mode at training steps 0..5 on thread" in o.message, o.message
    assert "thread: vs base: masks drawn: masks drawn at 0 of 6 steps" in o.message, (
        o.message
    )  # independently
    o = verdict(root, "base")  # no dropout to see there: the record alone catches it
    assert o.status == "fail" and "model in eval mode at training steps 0..5 on thread" in o.message


def test_eval_in_train_mode_fails_the_eval_at_step_0_on_data(tiny_data: TinyData, tmp_path: Path) -> None:
    """The catalogue's own edit (gates/campaigns/mutants.yaml eval-in-train-mode) on a scratch copy of the code:
    before evaluate() set dropout's step state aside it crashed the stage; now the eval draws masks
    and the dropout cell's step-0 val loss differs from the base's."""
    code = tmp_path / "code"
    for pkg in ("contracts", "params", "xtrain", "pipeline"):
        shutil.copytree(REPO / pkg, code / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    mutant = next(m for m in mutants.load().mutants if m.id == "eval-in-train-mode")
    assert mutants.apply(mutant, code) == ["xtrain/core/train.py"]
    root = make_tree(tmp_path / "eval-train", ["single", "thread"])
    run_pilot(tiny_data, root, ["dropout"], code=code)
    o = verdict(root, "dropout")
    assert o.status == "fail", o.message
    for x in ("single", "thread"):
        assert f"{x}: vs base: eval at step 0: val loss " in o.message, o.message
    assert verdict(root, "base").status == "pass"  # dropout 0: the edit changes nothing there


def test_t21_ddp_in_eval_mode_fails_the_dropout_cell(tiny_data: TinyData, tmp_path: Path) -> None:
    root = faulty(tiny_data, tmp_path, "ddp_eval@*:0", ["dropout"], ["single", "thread"])
    o = verdict(root, "dropout")
    assert o.status == "fail" and "thread: vs single" in o.message and "none at step 0" in o.message, (
        o.message
    )


def test_t21_ddp_without_the_dropout_setting_fails_dropout_and_all(
    tiny_data: TinyData, tmp_path: Path
) -> None:
    root = faulty(tiny_data, tmp_path, "ddp_no_dropout@*:0", ["all"], ["single", "proc"])
    for cell in ("dropout", "all"):
        o = verdict(root, cell)
        assert o.status == "fail" and "proc: vs single" in o.message and "drew none" in o.message, o.message


def test_ki3_recompute_with_other_gradients_fails(tiny_data: TinyData, tmp_path: Path) -> None:
    root = faulty(tiny_data, tmp_path, "recompute_drift@*:0", ["recompute"], ["single"])
    o = verdict(root, "recompute")
    assert o.status == "fail" and "bitwise" in o.message and "grad_norm differs" in o.message, o.message


def test_loss_not_divided_by_grad_accum_fails_at_step_0(tiny_data: TinyData, tmp_path: Path) -> None:
    root = faulty(tiny_data, tmp_path, "accum_undivided@*:0", ["grad_accum"], ["single"])
    o = verdict(root, "grad_accum")
    assert o.status == "fail" and "single: vs base: first step" in o.message, o.message
    assert "grad_norm[0]" in o.message, o.message


def test_resume_dropping_adams_second_moment_fails(tiny_data: TinyData, tmp_path: Path) -> None:
    root = faulty(tiny_data, tmp_path, "resume_drop_v@*:0", ["resume"], ["single"])
    o = verdict(root, "resume")
    assert o.status == "fail" and "single: vs base: bitwise: " in o.message, o.message
    assert "first step 4" in o.message, o.message  # step 3 resumed exactly; its update did not


def test_fused_adamw_missing_the_schedule_fails(tiny_data: TinyData, tmp_path: Path) -> None:
    root = faulty(tiny_data, tmp_path, "fused_lr_frozen@*:0", ["fused_adamw"], ["single"], FUSED_ON_CPU)
    o = verdict(root, "fused_adamw")
    assert o.status == "fail" and "single: vs base" in o.message, o.message


def test_summed_ddp_gradients_fail_every_cell_through_its_ddp_half(
    tiny_data: TinyData, tmp_path: Path
) -> None:
    root = faulty(tiny_data, tmp_path, "grad_sum@*:0", ["fused_adamw"], ["single", "thread"], FUSED_ON_CPU)
    for cell in ("base", "fused_adamw"):
        o = verdict(root, cell)
        assert o.status == "fail" and "thread: vs single" in o.message and "summed" in o.message, o.message


@pytest.mark.skipif(not torch.cuda.is_available(), reason="KI-2 is a bf16 bug: bf16 trains on cuda only")
def test_ki2_bf16_without_fp32_master_weights_fails(tiny_data: TinyData, tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ki2", ["single"], "train.device=cuda", "pilot.cells.cpu=[bf16]")
    run_pilot(tiny_data, root, ["bf16"], bug="bf16_no_master@*:0")
    o = verdict(root, "bf16")
    assert o.status == "fail" and "single: vs base" in o.message, o.message
