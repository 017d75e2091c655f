"""params.yaml validation: every bad input is one line naming the file, the key and what is allowed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS, REPO
from contracts.validate import ValidationError
from params.config import load_params, resolve


@pytest.fixture()
def raw() -> dict:
    params = yaml.safe_load(PARAMS.read_text())
    params["profile"] = "cpu"  # whatever the workspace's switch says (the GPU nightly flips it)
    return params


def error_of(raw: dict, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(ValidationError) as info:
        resolve(raw, "params.yaml", overrides)
    text = str(info.value)
    assert "\n" not in text
    return text


def test_repository_params_are_valid() -> None:
    p = load_params(PARAMS, ["profile=cpu"])
    assert p["train"]["device"] == "cpu" and p["train"]["steps"] >= 1
    gpu = load_params(PARAMS, ["profile=gpu"])
    assert gpu["train"]["device"] == "cuda" and gpu["model"]["dim"] == 384


def test_unknown_key_names_the_key_and_the_known_ones(raw: dict) -> None:
    raw["model"]["dimm"] = 3
    msg = error_of(raw)
    assert msg.startswith("params.yaml: model.dimm: unknown key")
    assert "known keys:" in msg and "dim" in msg


def test_wrong_type(raw: dict) -> None:
    raw["train"]["steps"] = "many"
    msg = error_of(raw)
    assert msg.startswith("params.yaml: train.steps:") and "type integer" in msg


def test_impossible_values(raw: dict) -> None:
    raw["model"]["n_heads"] = 5
    assert f"model.n_heads: 5 does not divide model.dim={raw['model']['dim']}" in error_of(raw)
    raw["model"]["n_heads"] = 4
    raw["model"]["n_kv_heads"] = 3
    assert "model.n_kv_heads: 3 does not divide model.n_heads=4" in error_of(raw)
    raw["model"]["n_kv_heads"] = 2
    raw["train"]["seq_len"] = 10_000
    assert "train.seq_len" in error_of(raw)


def test_range_rule_is_stated(raw: dict) -> None:
    raw["model"]["dropout"] = 1.5
    msg = error_of(raw)
    assert "model.dropout" in msg and "rule: < 1" in msg


def test_overrides_go_through_the_same_validation(raw: dict) -> None:
    p = resolve(raw, "params.yaml", ("train.steps=20", "train.lr=2e-3"))
    assert p["train"]["steps"] == 20 and p["train"]["lr"] == pytest.approx(2e-3)
    assert "train.stepz: unknown key" in error_of(raw, ("train.stepz=3",))
    assert "train.steps" in error_of(raw, ("train.steps=-1",))
    assert "model.n_heads" in error_of(raw, ("model.n_heads=3",))


def test_profile_must_exist_and_its_keys_are_checked(raw: dict) -> None:
    assert "profile: 'tpu' is not defined" in error_of(raw, ("profile=tpu",))
    raw["profiles"]["gpu"]["model"]["dimm"] = 1
    assert "profiles.gpu.model" in error_of(raw) and "dimm" in error_of(raw)


def test_bf16_needs_cuda(raw: dict) -> None:
    assert "train.precision: bf16 needs train.device=cuda" in error_of(raw, ("train.precision=bf16",))


def test_world_must_divide_the_batch(raw: dict) -> None:
    assert "launchers.thread.world" in error_of(raw, ("launchers.thread.world=3",))


def test_broken_yaml_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "params.yaml"
    f.write_text("seed: 1\nmodel: [unclosed\n")
    with pytest.raises(ValidationError, match=r"params.yaml: line \d+: not valid YAML"):
        load_params(f)


def test_stage_cli_prints_one_line_and_exits_2(tmp_path: Path, raw: dict) -> None:
    raw["model"]["n_kv_heads"] = 3
    f = tmp_path / "params.yaml"
    f.write_text(yaml.safe_dump(raw))
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.train", "single", "--params", str(f)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{f}: model.n_kv_heads" in lines[0], proc.stderr


@pytest.mark.parametrize(
    ("section", "key", "value", "expected"),
    [
        ("train", "lr", float("nan"), "train.lr: nan is not a finite number"),
        ("train", "min_lr", float("-inf"), "train.min_lr: -inf is not a finite number"),
        ("model", "norm_eps", float("inf"), "model.norm_eps: inf is not a finite number"),
        ("train", "steps", 160.0, "train.steps: 160.0 is a float, not an integer (write 160)"),
        ("model", "dim", 128.0, "model.dim: 128.0 is a float, not an integer"),
        ("launchers", "timeout_s", float("nan"), "launchers.timeout_s: nan is not a finite number"),
    ],
)
def test_non_finite_numbers_and_float_integers_in_the_file_name_the_key(
    raw: dict, section: str, key: str, value: float, expected: str
) -> None:
    raw[section][key] = value
    assert expected in error_of(raw)


def test_a_profile_cannot_smuggle_a_non_finite_number(raw: dict) -> None:
    raw["profiles"]["cpu"] = {"train": {"lr": float("nan")}}
    assert "train.lr: nan is not a finite number" in error_of(raw)
    raw["profiles"]["cpu"] = {"train": {"steps": 1e2}}
    assert "steps: 100.0 is a float, not an integer" in error_of(raw)


def test_integral_ints_and_finite_floats_still_pass(raw: dict) -> None:
    """The positive control: the strict checks refuse only what they should."""
    p = resolve(raw, "params.yaml", ("train.steps=100", "train.lr=1e-3", "model.rope_theta=10000"))
    assert p["train"]["steps"] == 100 and isinstance(p["train"]["steps"], int)
    assert p["model"]["rope_theta"] == 10000  # an int is a fine number


def test_config_set_refuses_nan_and_leaves_the_file_alone(tmp_path: Path) -> None:
    f = tmp_path / "params.yaml"
    f.write_text(PARAMS.read_text())
    before = f.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.config", "--params", str(f), "set", "train.lr=nan"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"error: {f}: train.lr: nan is not a finite number (rule: a finite number)"
    )
    assert f.read_bytes() == before
