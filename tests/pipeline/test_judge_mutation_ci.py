"""CI's judge-mutation step (issue #37, docs/judge-mutation.md): every mutant of a judge function
changed since the last campaign (tests/judge_mutation_baseline.json) is killed by the judge's fast
unit tests (tests/judge_mutation_tests.txt). When no judge function changed this costs a second.

The negative control plants two functions in a scratch copy, one tested and one untested: the step
fails naming the untested one's mutants, and only those.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, scratch_repo

DRIVER = "tests/judge_mutation.py"


def changed(root: Path, *tests: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(root / DRIVER), "--changed", *(("--tests", *tests) if tests else ())]
    env = {k: v for k, v in os.environ.items() if k != "MUTANT_UNDER_TEST"}  # never a mutmut run's own
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)


def test_no_mutant_of_a_changed_judge_function_survives() -> None:
    proc = changed(REPO)
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]


PROBE = """

def _judge_mutation_probe(x: int) -> int:
    return x + 1


def _judge_mutation_untested(x: int) -> int:
    return x + 1
"""
PROBE_TEST = """from gates.tolerance import _judge_mutation_probe


def test_probe() -> None:
    assert _judge_mutation_probe(1) == 2
"""


def test_an_untested_judge_function_fails_the_step_and_a_tested_one_passes(tmp_path: Path) -> None:
    """One mutmut run (~20 CPU-seconds): two new functions, one with a test that kills its mutants."""
    root = scratch_repo(tmp_path / "checkout")
    baseline = subprocess.run(
        [sys.executable, str(root / DRIVER), "--baseline"], cwd=root, capture_output=True
    )
    assert baseline.returncode == 0, baseline.stderr  # the copy's own functions: only the planted ones change
    with (root / "gates" / "tolerance.py").open("a") as f:
        f.write(PROBE)
    (root / "tests" / "unit" / "test_judge_probe.py").write_text(PROBE_TEST)
    proc = changed(root, "tests/unit/test_judge_tolerance.py", "tests/unit/test_judge_probe.py")
    assert proc.returncode == 1, proc.stdout[-8000:] + proc.stderr[-2000:]
    assert "2 changed functions, 2 with mutants" in proc.stdout
    assert "2/4 mutants caught, 2 not: gates.tolerance.x__judge_mutation_untested__mutmut_1, " in proc.stdout
    assert "no tests: gates.tolerance.x__judge_mutation_untested__mutmut_2" in proc.stdout
    assert "x__judge_mutation_probe__mutmut" not in proc.stdout.partition("mutants caught")[2]
