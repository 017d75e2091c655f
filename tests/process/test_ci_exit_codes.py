"""The CI scripts read `gates check`'s exit code as docs/reports.md defines it (0 pass, 1 a gate failed,
2 error, 3 no gate failed but inconclusive).

ci/main.sh is run for real with its install and pipeline steps stubbed (ci/setup.sh and ci/in-env.sh
replaced in a scratch copy): it passes each exit code through and shares the run cache on exit 0
only. The GPU nightly judges with --strict (an inconclusive gate fails it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

IN_ENV = """#!/usr/bin/env bash
echo "$*" >> calls.txt
case "$*" in
  *"gates check"*) exit "$(cat rc)" ;;
esac
"""


def main_job(tmp_path: Path, rc: int) -> tuple[int, list[str]]:
    (tmp_path / "ci").mkdir(exist_ok=True)
    shutil.copy(REPO / "ci" / "main.sh", tmp_path / "ci" / "main.sh")
    (tmp_path / "ci" / "setup.sh").write_text("#!/usr/bin/env bash\n")
    (tmp_path / "ci" / "in-env.sh").write_text(IN_ENV)
    for f in (tmp_path / "ci").iterdir():
        f.chmod(0o755)
    (tmp_path / "rc").write_text(str(rc))
    (tmp_path / "calls.txt").unlink(missing_ok=True)
    proc = subprocess.run(["bash", "ci/main.sh", "--strict"], cwd=tmp_path, capture_output=True, text=True)
    return proc.returncode, (tmp_path / "calls.txt").read_text().splitlines()


@pytest.mark.parametrize("rc", [0, 1, 2, 3])
def test_the_main_job_passes_the_exit_code_through_and_shares_the_cache_only_on_0(
    tmp_path: Path, rc: int
) -> None:
    code, calls = main_job(tmp_path, rc)
    assert code == rc
    assert calls[:2] == ["python3 -m pipeline.repro --jobs 2", "python3 -m gates check --strict"]
    assert ("python3 -m pipeline.repro push" in calls) == (rc == 0), calls


def test_the_gpu_nightly_judges_with_strict() -> None:
    text = (REPO / "ci" / "nightly-gpu.sh").read_text()
    checks = re.findall(r"^\s*python3 -m gates check\b.*$", text, re.M)
    assert len(checks) == 2, checks  # the verdict, and the same verdict drawn
    assert all("--strict" in c for c in checks), checks
