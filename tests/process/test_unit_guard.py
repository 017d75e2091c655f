"""The unit tier's runtime guard (tests/conftest.py, an audit hook): a unit test that starts a process
fails, naming it, even where its file imports nothing that says so (the code under test runs git).

An inner pytest runs this checkout's conftest on planted tests in a scratch folder: the same test
fails under tests/unit and passes under tests/process (the control), and a quiet unit test passes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import PARAMS, REPO

STARTS_GIT = """import importlib


def test_starts_git() -> None:
    importlib.import_module("subprocess").run(["git", "--version"], capture_output=True, check=True)


def test_quiet() -> None:
    assert sum(range(4)) == 6
"""


def inner_pytest(root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XTRAIN_TEST_"))}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rf", "tests"]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env, timeout=300)


def test_a_unit_test_that_starts_a_process_fails_and_the_same_test_in_process_passes(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    for tier in ("unit", "process"):
        (tests / tier).mkdir(parents=True)
    for helper in ("conftest.py", "hypothesis_profiles.py"):
        shutil.copy2(REPO / "tests" / helper, tests / helper)
    for rel in ("params.yaml", "dvc.lock"):  # what conftest pins (the scratch folder has no git history)
        shutil.copy2(PARAMS.parent / rel, tmp_path / rel)
    (tests / "unit" / "test_planted_unit.py").write_text(STARTS_GIT)
    (tests / "process" / "test_planted_process.py").write_text(STARTS_GIT)
    proc = inner_pytest(tmp_path)
    out = proc.stdout
    assert proc.returncode == 1, out[-4000:] + proc.stderr[-2000:]
    assert "1 failed, 3 passed" in out, out[-4000:]
    failed = [line.partition(" - ")[0] for line in out.splitlines() if line.startswith("FAILED")]
    assert failed == ["FAILED tests/unit/test_planted_unit.py::test_starts_git"], out[-4000:]
    assert (
        "a unit test started 1 process(es) (subprocess.Popen git): it belongs in tests/process/ "
        "(docs/house.md, 'Where a new test goes')"
    ) in out
