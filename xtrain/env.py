"""Environment fingerprint: what can change the bits a run produces.

`env_id` names the environment for per-environment goldens (Megatron-LM style): device type and
model, CPU vector ISA or CUDA capability, torch version and intra-op threads per rank. Two
machines with the same env_id are expected to train bit-identically on CPU.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from typing import Any

import torch


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.+]+", "-", text.lower()).strip("-")


def fingerprint(device: torch.device, threads_per_rank: int, precision: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "device_type": device.type,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads_per_rank": threads_per_rank,
        "precision": precision,
        "cpu_count": os.cpu_count(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            {
                "device_name": props.name,
                "capability": f"sm{props.major}{props.minor}",
                "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),
                "nccl": ".".join(map(str, torch.cuda.nccl.version()))
                if hasattr(torch.cuda, "nccl")
                else None,
                "device_count": torch.cuda.device_count(),
            }
        )
        info["env_id"] = (
            f"cuda-{_slug(props.name)}-{info['capability']}-torch{_slug(torch.__version__)}-{precision}"
        )
    else:
        info["device_name"] = platform.machine()
        info["env_id"] = (
            f"cpu-{_slug(platform.machine())}-{_slug(info['cpu_capability'])}"
            f"-torch{_slug(torch.__version__)}-t{threads_per_rank}"
        )
    return info
