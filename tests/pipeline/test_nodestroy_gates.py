"""A run lives in its launcher's folder (issue #27, worst 9): runs/thread holding a proc run (its
metrics.json copied over thread's, dvc.lock re-recorded by real DVC so no md5 check catches it) is
exit 2 naming the file and the key, never compared as if it were a thread run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gate_tree import check, copy_tree, gate, lock_with_dvc

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]


def test_a_run_in_another_launchers_folder_is_exit_2(gate_tree: Path, tmp_path: Path) -> None:
    root = copy_tree(gate_tree, tmp_path / "tree")
    shutil.copyfile(root / "runs/proc/metrics.json", root / "runs/thread/metrics.json")
    shutil.copyfile(root / "runs/proc/loss.csv", root / "runs/thread/loss.csv")
    lock_with_dvc(root)  # the forger also re-records dvc.lock: only the placement check is left
    code, report = check(root)
    assert code == 2, [(g["id"], g["status"], g["message"]) for g in report["gates"]]
    message = gate(report, "loss_match.thread")["message"]
    assert gate(report, "loss_match.thread")["status"] == "error", message
    assert message.startswith("runs/thread/metrics.json: launcher: 'proc', but the run lives in runs/thread")


def test_each_run_in_its_own_folder_passes_the_placement_check(gate_tree: Path, tmp_path: Path) -> None:
    """Negative control: the untampered tree, re-recorded the same way, has no placement error."""
    root = copy_tree(gate_tree, tmp_path / "tree")
    lock_with_dvc(root)
    code, report = check(root)
    assert not [g for g in report["gates"] if "but the run lives in" in g["message"]]
    assert gate(report, "loss_match.thread")["status"] == "pass", gate(report, "loss_match.thread")
    assert code == 0, [(g["id"], g["status"], g["message"]) for g in report["gates"]]
