"""xtrain.core.determinism sets torch's deterministic-kernel flag without importing torch._dynamo.

torch.use_deterministic_algorithms also sets inductor's flag, and importing inductor's config imports
dynamo: ~3 CPU-s per process on a 2-core Xeon, as much again as `import torch`. The env stage (run on
every `dvc repro`) paid it for nothing; a compiled model gets inductor's flag from compile_module.
One process answers every question below, in an order where each answer is still unspoiled.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, code_first

PROBE = """
import json, sys, torch
from xtrain.core.determinism import compile_module, configure

def state():
    return [torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
            "torch._dynamo" in sys.modules]

seen = {}
configure(True, "cpu"); seen["configure(True)"] = state()
configure(False, "cpu"); seen["configure(False)"] = state()
torch.use_deterministic_algorithms(False); seen["public call"] = state()
configure(True, "cpu")
compile_module(torch.nn.Linear(2, 2), "default")
import torch._inductor.config as inductor
seen["compiled"] = inductor.deterministic
configure(False, "cpu"); seen["compiled, then configure(False)"] = [inductor.deterministic, *state()]
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def seen() -> dict[str, list]:
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=code_first(REPO), capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_configure_sets_the_flag_strictly_and_leaves_dynamo_unimported(seen: dict[str, list]) -> None:
    assert seen["configure(True)"] == [True, False, False]
    assert seen["configure(False)"] == [False, False, False]


def test_the_public_call_imports_dynamo_the_cost_configure_avoids(seen: dict[str, list]) -> None:
    """Negative control: had configure called torch.use_deterministic_algorithms, dynamo would be in
    sys.modules above (the day torch stops importing it there, this says the helper can go)."""
    assert seen["public call"] == [False, False, True]


def test_a_compiled_model_gets_inductors_flag_in_step_with_the_kernels(seen: dict[str, list]) -> None:
    assert seen["compiled"] is True
    assert seen["compiled, then configure(False)"] == [False, False, False, True]
