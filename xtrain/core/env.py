"""Environment fingerprint: what can change the bits a run produces.

`env_id` names the environment for per-environment goldens (Megatron-LM style). It is
human-readable, path-safe and exact: a readable prefix (device, CPU model or GPU name, the
kernel level torch dispatches to, torch version, threads per rank) plus an 8-hex hash over every
fact that selects a different kernel (see `dispatch_facts`). Two machines whose bits can differ
get different env_ids; the full facts are kept in metrics.json `env`.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

import torch

from contracts.machine import facts_hash, machine_facts

# ISA features that oneDNN, MKL/OpenBLAS and ATen dispatch on (x86 /proc/cpuinfo `flags`, Arm
# `Features`). A fixed list, so a kernel-irrelevant flag (a new security mitigation) keeps the id;
# extend it when a math library learns a new path. Present ones are hashed into the env_id.
DISPATCH_FLAGS = (
    # x86: SSE/AVX generations, FMA, half conversion
    "sse4_1",
    "sse4_2",
    "avx",
    "f16c",
    "fma",
    "avx2",
    # x86: AVX-512 families that change GEMM/conv/eltwise kernels
    "avx512f",
    "avx512dq",
    "avx512cd",
    "avx512bw",
    "avx512vl",
    "avx512ifma",
    "avx512vbmi",
    "avx512_vbmi2",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "avx_vnni_int8",
    "avx_ne_convert",
    # x86: AMX tiles (oneDNN bf16/int8 on Sapphire Rapids and later)
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    # Arm: NEON, half precision, dot products, SVE, bf16 and int8 matrix multiply
    "asimd",
    "asimdhp",
    "asimddp",
    "fphp",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
    "sme",
)

# Environment variables that pick other kernels or thread counts inside the math libraries.
DISPATCH_VARS = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ONEDNN_DEFAULT_FPMATH_MODE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "NVIDIA_TF32_OVERRIDE",
    "CUBLAS_WORKSPACE_CONFIG",
)

ENV_ID = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.+]+", "-", text.lower()).strip("-.+") or "unknown"


def cpu_info(cpuinfo: str | None = None) -> dict[str, Any]:
    """CPU model, vendor/family/model/stepping and the dispatch-relevant ISA flags (Linux /proc/cpuinfo)."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text(errors="replace") if path.exists() else ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if fields:  # the first processor block describes the model; cores share it
                break
            continue
        fields.setdefault(key.strip().lower(), value.strip())
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    model = fields.get("model name") or fields.get("cpu model") or platform.processor() or platform.machine()
    return {
        "model_name": model,
        "vendor": fields.get("vendor_id") or fields.get("cpu implementer", ""),
        "family": fields.get("cpu family") or fields.get("cpu architecture", ""),
        "model": fields.get("model") or fields.get("cpu part", ""),
        "stepping": fields.get("stepping") or fields.get("cpu variant", ""),
        "isa": [f for f in DISPATCH_FLAGS if f in flags],
    }


def math_libraries() -> dict[str, Any]:
    """The BLAS/LAPACK/oneDNN/OpenMP build torch was compiled with, from torch.__config__.show()."""
    shown = torch.__config__.show()
    build = dict(re.findall(r"\b(BLAS_INFO|LAPACK_INFO|USE_MKL|USE_MKLDNN|USE_OPENMP)=(\w+)", shown))
    libs = [
        line.strip(" -")
        for line in shown.splitlines()
        if re.search(r"Math Kernel Library|MKL-DNN|oneDNN|OpenMP|OpenBLAS|Accelerate|NNPACK", line)
        and "Build settings" not in line
    ]
    return {
        "build": build,
        "libraries": libs,
        "mkl": torch.backends.mkl.is_available(),
        "mkldnn": torch.backends.mkldnn.is_available(),
    }


def dispatch_vars(math: dict[str, Any]) -> dict[str, str]:
    """The set DISPATCH_VARS; OPENBLAS_CORETYPE only when torch's BLAS is OpenBLAS (else it is inert)."""
    names = list(DISPATCH_VARS)
    if "open" in math["build"].get("BLAS_INFO", "").lower():
        names.append("OPENBLAS_CORETYPE")
    return {k: os.environ[k] for k in names if k in os.environ}


def _cuda_facts(device: torch.device) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(device)
    return {
        "device_name": props.name,
        "capability": f"sm{props.major}{props.minor}",
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else None,
        "multi_processor_count": props.multi_processor_count,  # a MIG slice tunes cuBLAS differently
    }


def dispatch_hash(facts: dict[str, Any]) -> str:
    return facts_hash(facts)


def fingerprint(
    device: torch.device, threads_per_rank: int, precision: str, cpuinfo: str | None = None
) -> dict[str, Any]:
    """Everything known about the environment; `dispatch_facts` alone decides the env_id's hash.

    `cpuinfo`: the text of /proc/cpuinfo (default: read it), so another machine's CPU can be named.
    """
    cpu, math = cpu_info(cpuinfo), math_libraries()
    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_git": torch.version.git_version,
        "machine": platform.machine(),
        "cpu": cpu,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "math": math,
        "vars": dispatch_vars(math),
        "threads_per_rank": threads_per_rank,
        "precision": precision,
    }
    if device.type == "cuda":
        facts["cuda"] = _cuda_facts(device)
    digest = dispatch_hash(facts)
    torch_tag = f"torch{_slug(torch.__version__)}"
    if device.type == "cuda":
        gpu = facts["cuda"]
        env_id = f"cuda-{_slug(gpu['device_name'])}-{gpu['capability']}-{digest}-{torch_tag}-{precision}"
    else:
        env_id = (
            f"cpu-{_slug(platform.machine())}-{_slug(cpu['model_name'])}-{_slug(facts['cpu_capability'])}"
            f"-{digest}-{torch_tag}-t{threads_per_rank}"
        )
    if not ENV_ID.match(env_id):
        raise RuntimeError(f"env_id {env_id!r} is not path-safe ({ENV_ID.pattern})")
    info: dict[str, Any] = {
        "env_id": env_id,
        "dispatch_hash": digest,
        "dispatch_facts": facts,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "device_type": device.type,
        "device_name": facts["cuda"]["device_name"] if device.type == "cuda" else cpu["model_name"],
        "cpu_capability": facts["cpu_capability"],
        "threads_per_rank": threads_per_rank,
        "precision": precision,
        "cpu_count": os.cpu_count(),
    }
    if device.type == "cuda":
        info.update(facts["cuda"], device_count=torch.cuda.device_count())
    return info


def machine_record(device: torch.device, threads_per_rank: int, precision: str) -> dict[str, Any]:
    """runs/env.json: this machine's facts and the env_id a single-device run of the params gets.

    Deterministic (no clock, host name or pid): it changes only when the machine does, so the stages
    that depend on it are restored from DVC's run cache only into the environment that made them.
    """
    info = fingerprint(device, threads_per_rank, precision)
    machine = machine_facts(info["dispatch_facts"])
    return {
        "format": "xtrain-env/1",
        "machine_hash": dispatch_hash(machine),
        "machine": machine,
        "single_env_id": info["env_id"],
        "device_type": device.type,
    }
