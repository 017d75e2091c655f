"""params/config.py's writers under mutation (docs/judge-mutation.md), in-process.

write_with_section (bisect judges a commit's own params.yaml with the judge's `gates:`), set_in_file
and its shadowing check (`config set`), the round-trip dumper they share, and the scaling workload
view: each outcome is asserted exactly (the file written, the text kept, the line refused).
"""

from __future__ import annotations

import copy
import os
import threading
from pathlib import Path

import pytest
import yaml

import params.config
from conftest import PARAMS
from contracts import lockfile
from contracts.validate import ValidationError
from params.config import (
    Params,
    _check_edit_takes_effect,
    load_params,
    resolve,
    set_in_file,
    write_with_section,
)

SOURCE = (
    "# the head comment\nprofile: cpu   # a trailing comment\nname: 'quoted'\ngates:\n  old: 1\nseed: 3\n"
)


def refusal(call, *args) -> str:
    with pytest.raises(ValidationError) as e:
        call(*args)
    return str(e.value)


# -- write_with_section --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ({"new": 2}, "gates:\n  new: 2\n"),
        (None, "gates: null\n"),  # the round-trip writer's null, as DVC writes it (not an empty value)
        ([1, 2], "gates:\n- 1\n- 2\n"),
    ],
)
def test_write_with_section_replaces_one_section_and_keeps_the_rest(tmp_path: Path, value, line) -> None:
    src, dest = tmp_path / "src.yaml", tmp_path / "out" / "dest.yaml"
    src.write_text(SOURCE)
    write_with_section(src, dest, "gates", value)
    text = dest.read_text(encoding="utf-8")
    assert text == SOURCE.replace("gates:\n  old: 1\n", line)  # comments, quotes and order kept
    assert yaml.safe_load(text)["gates"] == value
    assert src.read_text() == SOURCE  # the source is never touched


def test_write_with_section_adds_a_missing_section_at_the_end(tmp_path: Path) -> None:
    src, dest = tmp_path / "src.yaml", tmp_path / "dest.yaml"
    src.write_text("seed: 3\n")
    write_with_section(str(src), str(dest), "gates", {"a": None})
    assert dest.read_text() == "seed: 3\ngates:\n  a: null\n"


def test_write_with_section_on_the_pinned_params_keeps_it_loadable(tmp_path: Path) -> None:
    dest = tmp_path / "params.yaml"
    gates = load_params(PARAMS).thresholds
    write_with_section(PARAMS, dest, "gates", gates)
    assert load_params(dest).raw == load_params(PARAMS).raw
    comments = [line for line in PARAMS.read_text().split("\ngates:")[0].splitlines() if "#" in line]
    written = dest.read_text().splitlines()
    assert len(comments) > 50 and all(line in written for line in comments if len(line) < 80)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- a\n- b\n", ": expected a mapping at the top level (rule: a YAML mapping)"),
        ("3\n", ": expected a mapping at the top level (rule: a YAML mapping)"),
        (
            "a: &x 1\nb: *x\n",
            ": line 1: anchor &x refused (anchors and aliases are not allowed)"
            " (rule: plain YAML, one meaning per value)",
        ),
    ],
)
def test_write_with_section_refuses_what_load_params_refuses_and_writes_nothing(
    tmp_path: Path, text: str, problem: str
) -> None:
    src, dest = tmp_path / "src.yaml", tmp_path / "dest.yaml"
    src.write_text(text)
    assert refusal(write_with_section, src, dest, "gates", {}) == f"{src}{problem}"
    assert not dest.exists()


def test_write_with_section_refuses_a_missing_source(tmp_path: Path) -> None:
    src = tmp_path / "none.yaml"
    assert refusal(write_with_section, src, tmp_path / "d.yaml", "gates", {}) == f"{src}: file not found"


# -- set_in_file and its shadowing check ---------------------------------------------------------------


@pytest.fixture()
def params_file(tmp_path: Path) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(PARAMS.read_text())
    return path


def test_set_in_file_writes_the_values_typed_and_keeps_every_comment(params_file: Path) -> None:
    before = params_file.read_text()
    set_in_file(params_file, ["train.eval_batches=3", "data.path=null", "train.lr=2e-3"])
    text = params_file.read_text()
    raw = yaml.safe_load(text)
    assert (raw["train"]["eval_batches"], raw["data"]["path"], raw["train"]["lr"]) == (3, None, 2e-3)
    assert text.count("#") == before.count("#")
    assert "  path: null" in text


def test_set_in_file_through_a_link_edits_the_file_it_names(params_file: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.yaml"
    link.symlink_to(params_file)
    set_in_file(link, ["seed=11"])
    assert link.is_symlink() and os.readlink(link) == str(params_file)
    assert load_params(params_file).raw["seed"] == 11


def test_set_in_file_switches_the_profile_and_edits_a_profile(params_file: Path) -> None:
    set_in_file(params_file, ["profile=gpu", "profiles.gpu.train.steps=50"])
    raw = yaml.safe_load(params_file.read_text())
    assert raw["profile"] == "gpu" and raw["profiles"]["gpu"]["train"]["steps"] == 50
    assert load_params(params_file).raw["train"]["steps"] == 50


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["profile=gpu", "train.steps=5"],
            "train.steps: the active profile sets it (profiles.gpu.train.steps=200)"
            " (rule: edit profiles.gpu.train.steps)",
        ),
        (
            ["train.nope=1"],
            "train.nope: unknown key (rule: known keys: ",
        ),
        (["train.steps=0"], "train.steps: "),
    ],
)
def test_set_in_file_refuses_before_touching_the_file(params_file: Path, sets, message: str) -> None:
    before = params_file.read_text()
    text = refusal(set_in_file, params_file, sets)
    assert text.startswith(f"{params_file}") and message in text
    if "unknown" in message:
        assert text.startswith(f"{params_file} (set train.nope=1): train.nope: unknown key")
    assert params_file.read_text() == before


