"""Determinism in one place (torchtitan style): seeds, deterministic kernels, thread counts.

Randomness in xtrain is counter-based: every random draw is seeded from (run seed, purpose,
step, ...) through `derive_seed`. Nothing depends on generator state carried between steps, so
a resumed run, a recomputed block and a thread-per-rank run draw exactly what an uninterrupted
single-thread run draws.

What is bitwise and what is only within tolerance is stated in docs/determinism.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import sys
from collections.abc import Iterator

import torch

# cuBLAS needs a fixed workspace to be deterministic; it must be set before the first cuBLAS call.
CUBLAS_WORKSPACE = ":4096:8"


def derive_seed(seed: int, purpose: str, *counters: int) -> int:
    """A 63-bit seed from the run seed, a purpose tag and counters (step, micro-batch, rank...)."""
    text = f"{seed}/{purpose}/" + "/".join(str(c) for c in counters)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1


def seed_everything(seed: int) -> None:
    """Seed the global generators too, for any library code that draws from them."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:
        pass


def configure(deterministic: bool, device_type: str) -> dict[str, object]:
    """Apply the deterministic-algorithm settings; returns what was applied for the metrics file."""
    applied: dict[str, object] = {"deterministic": deterministic}
    if deterministic:
        if device_type == "cuda":
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
            applied["cublas_workspace_config"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
            # SDPA's cuDNN backend has no deterministic backward in PyTorch; flash and memory-efficient
            # attention switch to deterministic backward kernels, but only in strict mode (with
            # warn_only they warn and run the non-deterministic kernel: seen on an H200, torch 2.11).
            torch.backends.cuda.enable_cudnn_sdp(False)
            applied["sdpa_backends"] = "flash, efficient, math (cudnn off: non-deterministic backward)"
        # Strict on every device: an op without a deterministic kernel stops the run with its name
        # rather than silently moving the bits a golden's exact tier relies on.
        set_deterministic_kernels(True)
    else:
        set_deterministic_kernels(False)
    if device_type == "cuda":
        # Full fp32 matmuls for fp32 tensors: TF32 would make fp32 runs differ from CPU references.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return applied


def set_deterministic_kernels(mode: bool) -> None:
    """torch.use_deterministic_algorithms(mode) without importing torch._dynamo in eager processes.

    The public call also sets inductor's `deterministic` flag, and importing inductor's config pulls in
    dynamo: ~3 CPU-s per process on a 2-core Xeon, as much again as `import torch`, paid by every rank
    and stage. Eager kernels read only the dispatcher flag; inductor is told by `compile_module`.
    """
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:  # a torch without the private setter: the public call, whatever it costs
        torch.use_deterministic_algorithms(mode)
        return
    setter(mode, warn_only=False)
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:  # already imported (a compiled model in this process): keep it in step
        inductor.deterministic = mode


def compile_module(module: torch.nn.Module, mode: str) -> torch.nn.Module:
    """torch.compile, with inductor told the determinism setting the eager kernels run under."""
    torch.use_deterministic_algorithms(
        torch.are_deterministic_algorithms_enabled(),
        warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    return torch.compile(module, mode=mode)  # type: ignore[return-value]


def threads_per_rank(cpu_threads: int, ranks_on_host: int) -> int:
    """Intra-op threads for one rank: the host's CPU thread budget split over the ranks sharing it
    (in one process or many), so world 2 on 2 cores is 2 x 1 thread, never 2 x 2."""
    return max(1, cpu_threads // max(1, ranks_on_host))


@contextlib.contextmanager
def serial_torch() -> Iterator[None]:
    """Torch work of a thread launcher's main thread, on one thread. A thread that has run a parallel
    region keeps an idle OpenMP pool that libgomp counts against the cores; with more threads than
    cores it makes every team sleep at its barriers instead of spinning, and a one-rank thread run was
    33 % slower than the same step on the main thread (2 cores, 565 context switches per step)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def set_cpu_threads(n: int) -> None:
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
