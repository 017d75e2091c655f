"""One route for world sizes: under the GPU profile, config set, --set and dvc exp run -S all reach
both launchers, a profile cannot shadow them, and no params value reaches a shell command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PARAMS, REPO, TINY_MODEL, TINY_SEED, TINY_TRAIN, TinyData
from contracts.validate import ValidationError
from params.config import set_in_file
from pipeline.train import proc_command, worlds


@pytest.fixture
def gpu_params(tmp_path: Path) -> Path:
    """A copy of params.yaml switched to the GPU profile the way the README says."""
    path = tmp_path / "params.yaml"
    shutil.copy(PARAMS, path)
    set_in_file(path, ["profile=gpu"])
    return path


def nproc(cmd: list[str]) -> int:
    return int(cmd[cmd.index("--nproc-per-node") + 1])


def test_config_set_reaches_both_launchers(gpu_params: Path) -> None:
    set_in_file(gpu_params, ["launchers.thread.world=4", "launchers.proc.world=8"])
    assert worlds(str(gpu_params), []) == {"thread": 4, "proc": 8}
    assert nproc(proc_command(["proc", "--params", str(gpu_params)])) == 8


def test_set_override_reaches_both_launchers(gpu_params: Path) -> None:
    sets = ["--set", "launchers.thread.world=8", "--set", "launchers.proc.world=4"]
    assert worlds(str(gpu_params), ["launchers.thread.world=8", "launchers.proc.world=4"]) == {
        "thread": 8,
        "proc": 4,
    }
    assert nproc(proc_command(["proc", "--params", str(gpu_params), *sets])) == 4


def test_dvc_exp_run_set_reaches_both_launchers(gpu_params: Path) -> None:
    """`dvc exp run -S` edits params.yaml through dvc.utils.hydra.apply_overrides (real DVC)."""
    from dvc.utils.hydra import apply_overrides

    apply_overrides(str(gpu_params), ["launchers.thread.world=8", "launchers.proc.world=8"])
    assert worlds(str(gpu_params), []) == {"thread": 8, "proc": 8}
    assert nproc(proc_command(["proc", "--params", str(gpu_params)])) == 8


def test_a_profile_cannot_shadow_the_world(gpu_params: Path) -> None:
    text = gpu_params.read_text().replace(
        "    export:\n      dtype: bf16",
        "    launchers:\n      proc:\n        world: 1\n    export:\n      dtype: bf16",
    )
    gpu_params.write_text(text)
    with pytest.raises(ValidationError, match=r"profiles\.gpu\.launchers\.proc\.world: a profile may not"):
        worlds(str(gpu_params), [])


def test_config_set_refuses_a_key_the_profile_shadows(gpu_params: Path) -> None:
    """The general case of the old bug: `config set` of a value the active profile overrides."""
    before = gpu_params.read_text()
    with pytest.raises(
        ValidationError, match=r"train\.steps: the active profile sets it \(profiles\.gpu\.train\.steps=\d+\)"
    ):
        set_in_file(gpu_params, ["train.steps=20"])
    assert gpu_params.read_text() == before
    set_in_file(gpu_params, ["profiles.gpu.train.steps=123"])
    assert "steps: 123" in gpu_params.read_text()


def test_a_world_cannot_inject_a_shell_command(tmp_path: Path) -> None:
    bad = tmp_path / "params.yaml"
    marker = tmp_path / "INJECTED"
    text = PARAMS.read_text()
    bad.write_text(text.replace("  proc:\n    world: 2", f'  proc:\n    world: "2 --help; touch {marker}"'))
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.train", "proc", "--params", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "RANK"},
    )
    assert proc.returncode == 2, proc.stderr
    assert "launchers.proc.world" in proc.stderr and not marker.exists()


def tiny_gpu_profile_sets() -> list[str]:
    """The tiny config on CPU, on top of the GPU profile (which a CPU box cannot run as is)."""
    sets = [f"model.{k}={v}" for k, v in TINY_MODEL.items()]
    sets += [
        f"train.{k}={v}" for k, v in {**TINY_TRAIN, "steps": 4, "eval_every": 4, "ckpt_every": 4}.items()
    ]
    sets += ["train.device=cpu", "train.precision=fp32", "train.fused_adamw=false", f"seed={TINY_SEED}"]
    return [a for s in sets for a in ("--set", s)]


@pytest.mark.ddp
@pytest.mark.xdist_group("ddp")
@pytest.mark.parametrize("launcher", ["thread", "proc"])
def test_the_stage_runs_at_the_world_config_set_wrote(
    launcher: str, gpu_params: Path, tiny_data: TinyData, tmp_path: Path
) -> None:
    """The real stage command (`python -m pipeline.train <launcher>`, as dvc.yaml runs it) under the
    GPU profile trains at the world `config set` wrote: metrics.json says so."""
    set_in_file(gpu_params, [f"launchers.{launcher}.world=4"])
    run_dir = tmp_path / "run"
    args = ["--params", str(gpu_params), *tiny_gpu_profile_sets()]
    args += [
        "--tokens",
        str(tiny_data.tokens),
        "--tokenizer",
        str(tiny_data.tokenizer),
        "--run-dir",
        str(run_dir),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.train", launcher, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "RANK"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((run_dir / "metrics.json").read_text())["world"] == 4
