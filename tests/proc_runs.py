"""Real torchrun runs of the tiny config on CPU (gloo), each made once per session and shared by the
DDP tests that only read them (tests/process/test_launchers.py, test_ddp_gate.py, test_launcher_parity.py,
test_cuda.py): a world-2 start costs ~10 CPU s on 2 cores, most of it three processes importing torch.

A run is keyed by what makes it differ (world, --set overrides, bug). A bug is a logic bug of the
tests' patch layer (tests/bug_layer/xtrain_bugs.py), carried into every rank by XTRAIN_TEST_PATCH. Each is the real launcher
command (`python -m pipeline.train proc` under torchrun) with NCCL_DEBUG=INFO, so its output shows
whether NCCL ran (test_cuda's negative control reads it).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bug_layer import xtrain_bugs as bugs
from conftest import REPO, TinyData, tiny_cli
from xtrain.core.launch_plan import torchrun_cmd


@dataclass(frozen=True)
class ProcRun:
    metrics: dict
    output: str  # stdout + stderr of torchrun and its ranks


class ProcRuns:
    """torchrun runs made on first use and kept for the session."""

    def __init__(self, data: TinyData, root: Path) -> None:
        self.data, self.root = data, root
        self._cache: dict[tuple, ProcRun] = {}

    def get(self, world: int, *sets: str, bug: str = "", timeout: float = 240) -> ProcRun:
        key = (world, sets, bug)
        if key not in self._cache:
            self._cache[key] = self._launch(world, sets, bug, timeout)
        return self._cache[key]

    def _launch(self, world: int, sets: tuple[str, ...], bug: str, timeout: float) -> ProcRun:
        run_dir = self.root / f"run{len(self._cache)}"
        cmd = torchrun_cmd(world, "pipeline.train", "proc", *tiny_cli(self.data, run_dir, *sets))
        env = {k: v for k, v in os.environ.items() if k not in ("XTRAIN_FAULT", bugs.ENV)}
        env["NCCL_DEBUG"] = "INFO"
        if bug:
            env = bugs.bug_env(bug, env)
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return ProcRun(json.loads((run_dir / "metrics.json").read_text()), proc.stdout + proc.stderr)
