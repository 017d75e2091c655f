"""The GPU tests' training runs, each made once per session and shared (tests/gpu/test_cuda.py and
tests/gpu/test_ddp_gate_cuda.py): the nightly's GPU smoke step was ~100 s, most of it process starts
for runs several tests could read.

Every run trains the tiny config with dropout (so the dropout-mask fingerprints are exercised) in
bf16 with fused AdamW. Launched runs are real subprocesses (the thread launcher's CLI, a real
torchrun) with NCCL_DEBUG=INFO, so their output shows whether NCCL ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bug_layer import xtrain_bugs as bugs
from conftest import REPO, TinyData, tiny_cli, tiny_spec
from xtrain.core.launch import run_single, run_threads
from xtrain.core.launch_plan import torchrun_cmd

LAUNCH_MODULE = "pipeline.train"  # the launchers' command line
CUDA = {"device": "cuda", "precision": "bf16", "fused_adamw": True, "steps": 12}
DROPOUT = {"dropout": 0.1, "attn_dropout": 0.1}
CUDA_SETS = (
    *(f"model.{k}={v}" for k, v in DROPOUT.items()),
    "train.device=cuda",
    "train.precision=bf16",
    "train.fused_adamw=true",
    "train.cpu_threads=1",  # as tiny_spec: the gate refuses runs of different config hashes
)


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@dataclass
class Launched:
    output: str  # stdout + stderr of the launcher
    metrics: dict


def launch(
    data: TinyData, launcher: str, run_dir: Path, world: int, *, cuda: bool = True, fault: str = ""
) -> Launched:
    """The real launcher command (thread CLI or torchrun), NCCL_DEBUG=INFO, optionally a bug
    (tests/bug_layer/xtrain_bugs.py, in every process of the run)."""
    args = tiny_cli(data, run_dir, *(CUDA_SETS if cuda else ()))
    if launcher == "thread":
        cmd = [sys.executable, "-m", LAUNCH_MODULE, "thread", "--world", str(world), *args]
    else:
        cmd = torchrun_cmd(world, LAUNCH_MODULE, "proc", *args)
    env = {k: v for k, v in os.environ.items() if k not in ("XTRAIN_FAULT", bugs.ENV)}
    env = {**(bugs.bug_env(fault, env) if fault else env), "NCCL_DEBUG": "INFO"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Launched(proc.stdout + proc.stderr, metrics(run_dir))


class CudaRuns:
    """Runs made on first use and kept for the session (keyed by what makes them differ)."""

    def __init__(self, data: TinyData, root: Path) -> None:
        self.data, self.root = data, root
        self._cache: dict[tuple, object] = {}
        self._fresh = 0

    def _dir(self, *key: object) -> Path:
        path = self.root / "-".join(str(k) for k in key if k != "")
        path.mkdir(parents=True, exist_ok=True)
        return path

    def single(self, again: bool = False) -> dict:
        """A single-device run in this process; `again` makes a second, independent one."""
        key = ("single", again)
        if key not in self._cache:
            run_dir = self._dir(*key)
            run_single(tiny_spec(self.data, run_dir=run_dir, model=DROPOUT, train=CUDA))
            self._cache[key] = metrics(run_dir)
        return self._cache[key]  # type: ignore[return-value]

    def launched(self, launcher: str, world: int, fault: str = "") -> Launched:
        key = ("launched", launcher, world, fault)
        if key not in self._cache:
            self._cache[key] = launch(self.data, launcher, self._dir(*key), world, fault=fault)
        return self._cache[key]  # type: ignore[return-value]

    def threads(self, world: int) -> dict:
        """A thread-launcher run in this process (bugs injected by the caller are not cached)."""
        self._fresh += 1
        run_dir = self._dir("threads", world, self._fresh)
        run_threads(
            tiny_spec(self.data, launcher="thread", run_dir=run_dir, model=DROPOUT, train=CUDA), world, 120
        )
        return metrics(run_dir)
