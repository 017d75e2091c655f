"""fresh_train across environments: exact on the golden's own environment, approximate elsewhere.

The golden is blessed by the real bless code as if from another environment (a made-up env_id),
so this machine has no golden of its own. Negative controls train for real: a run from a genuinely
different environment (ATEN_CPU_CAPABILITY=default: other kernels, other env_id, same config)
passes the approximate tier; a code change the config does not see (lr +10%, a changed init)
fails it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

import xtrain.core.model
import xtrain.core.train
from conftest import TinyData, tiny_cli, tiny_spec
from gate_tree import bless_golden, bless_golden_as, check, copy_tree, edit, gate, run_cli, unbless
from gates.__main__ import main as gates_main
from xtrain.core.launch import run_single

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]

OTHER_ENV = "cpu-made-up-env-for-tests"


@pytest.fixture()
def work(gate_tree: Path, tmp_path: Path) -> Path:
    """The tree with its golden only under another environment's name."""
    root = copy_tree(gate_tree, tmp_path / "tree")
    own = next((root / "registry" / "goldens").iterdir())
    bless_golden_as(root, OTHER_ENV)
    unbless(root, own)
    return root


def env_id(root: Path) -> str:
    return json.loads((root / "runs/single/metrics.json").read_text())["env"]["env_id"]


def fresh_train(root: Path) -> dict:
    _, report = check(root, "--only", "fresh_train")
    return gate(report, "fresh_train")


def test_an_identical_run_is_judged_approximate_against_the_named_golden(work: Path) -> None:
    g = fresh_train(work)
    assert g["status"] == "pass" and g["measured"] == "0 steps out"
    assert f"approximate tier vs golden {OTHER_ENV} v1 (another environment's golden)" in g["message"]
    assert "rtol 0.0001" in g["threshold"]


def test_a_run_from_another_cpu_environment_passes_approximate(work: Path, tiny_data: TinyData) -> None:
    before = env_id(work)
    cli = tiny_cli(tiny_data, work / "runs" / "single")
    run_cli([sys.executable, "-m", "pipeline.train", "single", *cli], env={"ATEN_CPU_CAPABILITY": "default"})
    assert env_id(work) not in (before, OTHER_ENV)
    g = fresh_train(work)
    assert g["status"] == "pass", g["message"]
    assert f"approximate tier vs golden {OTHER_ENV} v1" in g["message"]


def test_lr_plus_10_percent_fails_approximate(work: Path, tiny_data: TinyData, monkeypatch) -> None:
    lr_at = xtrain.core.train.lr_at
    monkeypatch.setattr(xtrain.core.train, "lr_at", lambda step, t: 1.1 * lr_at(step, t))  # a code change
    run_single(tiny_spec(tiny_data, run_dir=work / "runs" / "single", train={"cpu_threads": 2}))
    g = fresh_train(work)
    assert g["status"] == "fail" and "approximate tier" in g["message"], g["message"]
    assert "first step out" in g["message"]


def test_a_changed_init_fails_approximate(work: Path, tiny_data: TinyData, monkeypatch) -> None:
    init = xtrain.core.model.Transformer.init_weights
    monkeypatch.setattr(
        xtrain.core.model.Transformer, "init_weights", lambda self, seed: init(self, seed + 1)
    )
    run_single(tiny_spec(tiny_data, run_dir=work / "runs" / "single", train={"cpu_threads": 2}))
    g = fresh_train(work)
    assert g["status"] == "fail" and "first step out: 0" in g["message"], g["message"]


@pytest.mark.parametrize(("steps_off", "expected"), [(2, "pass"), (3, "fail")])
def test_the_approximate_tier_allows_max_steps_out(work: Path, steps_off: int, expected: str) -> None:
    edit(
        work / "runs/single/metrics.json",
        lambda m: [
            m["train_loss"].__setitem__(i, m["train_loss"][i] * 1.001) for i in range(1, 1 + steps_off)
        ],
    )
    g = fresh_train(work)
    assert g["status"] == expected and g["measured"] == f"{steps_off} steps out"


def test_a_val_loss_out_of_tolerance_fails_approximate(work: Path) -> None:
    edit(
        work / "runs/single/metrics.json", lambda m: m["eval"][-1].update(loss=m["eval"][-1]["loss"] * 1.001)
    )
    g = fresh_train(work)
    assert g["status"] == "fail" and "val loss out at steps [12]" in g["message"]


def test_the_golden_choice_prefers_the_same_device_type(work: Path) -> None:
    m = json.loads((work / "runs/single/metrics.json").read_text())
    m["env"].update(env_id="a-cuda-env-sorted-first", device_type="cuda", precision="bf16")
    gpu = work / "gpu-metrics.json"
    gpu.write_text(json.dumps(m))
    bless_golden(work, gpu, "--tier", "approx")
    g = fresh_train(work)
    assert g["status"] == "pass" and f"vs golden {OTHER_ENV} v1" in g["message"]


def prefix_tier(root: Path, prefix_steps: int = 4, final_val_atol: float = 0.01) -> None:
    """The cpu tier of this tree judged like the cuda tier: a prefix of steps, step-0 val, final val."""
    p = root / "params.yaml"
    params = yaml.safe_load(p.read_text())
    params["gates"]["fresh_train"]["approx"]["cpu"].update(
        loss_rtol=1e-3, max_steps_out=0, prefix_steps=prefix_steps, final_val_atol=final_val_atol
    )
    p.write_text(yaml.safe_dump(params, sort_keys=False))


def test_the_prefix_tier_judges_only_the_prefix_and_the_end(work: Path) -> None:
    """Past the prefix, trajectories of other kernels may part: 1 % off there passes."""
    prefix_tier(work)
    edit(
        work / "runs/single/metrics.json", lambda m: m["train_loss"].__setitem__(6, m["train_loss"][6] * 1.01)
    )
    g = fresh_train(work)
    assert g["status"] == "pass", g["message"]
    assert (
        "rtol 0.001 over the first 4 steps" in g["threshold"] and "|final val diff| <= 0.01" in g["threshold"]
    )


def test_the_prefix_tier_fails_lr_plus_10_percent(work: Path, tiny_data: TinyData, monkeypatch) -> None:
    prefix_tier(work)
    lr_at = xtrain.core.train.lr_at
    monkeypatch.setattr(xtrain.core.train, "lr_at", lambda step, t: 1.1 * lr_at(step, t))
    run_single(tiny_spec(tiny_data, run_dir=work / "runs" / "single", train={"cpu_threads": 2}))
    g = fresh_train(work)
    assert g["status"] == "fail" and "first step out: 2" in g["message"], g["message"]  # inside the prefix


@pytest.mark.parametrize(("shift", "expected"), [(0.005, "pass"), (0.02, "fail")])
def test_the_prefix_tier_bounds_the_final_val_loss(work: Path, shift: float, expected: str) -> None:
    prefix_tier(work, final_val_atol=0.01)
    edit(
        work / "runs/single/metrics.json", lambda m: m["eval"][-1].update(loss=m["eval"][-1]["loss"] + shift)
    )
    g = fresh_train(work)
    assert g["status"] == expected, g["message"]
    if expected == "fail":
        assert "val loss out at steps [12]" in g["message"]


def test_a_prefix_without_its_final_bound_is_refused(work: Path) -> None:
    p = work / "params.yaml"
    params = yaml.safe_load(p.read_text())
    params["gates"]["fresh_train"]["approx"]["cpu"]["prefix_steps"] = 4
    p.write_text(yaml.safe_dump(params, sort_keys=False))
    assert gates_main(["--root", str(work), "check", "--only", "fresh_train"]) == 2
