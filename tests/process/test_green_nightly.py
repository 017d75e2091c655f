"""The suite does not read the checkout's working params.yaml (issue #23 item 1).

The GPU nightly switches the very checkout it tests to `profile: gpu` and world N
(`python -m pipeline.config set profile=gpu launchers.thread.world=N launchers.proc.world=N`) and
runs the CPU suite with the GPUs hidden. Here a scratch copy of this worktree (committed, as a
clone is) gets the same switch with N = 4 on this CPU-only machine, and the params-reading part of
the suite must pass in it. The negative control runs the test that failed on the nightly
(test_each_rank_thread_gets_its_share) against the switched file itself ($XTRAIN_TEST_PARAMS): it
fails the way the nightly did. Also: the nightly's `tail` calls use `-n N` (the obsolete `tail -3`
with two files is refused by GNU tail: "option used in invalid context -- 3").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS, REPO, builds_tree_elsewhere, code_first, committed, scratch_repo

GIT = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
SWITCH = ["profile=gpu", "launchers.thread.world=4", "launchers.proc.world=4"]  # the nightly's switch, N = 4
# The params-reading part of the suite that runs in seconds: loaders, the thread launcher's spec,
# the gate CLI, the config command, the tree's params (tests/gate_tree.py), tokenizer stage.
SUBSET = [
    "tests/process/test_thread_pools.py",
    "tests/process/test_params.py",
    "tests/process/test_world_route.py",
    "tests/pipeline/test_gates.py::test_list_and_explain",
    "tests/process/test_hostile_input.py::test_a_shell_command_as_world_in_the_params_file_is_refused_before_anything_runs",
    "tests/process/test_hostile_input.py::test_the_traceback_is_there_with_xtrain_debug",
    "tests/process/test_corpus_tokenizer.py::test_tokenizer_stage_writes_tokens",
    "tests/process/test_green_nightly.py::test_the_tree_and_scratch_copies_get_the_committed_params",
]
RANK_SHARES = "tests/process/test_thread_pools.py::test_each_rank_thread_gets_its_share"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env={**os.environ, **GIT})


@pytest.fixture(scope="module")
def switched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed scratch copy whose working params.yaml the nightly's own command switched."""
    root = scratch_repo(tmp_path_factory.mktemp("switched"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "as committed")
    cmd = [sys.executable, "-m", "pipeline.config", "set", *SWITCH]
    subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    params = yaml.safe_load((root / "params.yaml").read_text())
    assert params["profile"] == "gpu" and params["launchers"]["proc"]["world"] == 4
    return root


def pytest_in(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """pytest in the scratch copy, GPUs hidden as the nightly hides them, on the copy's own code."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XTRAIN_TEST_"))}
    base = code_first(root, {**base, "CUDA_VISIBLE_DEVICES": "", **(env or {})})
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=base, timeout=900)


def test_the_params_reading_tests_pass_on_a_checkout_switched_to_gpu_world_4(switched: Path) -> None:
    out = pytest_in(switched, "-m", "not ddp", *SUBSET)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "params.yaml for the tests: git HEAD (differs from the working file)" in out.stdout
    assert re.search(r"\d+ passed", out.stdout)


def test_the_nightly_failure_comes_back_when_a_test_reads_the_switched_file(switched: Path) -> None:
    """Negative control: the same test, told to read the working (switched) file, fails as on the nightly."""
    out = pytest_in(switched, RANK_SHARES, env={"XTRAIN_TEST_PARAMS": str(switched / "params.yaml")})
    assert out.returncode == 1, out.stdout[-3000:]
    # the nightly's error (xtrain/core/launch.py), or the one-line check that now precedes it (issue #27)
    assert (
        "train.device is cuda but torch.cuda.is_available() is False" in out.stdout
        or "cuda, but no CUDA device is visible" in out.stdout
    ), out.stdout[-3000:]


def test_the_tree_and_scratch_copies_get_the_committed_params(tmp_path: Path) -> None:
    """What the gate tests' tree (gate_tree.write_params) and scratch repositories are built from."""
    from gate_tree import write_params

    want = yaml.safe_load(committed("params.yaml"))
    write_params(tmp_path)
    tree = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert tree["profile"] == "cpu" and tree["launchers"] == want["launchers"]
    assert PARAMS.read_bytes() == committed("params.yaml") and Path.cwd() == PARAMS.parent
    copy = scratch_repo(tmp_path / "copy")
    assert (copy / "params.yaml").read_bytes() == committed("params.yaml")
    assert (copy / "dvc.lock").read_bytes() == committed("dvc.lock")


OBSOLETE_TAIL = re.compile(r"\btail\s+-[0-9]")


def test_ci_scripts_give_tail_its_count_with_n(tmp_path: Path) -> None:
    scripts = sorted((REPO / "ci").glob("*.sh"))
    bad = [
        f"{s.name}:{i}"
        for s in scripts
        for i, line in enumerate(s.read_text().splitlines(), 1)
        if OBSOLETE_TAIL.search(line)
    ]
    assert scripts and not bad, f"tail -N (obsolete; refused by GNU tail with two files): {bad}"
    # what the old line did, with the real tail: the pattern above catches it, `-n 3` works
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("1\n2\n3\n4\n")
    b.write_text("x\n")
    old = subprocess.run(["tail", "-3", str(a), str(b)], capture_output=True, text=True)
    new = subprocess.run(["tail", "-n", "3", str(a), str(b)], capture_output=True, text=True)
    assert old.returncode != 0 and "invalid context" in old.stderr, old
    assert new.returncode == 0 and "2\n3\n4\n" in new.stdout, new
    assert OBSOLETE_TAIL.search('tail -3 "$ART/tests-ddp.log" "$ART/tests.log"')
    assert not OBSOLETE_TAIL.search('tail -n 3 "$ART/tests-ddp.log" "$ART/tests.log"')


class _Item:
    def __init__(self, group: str | None, fixtures: tuple[str, ...]) -> None:
        self.group, self.fixturenames = group, fixtures

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return pytest.mark.xdist_group(self.group).mark if name == "xdist_group" and self.group else None


def test_a_test_that_would_build_the_gate_tree_outside_its_group_is_refused() -> None:
    """conftest refuses a test that uses gate_tree outside the `tree` group: in the serial DDP chain
    or on a worker of its own it builds a second tree."""
    assert builds_tree_elsewhere(_Item("ddp", ("tiny_data", "gate_tree")))  # negative controls: refused
    assert builds_tree_elsewhere(_Item(None, ("gate_tree",)))
    assert not builds_tree_elsewhere(_Item("tree", ("gate_tree",)))
    assert not builds_tree_elsewhere(_Item("ddp", ("tiny_data",)))
