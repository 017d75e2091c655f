"""Environment identity: the env_id changes exactly when something that selects kernels changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO
from contracts.validate import ValidationError, load_schema, validate
from xtrain.core.env import ENV_ID, cpu_info, fingerprint

CPU = torch.device("cpu")

# The two machines: one /proc/cpuinfo model string, one with AMX and AVX-512 BF16/FP16.
ZEN = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
flags\t\t: fpu sse4_1 sse4_2 avx f16c fma avx2 avx512f avx512dq avx512bw avx512vl avx512_vnni ibrs

processor\t: 1
flags\t\t: something else entirely
"""
AMX = ZEN.replace("avx512_vnni ibrs", "avx512_vnni avx512_bf16 avx512_fp16 avx_vnni amx_bf16 amx_tile ibrs")


def test_env_id_is_path_safe_and_names_the_machine() -> None:
    env = fingerprint(CPU, 2, "fp32", ZEN)
    assert ENV_ID.match(env["env_id"])
    assert env["env_id"].startswith("cpu-x86-64-intel-r-xeon-r-platinum-8480-")
    assert env["env_id"].endswith(f"-{env['dispatch_hash']}-torch{torch.__version__}-t2")
    assert env["dispatch_facts"]["cpu"]["isa"][-1] == "avx512_vnni"  # first processor block only


def test_a_cpu_with_amx_gets_another_env_id() -> None:
    """Same model string, same torch: AMX/BF16/FP16 flags change the id (the issue's false alarm)."""
    plain, amx = fingerprint(CPU, 2, "fp32", ZEN), fingerprint(CPU, 2, "fp32", AMX)
    assert plain["env_id"] != amx["env_id"]
    assert "amx_bf16" in cpu_info(AMX)["isa"]


def test_kernel_irrelevant_facts_keep_the_env_id() -> None:
    """Determinism of the id itself, and flags outside DISPATCH_FLAGS are ignored."""
    assert fingerprint(CPU, 2, "fp32", ZEN)["env_id"] == fingerprint(CPU, 2, "fp32", ZEN)["env_id"]
    quieter = ZEN.replace(" ibrs", "")
    assert fingerprint(CPU, 2, "fp32", quieter)["env_id"] == fingerprint(CPU, 2, "fp32", ZEN)["env_id"]
    assert fingerprint(CPU, 1, "fp32", ZEN)["env_id"] != fingerprint(CPU, 2, "fp32", ZEN)["env_id"]


def _env_id_in_subprocess(**env: str) -> str:
    code = (
        "import torch, xtrain.core.env as e; print(e.fingerprint(torch.device('cpu'), 2, 'fp32')['env_id'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, **env},
    )
    return out.stdout.strip()


def test_other_torch_kernels_get_another_env_id() -> None:
    """ATEN_CPU_CAPABILITY picks other ATen kernels (docs/environments.md measures the bits moving)."""
    default = _env_id_in_subprocess()
    assert _env_id_in_subprocess(ATEN_CPU_CAPABILITY="default") != default
    assert _env_id_in_subprocess(MKL_ENABLE_INSTRUCTIONS="AVX2") != default


def test_metrics_schema_accepts_the_full_fingerprint(tmp_path: Path) -> None:
    schema = load_schema("metrics.schema.json")["properties"]["env"]
    env = json.loads(json.dumps(fingerprint(CPU, 2, "fp32")))
    validate(env, schema, "env")
    env["env_id"] = "CPU x86 (bad)"
    with pytest.raises(ValidationError, match="env_id"):
        validate(env, schema, "env")