def test_set_in_file_accepts_a_value_the_profile_sets_to_the_same(params_file: Path) -> None:
    set_in_file(params_file, ["profile=gpu"])
    set_in_file(params_file, ["train.steps=200"])  # what the profile sets: it takes effect
    assert yaml.safe_load(params_file.read_text())["train"]["steps"] == 200


# -- set_in_file under the file's lock (issue #51 item 4) ------------------------------------------------


def test_set_in_file_waits_for_another_writer_and_writes_over_what_it_wrote(
    params_file: Path, tmp_path: Path
) -> None:
    """The second writer reads the file after the first wrote it: both values are kept."""
    first = lockfile.held(params_file, "python -m pipeline.config set")

    def write_then_release() -> None:
        set_path_in_text(params_file, "seed", 41)
        first.release()

    threading.Timer(0.3, write_then_release).start()
    set_in_file(params_file, ["train.eval_batches=3"])
    raw = yaml.safe_load(params_file.read_text())
    assert (raw["seed"], raw["train"]["eval_batches"]) == (41, 3)
    assert sorted(os.listdir(tmp_path)) == ["params.yaml"]  # the lock file is gone


def set_path_in_text(path: Path, key: str, value: int) -> None:
    lines = [
        f"{key}: {value}" if line.startswith(f"{key}:") else line for line in path.read_text().split("\n")
    ]
    path.write_text("\n".join(lines))


def test_set_in_file_held_too_long_fails_naming_the_holder_and_writes_nothing(
    params_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lockfile, "WAIT_S", 0.1)
    before = params_file.read_text()
    with lockfile.held(params_file, "python -m pipeline.config set"), pytest.raises(lockfile.Busy) as e:
        set_in_file(params_file, ["seed=5"])
    assert str(e.value).startswith(
        f"{params_file}: being written by pid {os.getpid()} (python -m pipeline.config set)"
    )
    assert params_file.read_text() == before


def test_set_in_file_locks_the_file_a_link_names(
    params_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lockfile, "WAIT_S", 0.0)
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "elsewhere" / "link.yaml"
    link.symlink_to(params_file)
    with lockfile.held(params_file, "the file itself"), pytest.raises(lockfile.Busy, match="the file itself"):
        set_in_file(link, ["seed=5"])
    assert os.listdir(tmp_path / "elsewhere") == ["link.yaml"]


def test_set_in_file_writes_under_a_lock_naming_the_command(
    params_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = []
    monkeypatch.setattr(
        params.config,
        "_set_in_file",
        lambda path, o: seen.append((params_file.parent / ".params.yaml.lock").read_text()),
    )
    set_in_file(params_file, ["seed=1"])
    assert seen == [f"{os.getpid()} python -m pipeline.config set\n"]


def test_set_in_file_of_a_missing_file_names_it_and_makes_no_lock(tmp_path: Path) -> None:
    assert (
        refusal(set_in_file, tmp_path / "absent.yaml", ["seed=1"])
        == f"{tmp_path / 'absent.yaml'}: file not found"
    )
    assert os.listdir(tmp_path) == []


# -- the scaling workload ------------------------------------------------------------------------------


def test_scaling_workload_applies_the_profiles_sets() -> None:
    p = load_params(PARAMS, ["profile=cpu"])
    sets = p.raw["scaling"]["sets"]["cpu"]
    w = p.scaling_workload()
    assert w.source == f"{PARAMS} (scaling.sets.cpu)"
    assert w.raw == resolve(p.raw, "x", sets).raw and w.raw["model"]["dim"] == 128
    assert p.raw["model"]["dim"] != 128  # the gated runs' params are not changed


@pytest.mark.parametrize(
    "scaling",
    [{}, {"sets": {}}, {"sets": {"gpu": ["model.dim=8"]}}, {"sets": {"cpu": []}}],
)
def test_scaling_workload_without_sets_for_the_profile_is_the_params_themselves(scaling: dict) -> None:
    p = Params(raw={"profile": "cpu", "scaling": scaling}, source="s")
    assert p.scaling_workload() is p


def test_scaling_workload_refuses_a_bad_set_naming_where_it_came_from() -> None:
    p = load_params(PARAMS, ["profile=cpu"])
    raw = {**p.raw, "scaling": {**p.raw["scaling"], "sets": {"cpu": ["model.nope=1"]}}}
    text = refusal(Params(raw=raw, source="p.yaml").scaling_workload)
    assert text.startswith("p.yaml (scaling.sets.cpu) (--set model.nope=1): model.nope: unknown key")


def test_the_shadowing_check_leaves_the_loaded_file_as_it_was() -> None:
    raw = yaml.safe_load(PARAMS.read_text())
    before = copy.deepcopy(raw)
    _check_edit_takes_effect(raw, "p.yaml", ["train.steps=7", "profiles.gpu.train.steps=9"])
    assert raw == before


def test_a_nested_none_is_written_null_and_ruamels_own_table_is_untouched() -> None:
    """ruamel's add_representer edits the class it is called on: the writer keeps its own subclass, so
    DVC's ruamel in the same process still writes its empty nulls, and every writer starts afresh."""
    from ruamel.yaml.representer import RoundTripRepresenter

    from params.config import _dump

    assert _dump({"data": {"path": None}, "seed": None}) == "data:\n  path: null\nseed: null\n"
    assert RoundTripRepresenter.yaml_representers[type(None)] is RoundTripRepresenter.represent_none
