"""Peak memory of the current rank, for the perf.memory gate.

CUDA: torch.cuda.max_memory_allocated of the rank's device (the caching allocator's peak of live
tensors, deterministic for a given program). CPU: the process's max resident set size
(resource.getrusage), which counts the interpreter and libraries too; ranks that share a process
(the thread launcher) share one value.
"""

from __future__ import annotations

import resource
import sys
from typing import Any

import torch


def peak_bytes(device: torch.device) -> tuple[int, str]:
    """(bytes, kind) of this rank's peak memory so far."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_memory_allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024), "cpu_max_rss"  # Linux reports KiB


def peak_record(device: torch.device, per_rank: list[float], shared_process: bool) -> dict[str, Any]:
    """The metrics.json `perf.peak_memory` entry from every rank's peak (gathered on rank 0)."""
    _, kind = peak_bytes(device)
    scope = "process" if kind == "cpu_max_rss" and shared_process else "rank"
    return {
        "kind": kind,
        "scope": scope,  # process: the ranks run in one process and each reports that process's peak
        "per_rank": [{"rank": r, "bytes": int(b)} for r, b in enumerate(per_rank)],
    }
