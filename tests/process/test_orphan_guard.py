"""xtrain.core.orphan_guard, imported first by a torchrun worker of `pipeline.train`: the parent death
signal is set before torch's import, and a worker whose launcher is already gone leaves at once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO, code_first

READ_PDEATHSIG = """
import ctypes, signal, sys
import xtrain.core.orphan_guard
sig = ctypes.c_int(0)
ctypes.CDLL(None, use_errno=True).prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
print(signal.Signals(sig.value).name if sig.value else "none")
"""


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in code_first(REPO).items() if k not in ("TORCHELASTIC_RUN_ID", "LOCAL_RANK")}
    return subprocess.run([sys.executable, "-c", READ_PDEATHSIG], cwd=REPO, env={**base, **env},
                          capture_output=True, text=True, timeout=60)  # fmt: skip


WORKER = {"TORCHELASTIC_RUN_ID": "t", "LOCAL_RANK": "0"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_gets_the_parent_death_signal_before_its_imports() -> None:
    proc = run({**WORKER, "XTRAIN_LAUNCHER_PID": str(os.getpid())})
    assert (proc.returncode, proc.stdout.strip()) == (0, "SIGKILL"), proc.stderr


def test_a_worker_whose_launcher_is_gone_leaves_at_once() -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    proc = run({**WORKER, "XTRAIN_LAUNCHER_PID": gone.stdout.strip()})
    assert proc.returncode == 1 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)


def test_the_launcher_itself_is_left_alone() -> None:
    """Negative control: the same import outside a torchrun worker sets nothing."""
    proc = run({"XTRAIN_LAUNCHER_PID": "1"})
    assert (proc.returncode, proc.stdout.strip()) == (0, "none"), proc.stderr
