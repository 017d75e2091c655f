"""params/project.py under mutation (docs/judge-mutation.md): a project's own params file, in-process.

A file without our run sections is judged with its own `gates:` sections (each validated in full)
and the harness's for the rest, named in the report; one of our stages reads only its own sections
from it. Each refusal is its exact line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import PARAMS
from contracts.validate import ValidationError
from params import project
from params.config import load_params
from params.project import (
    HARNESS_PARAMS,
    harness_thresholds,
    load_judging,
    load_sections,
    project_thresholds,
    thresholds_source,
)

HARNESS = yaml.safe_load(PARAMS.read_text())


def write(tmp_path: Path, data, name: str = "own.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def refusal(call, *args) -> str:
    with pytest.raises(ValidationError) as e:
        call(*args)
    return str(e.value)


def test_the_harness_thresholds_are_its_params_yamls() -> None:
    assert (
        HARNESS_PARAMS.name == "params.yaml"
        and HARNESS_PARAMS.parent == Path(project.__file__).resolve().parent.parent
    )
    assert harness_thresholds() == load_params(HARNESS_PARAMS).thresholds


def test_a_project_file_takes_the_harness_sections_it_leaves_out(tmp_path: Path) -> None:
    own = {"cross_rank": {"max_abs": 1e-3}}
    params = load_judging(write(tmp_path, {"lr": 3, "gates": own}))
    assert params.raw["lr"] == 3 and params.raw["gates"]["cross_rank"] == {"max_abs": 1e-3}
    assert params.defaults == tuple(
        sorted(k for k in harness_thresholds() if k not in ("cross_rank", "scope"))
    )
    assert params.raw["gates"]["loss_match"] == harness_thresholds()["loss_match"]
    assert not params.describes_runs and params.source == str(tmp_path / "own.yaml")
    assert (
        thresholds_source(params, "own.yaml")
        == f"own.yaml (gates.{', gates.'.join(params.defaults)}: {HARNESS_PARAMS})"
    )
    nothing = load_judging(write(tmp_path, {"lr": 3}))
    harness = {k: v for k, v in harness_thresholds().items() if k != "scope"}
    assert nothing.defaults == tuple(sorted(harness)) and nothing.raw["gates"] == harness


def test_a_project_never_takes_the_harness_scope(tmp_path: Path) -> None:
    """The harness declares its own pipeline's stages (issue #51): a project that declares none is judged
    on what its dvc.yaml defines, never held to train@thread, export, pilot...; its own is its own."""
    assert "scope" in harness_thresholds() and project.OWN == ("scope",)
    assert "scope" not in load_judging(write(tmp_path, {"gates": {}})).raw["gates"]
    assert "scope" not in project_thresholds({}, "s")[1]
    own = {"scope": {"stages": ["train_single"]}}
    params = load_judging(write(tmp_path, {"gates": own}))
    assert params.raw["gates"]["scope"] == {"stages": ["train_single"]} and "scope" not in params.defaults
    bad = write(tmp_path, {"gates": {"scope": {"stages": []}}})
    assert refusal(load_judging, bad).startswith(
        f"{bad}: gates.scope.stages: [] is invalid (rule: minItems 1)"
    )


def test_our_pipelines_file_is_read_as_load_params_reads_it() -> None:
    params = load_judging(PARAMS)
    assert params.raw == load_params(PARAMS).raw and params.defaults == ()
    assert thresholds_source(params, "params.yaml") == "params.yaml"


def test_a_project_gates_section_is_validated_in_full(tmp_path: Path) -> None:
    path = write(tmp_path, {"gates": {"cross_rank": {"max_abs": -1}}})
    assert refusal(load_judging, path).startswith(f"{path}: gates.cross_rank.max_abs: -1 is invalid")
    path = write(tmp_path, {"gates": [1]})
    assert refusal(load_judging, path) == (
        f"{path}: gates: list is not a mapping (rule: gates: sections as in thresholds.schema.json)"
    )
    path = write(tmp_path, ["a"])
    assert (
        refusal(load_judging, path) == f"{path}: expected a mapping at the top level (rule: a YAML mapping)"
    )
    assert project_thresholds(None, "s")[1] == tuple(sorted(k for k in harness_thresholds() if k != "scope"))


def test_without_the_harness_a_missing_section_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(project, "HARNESS_PARAMS", tmp_path / "absent.yaml")
    assert harness_thresholds() == {}
    path = write(tmp_path, {"gates": {"cross_rank": {"max_abs": 1e-3}}})
    text = refusal(load_judging, path)
    assert text.startswith(f"{path}: gates.") and ": missing required key" in text
    assert text.endswith(f"; next: set it: no defaults here ({tmp_path / 'absent.yaml'} is missing)")
    full = {**HARNESS["gates"], "cross_rank": {"max_abs": "x"}}
    text = refusal(load_judging, write(tmp_path, {"gates": full}))
    assert "gates.cross_rank.max_abs" in text and "next: set it" not in text


def test_a_stage_reads_only_its_sections_from_a_project_file(tmp_path: Path) -> None:
    own = {"data": HARNESS["data"], "tokenizer": HARNESS["tokenizer"], "mine": 1}
    path = write(tmp_path, own)
    p = load_sections(path, ["tokenizer.vocab_size=512"], ("data", "tokenizer"))
    assert p.raw == {"data": HARNESS["data"], "tokenizer": {**HARNESS["tokenizer"], "vocab_size": 512}}
    assert p.source == str(path)
    assert refusal(load_sections, path, ["mine=2"], ("data",)) == (
        f"{path} (--set mine=2): mine: not read by this stage (rule: one of data)"
    )
    assert refusal(load_sections, write(tmp_path, {"data": HARNESS["data"]}), [], ("data", "tokenizer")) == (
        f"{tmp_path / 'own.yaml'}: tokenizer: missing required key (rule: params.schema.json tokenizer)"
    )


def test_a_stage_section_is_validated_naming_its_key(tmp_path: Path) -> None:
    bad = {"data": {**HARNESS["data"], "val_fraction": 2.0}}
    path = write(tmp_path, bad)
    assert refusal(load_sections, path, [], ("data",)).startswith(
        f"{path}: data.val_fraction: 2.0 is invalid"
    )
    path = write(tmp_path, {"data": [1]})
    assert refusal(load_sections, path, [], ("data",)).startswith(f"{path}: data: [1] is invalid")
    path = write(tmp_path, {"data": {**HARNESS["data"], "source": "file", "path": None}})
    assert refusal(load_sections, path, [], ("data",)) == (
        f"{path}: data.path: data.source is 'file' but no path is given (rule: a path to a UTF-8 text file)"
    )
    path = write(tmp_path, {"tokenizer": {**HARNESS["tokenizer"]}, "data": {"source": "file"}})
    assert load_sections(path, [], ("tokenizer",)).raw == {"tokenizer": HARNESS["tokenizer"]}


def test_our_pipelines_file_gives_a_stage_all_of_it() -> None:
    p = load_sections(PARAMS, ["seed=3"], ("data",))
    assert p.raw["seed"] == 3 and "model" in p.raw
