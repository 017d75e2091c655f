"""params/project.py's exact lines under mutation (docs/judge-mutation.md), in-process.

Which file a refusal names, its rule and next step, where our pipeline's file is resolved (its active
profile applied) and what a stage may override: each asserted as the whole line a user reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_judge_params_project import refusal, write

from conftest import PARAMS
from params import project
from params.project import HINT, load_judging, load_sections

HARNESS = yaml.safe_load(PARAMS.read_text())


@pytest.fixture()
def gpu_file(tmp_path: Path) -> Path:
    """Our pipeline's params.yaml with the gpu profile active (the profile changes train.device)."""
    return write(tmp_path, {**HARNESS, "profile": "gpu"}, "ours.yaml")


@pytest.mark.parametrize("load", [load_judging, lambda p: load_sections(p, [], ("data",))])
def test_a_missing_file_names_it_and_the_next_step(tmp_path: Path, load) -> None:
    path = tmp_path / "absent.yaml"
    assert HINT == "run from the repository root or pass --params"
    assert refusal(load, path) == f"{path}: file not found; next: {HINT}"


def test_our_pipelines_file_is_resolved_with_its_active_profile(gpu_file: Path) -> None:
    for p in (load_judging(gpu_file), load_sections(gpu_file, [], ("data",))):
        assert p.raw["train"]["device"] == "cuda" and p.raw["model"]["dim"] == 384
        assert p.source == str(gpu_file) and p.defaults == ()


def test_our_pipelines_file_refusals_name_it(gpu_file: Path) -> None:
    text = refusal(load_sections, gpu_file, ["train.nope=1"], ("data",))
    assert text.startswith(f"{gpu_file} (--set train.nope=1): train.nope: unknown key")
    raw = {**HARNESS, "train": {**HARNESS["train"], "steps": 0}}
    for load in (load_judging, lambda p: load_sections(p, [], ("data",))):
        assert refusal(load, write(gpu_file.parent, raw, "bad.yaml")).startswith(
            f"{gpu_file.parent / 'bad.yaml'}: train.steps: "
        )


@pytest.fixture()
def own(tmp_path: Path) -> Path:
    return write(tmp_path, {"data": HARNESS["data"], "tokenizer": HARNESS["tokenizer"], "mine": 1})


def test_an_override_of_a_section_no_stage_reads_names_every_section(own: Path) -> None:
    assert refusal(load_sections, own, ["mine=2"], ("data", "tokenizer")) == (
        f"{own} (--set mine=2): mine: not read by this stage (rule: one of data, tokenizer)"
    )


def test_an_unknown_key_in_a_read_section_names_the_override(own: Path) -> None:
    assert refusal(load_sections, own, ["data.nope=1"], ("data",)) == (
        f"{own} (--set data.nope=1): data.nope: unknown key"
        " (rule: known keys: path, shakespeare, source, val_fraction)"
    )


@pytest.mark.parametrize(
    ("section", "value", "line"),
    [
        ("data", float("nan"), "data: nan is not a finite number (rule: a finite number)"),
        ("tokenizer", float("inf"), "tokenizer: inf is not a finite number (rule: a finite number)"),
        ("data", [1], "data: [1] is invalid (rule: type object)"),
    ],
)
def test_a_whole_section_refused_is_named_by_the_section(
    tmp_path: Path, section: str, value, line: str
) -> None:
    path = write(tmp_path, {section: value})
    assert refusal(load_sections, path, [], (section,)) == f"{path}: {line}"


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        (
            "val_fraction",
            float("inf"),
            "data.val_fraction: inf is not a finite number (rule: a finite number)",
        ),
        ("val_fraction", 0.6, "data.val_fraction: 0.6 is invalid (rule: <= 0.5)"),
        ("val_fraction", 0.5, None),
        ("source", "web", 'data.source: "web" is invalid (rule: one of "shakespeare", "file")'),
    ],
)
def test_a_key_of_a_section_is_refused_with_its_rule(tmp_path: Path, key: str, value, line) -> None:
    path = write(tmp_path, {"data": {**HARNESS["data"], key: value}})
    if line is None:
        assert load_sections(path, [], ("data",)).raw["data"][key] == value
    else:
        assert refusal(load_sections, path, [], ("data",)) == f"{path}: {line}"


def test_a_strict_integer_is_refused_as_a_float(tmp_path: Path) -> None:
    path = write(tmp_path, {"tokenizer": {**HARNESS["tokenizer"], "vocab_size": 512.0}})
    assert refusal(load_sections, path, [], ("tokenizer",)).startswith(
        f"{path}: tokenizer.vocab_size: 512.0 is a float, not an integer (write 512)"
    )


def test_without_the_harness_the_whole_line_names_rule_and_next_step(tmp_path: Path, monkeypatch) -> None:
    absent = tmp_path / "absent.yaml"
    monkeypatch.setattr(project, "HARNESS_PARAMS", absent)
    path = write(tmp_path, {"gates": {}})
    assert refusal(load_judging, path) == (
        f"{path}: gates.loss_match: missing required key (rule: a required key)"
        f"; next: set it: no defaults here ({absent} is missing)"
    )
