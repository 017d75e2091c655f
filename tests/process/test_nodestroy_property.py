"""Property: whatever the target is, a whole-output write either swaps in the new output (the target was
absent, empty or a previous output of the same kind) or is refused with the whole tree byte-unchanged
(contracts/outputs.py). Hypothesis draws the target; the expected outcome is derived independently.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_nodestroy_outputs import tree

from contracts import outputs

FOLDER_TARGETS = ("absent", "empty dir", "foreign dir", "file", "symlink out", "same kind", "other kind")
FILE_TARGETS = ("absent", "empty file", "foreign file", "dir", "symlink out", "same kind")
RUN_MARKER = '{\n  "kind": "run"\n}\n'
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_folder_target(root: Path, what: str, names: list[str]) -> Path:
    target = root / "ws" / "out"
    (root / "outside").mkdir()
    (root / "outside" / "precious.txt").write_text("not ours\n")
    if what == "absent":
        return target
    if what == "symlink out":
        target.symlink_to(root / "outside")
    elif what == "file":
        target.write_text("a file\n")
    else:
        target.mkdir()
        if what == "same kind":
            (target / outputs.MARKER).write_text(RUN_MARKER)
        elif what == "other kind":
            (target / outputs.MARKER).write_text('{"kind": "export"}')
        for name in names if what != "empty dir" else []:
            (target / name).write_text(f"{name}\n")
    return target


def swap_allowed(what: str, names: list[str]) -> bool:
    """A folder holding only run output names is a run from before markers (contracts/outputs.py)."""
    legacy_run = what == "foreign dir" and set(names) <= set(outputs.RUN_OUTPUTS)
    return what in ("absent", "empty dir", "same kind") or legacy_run


@SETTINGS
@given(
    what=st.sampled_from(FOLDER_TARGETS),
    names=st.lists(st.sampled_from(["a.txt", "metrics.json", "notes", "z.bin"]), min_size=1, unique=True),
)
def test_a_folder_write_swaps_or_changes_nothing(what: str, names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "ws").mkdir()
        target = make_folder_target(root, what, names)
        before = tree(root)
        try:
            with outputs.staged_folder(target, outputs.RUN) as tmp:
                (tmp / "new.txt").write_text("new\n")
        except outputs.OutputRefused as e:
            assert not swap_allowed(what, names), e
            assert str(target) in str(e) and "\n" not in str(e)
            assert tree(root) == before
            return
        assert swap_allowed(what, names), f"{what} {names} was replaced"
        assert sorted(os.listdir(target)) == sorted([outputs.MARKER, "new.txt"])
        assert sorted(os.listdir(root / "ws")) == ["out"]  # no staging or trash left beside it
        assert (root / "outside" / "precious.txt").read_text() == "not ours\n"


@SETTINGS
@given(what=st.sampled_from(FILE_TARGETS), foreign=st.binary(min_size=1, max_size=64))
def test_a_report_write_replaces_only_a_previous_report(what: str, foreign: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "outside").mkdir()
        target = root / "gates.md"
        if what == "empty file":
            target.write_bytes(b"")
        elif what == "foreign file":
            target.write_bytes(b"# mine\n" + foreign)
        elif what == "dir":
            target.mkdir()
            (target / "keep").write_bytes(foreign)
        elif what == "symlink out":
            target.symlink_to(root / "outside" / "x.md")
        elif what == "same kind":
            target.write_bytes(b"## xtrain-gates: old verdict\n" + foreign)
        before = tree(root)
        try:
            outputs.write_file(target, "## xtrain-gates: new\n", outputs.MARKDOWN_REPORT)
        except outputs.OutputRefused:
            assert what in ("foreign file", "dir", "symlink out")
            assert tree(root) == before
            return
        assert what in ("absent", "empty file", "same kind")
        assert target.read_text() == "## xtrain-gates: new\n"


@pytest.mark.parametrize("where", ["cwd", "parent of cwd"])
def test_the_working_directory_is_never_a_target(tmp_path: Path, monkeypatch, where: str) -> None:
    """Even holding a forged same-kind marker: a folder above the command is never replaced."""
    (tmp_path / "sub").mkdir()
    (tmp_path / outputs.MARKER).write_text(RUN_MARKER)
    (tmp_path / "sub" / outputs.MARKER).write_text(RUN_MARKER)
    monkeypatch.chdir(tmp_path / "sub")
    target = tmp_path / "sub" if where == "cwd" else tmp_path
    with pytest.raises(outputs.OutputRefused, match="working directory or a folder above it"):
        outputs.check(target, outputs.RUN)
