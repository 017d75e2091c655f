"""contracts/checkpoint_dir.py in-process (issue #37): the `latest` pointer names one step folder of
its own checkpoints/ and nothing else; a checkpoint is found from a checkpoint, a checkpoints/ or a
run folder, or the error says where none was."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.checkpoint_dir import CheckpointDir, CheckpointNotFound, pointed, resolve_checkpoint
from contracts.validate import ValidationError

RULE = (
    "(rule: one step_NNNNNN folder inside this checkpoints/ (no path, no symbolic link)); next: write the "
    "name of an intact step_NNNNNN folder into it, or train without --resume"
)


def latest(root: Path, data: bytes | str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    pointer = root / "latest"
    pointer.write_bytes(data.encode() if isinstance(data, str) else data)
    return pointer


def step(root: Path, name: str, state: bool = True) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    if state:
        (folder / "state.json").write_text("{}")
    return folder


# ---- pointed -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["step_000012", "step_000012\n", "  step_000012 \n", "step_0000012\n"])
def test_pointed_names_a_step_folder_of_this_root(tmp_path: Path, text: str) -> None:
    pointer = latest(tmp_path, text)
    assert pointed(tmp_path, pointer) == tmp_path / text.strip()  # it need not exist yet


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        ("step_00012", "'step_00012'"),
        ("../step_000012", "'../step_000012'"),
        ("/abs/step_000012", "'/abs/step_000012'"),
        ("step_000012/..", "'step_000012/..'"),
        ("xstep_000012", "'xstep_000012'"),
        ("step_00001a", "'step_00001a'"),
        ("STEP_000012", "'STEP_000012'"),
        ("", "''"),
        ("step_000012\nstep_000013", "'step_000012\\nstep_000013'"),
        (b"step_\xff00001", "'step_\ufffd00001'"),
        ("a" * 100, repr("a" * 80)),
    ],
)
def test_pointed_refuses_anything_else(tmp_path: Path, data: str | bytes, shown: str) -> None:
    pointer = latest(tmp_path, data)
    with pytest.raises(ValidationError) as e:
        pointed(tmp_path, pointer)
    assert str(e.value) == f"{pointer}: names {shown}, not a checkpoint folder of this run {RULE}"
    assert e.value.exit_code == 2


def test_pointed_refuses_a_step_folder_that_is_a_link(tmp_path: Path) -> None:
    elsewhere = step(tmp_path / "other", "step_000001")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "step_000001").symlink_to(elsewhere)
    pointer = latest(tmp_path / "ckpt", "step_000001\n")
    with pytest.raises(ValidationError) as e:
        pointed(tmp_path / "ckpt", pointer)
    assert str(e.value) == f"{pointer}: names 'step_000001', not a checkpoint folder of this run {RULE}"


# ---- CheckpointDir.latest and resolve_checkpoint ----------------------------------------------------


def test_latest_only_a_complete_step(tmp_path: Path) -> None:
    ckpts = CheckpointDir(tmp_path, keep=2)
    assert ckpts.latest() is None  # no pointer
    latest(tmp_path, "step_000003\n")
    assert ckpts.latest() is None  # the folder it names is absent
    step(tmp_path, "step_000003", state=False)
    assert ckpts.latest() is None  # no state.json yet
    (tmp_path / "step_000003" / "state.json").write_text("{}")
    assert ckpts.latest() == tmp_path / "step_000003"


def test_resolve_a_checkpoint_folder_itself(tmp_path: Path) -> None:
    folder = step(tmp_path, "anything")
    assert resolve_checkpoint(folder) == folder
    assert resolve_checkpoint(str(folder)) == folder


def test_resolve_from_a_run_or_its_checkpoints(tmp_path: Path) -> None:
    run = tmp_path / "run"
    target = step(run / "checkpoints", "step_000006")
    latest(run / "checkpoints", "step_000006\n")
    assert resolve_checkpoint(run) == target
    assert resolve_checkpoint(str(run / "checkpoints")) == target


def test_resolve_prefers_the_runs_checkpoints(tmp_path: Path) -> None:
    run = tmp_path / "run"
    own = step(run, "step_000001")
    latest(run, "step_000001\n")
    assert resolve_checkpoint(run) == own  # the folder's own pointer, when checkpoints/ has none
    target = step(run / "checkpoints", "step_000002")
    latest(run / "checkpoints", "step_000002\n")
    assert resolve_checkpoint(run) == target


def test_resolve_falls_back_when_checkpoints_latest_is_incomplete(tmp_path: Path) -> None:
    run = tmp_path / "run"
    step(run / "checkpoints", "step_000002", state=False)
    latest(run / "checkpoints", "step_000002\n")
    own = step(run, "step_000001")
    latest(run, "step_000001\n")
    assert resolve_checkpoint(run) == own


@pytest.mark.parametrize("incomplete", [False, True])
def test_resolve_nothing_names_the_path(tmp_path: Path, incomplete: bool) -> None:
    run = tmp_path / "run"
    run.mkdir()
    if incomplete:
        step(run / "checkpoints", "step_000004", state=False)
        latest(run / "checkpoints", "step_000004\n")
    with pytest.raises(CheckpointNotFound) as e:
        resolve_checkpoint(str(run))
    assert str(e.value) == f"{run}: no checkpoint here (expected state.json, or checkpoints/latest)"
    assert e.value.exit_code == 2 and isinstance(e.value, FileNotFoundError)


@pytest.mark.parametrize(
    ("keep", "left"),
    [
        (2, ["step_000002", "step_000003"]),
        (1, ["step_000003"]),
        (5, ["step_000001", "step_000002", "step_000003"]),
    ],
)
def test_commit_points_latest_at_the_step_and_keeps_the_last(
    tmp_path: Path, keep: int, left: list[str]
) -> None:
    ckpts = CheckpointDir(str(tmp_path), keep=keep)
    assert ckpts.root == tmp_path and ckpts.path(3) == tmp_path / "step_000003"
    assert CheckpointDir(tmp_path, 1).path(1234567) == tmp_path / "step_1234567"
    for n in (1, 2, 3):
        step(tmp_path, f"step_{n:06d}")
    (tmp_path / "step_000009.txt").write_text("a file, not a step folder: kept")
    ckpts.commit(3)
    assert (tmp_path / "latest").read_text() == "step_000003\n"
    assert sorted(p.name for p in tmp_path.glob("step_*") if p.is_dir()) == left
    assert (tmp_path / "step_000009.txt").is_file()


def test_commit_survives_an_old_step_it_cannot_remove(tmp_path: Path) -> None:
    kept = step(tmp_path / "elsewhere", "mine")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "step_000001").symlink_to(kept)  # rmtree refuses a link: pruning is best effort
    step(tmp_path / "ckpt", "step_000002")
    CheckpointDir(tmp_path / "ckpt", keep=1).commit(2)
    assert (tmp_path / "ckpt" / "latest").read_text() == "step_000002\n"
    assert (tmp_path / "ckpt" / "step_000001").is_symlink() and (kept / "state.json").is_file()
