"""`ci/test.sh --quick`: install as ci/test.sh does, then only the unit tier (tests/unit), same xdist flags.

The real script runs in a copy of ci/ whose installer, browser installer and environment runner are
stubs that log what they were asked: what is under test is the script's choice of steps and of
pytest's arguments. The control: plain `ci/test.sh` (what .ci/run runs) stays the whole suite.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

STUB = '#!/usr/bin/env bash\necho "{name} $*" >> "$(dirname "$0")/../calls.log"\n'


def ci_test(tmp_path: Path, *args: str) -> list[str]:
    (tmp_path / "ci").mkdir(exist_ok=True)
    shutil.copy2(REPO / "ci" / "test.sh", tmp_path / "ci" / "test.sh")
    for name in ("setup.sh", "browser.sh", "in-env.sh"):
        (tmp_path / "ci" / name).write_text(STUB.format(name=name))
        (tmp_path / "ci" / name).chmod(0o755)
    (tmp_path / "calls.log").unlink(missing_ok=True)
    subprocess.run(["bash", str(tmp_path / "ci" / "test.sh"), *args], check=True, capture_output=True)
    return (tmp_path / "calls.log").read_text().splitlines()


PYTEST = "in-env.sh python3 -m pytest -n auto --dist loadgroup"


@pytest.mark.parametrize(
    ("args", "calls"),
    [
        ((), ["setup.sh ", "browser.sh ", PYTEST]),  # the control: the whole suite, as .ci/run runs it
        (("--quick",), ["setup.sh ", f"{PYTEST} tests/unit"]),
        (("--quick", "-x", "-k", "a b"), ["setup.sh ", f"{PYTEST} tests/unit -x -k a b"]),
        (("-x", "--quick"), ["setup.sh ", f"{PYTEST} tests/unit -x"]),
        (
            ("-x", "tests/process/test_lock.py"),
            ["setup.sh ", "browser.sh ", f"{PYTEST} -x tests/process/test_lock.py"],
        ),
    ],
)
def test_quick_runs_the_unit_tier_after_the_install(
    tmp_path: Path, args: tuple[str, ...], calls: list[str]
) -> None:
    assert ci_test(tmp_path, *args) == calls


def test_ci_run_calls_exactly_ci_test_sh() -> None:
    lines = [
        line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")
    ]
    assert lines[-1] == "ci/test.sh"
