"""The thread launcher's main thread owns no OpenMP pool, and every rank thread has its share of the
intra-op threads (xtrain.core.determinism.serial_torch). An idle pool on the main thread made libgomp
count more threads than cores and put a one-rank thread run's team to sleep at every barrier: 33 %
slower than the same step on the main thread (docs/scaling.md). Each check runs in a fresh process:
this one has run parallel regions long ago."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import PARAMS, REPO, TinyData

PRELUDE = """
import os, sys, torch
torch.set_num_threads(2)
def threads() -> int:
    return len(os.listdir("/proc/self/task"))
"""

BUILD_SPEC = (
    PRELUDE
    + """
from params.config import load_params
from xtrain.core.launch_plan import build_spec
before = threads()
build_spec(load_params(sys.argv[1], ["train.seq_len=16"]), "thread", None, sys.argv[2], sys.argv[3], False)
print(threads() - before)
"""
)

# The negative control: the same validation without serial_torch starts a pool on the main thread.
UNGUARDED = (
    PRELUDE
    + """
from xtrain.core.data import TokenData
before = threads()
TokenData.load(sys.argv[2], "cpu").require_fit(16, sys.argv[2])
torch.randn(512, 512).sum()
print(threads() - before)
"""
)

RANK_SHARES = (
    PRELUDE
    + """
from params.config import load_params
from xtrain.core.launch import run_threads
from xtrain.core.launch_plan import build_spec
spec = build_spec(load_params(sys.argv[1], ["train.cpu_threads=2"]), "thread", None, sys.argv[2], sys.argv[3], False)
shares = [run_threads(spec, w, 30, target=lambda s, c: torch.get_num_threads()) for w in (1, 2)]
print(shares, torch.get_num_threads())
"""
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="counts threads in /proc/self/task")


def run(script: str, data: TinyData) -> str:
    args = [str(PARAMS), str(data.tokens), str(data.tokenizer)]
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_validating_the_inputs_starts_no_pool_on_the_main_thread(tiny_data: TinyData) -> None:
    assert run(BUILD_SPEC, tiny_data) == "0"


def test_the_same_validation_unguarded_starts_one(tiny_data: TinyData) -> None:
    assert int(run(UNGUARDED, tiny_data)) >= 1


def test_each_rank_thread_gets_its_share(tiny_data: TinyData) -> None:
    # world 1: the rank has both threads (while the main thread has one); world 2: one each.
    # Afterwards the process setting is the last run's share.
    assert run(RANK_SHARES, tiny_data) == "[[2], [1, 1]] 1"
