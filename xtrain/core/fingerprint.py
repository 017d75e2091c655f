"""32-bit hashes whose sums fingerprint a set of samples or dropout masks, exactly and order-free.

A sum of 32-bit hashes is independent of order and of how the set is split over ranks, and stays
exact in float64 for up to 2^21 terms, so per-rank sums reduced over ranks equal the single-device
sum bit for bit when (and, except with probability ~2^-32, only when) the sets are equal.
"""

from __future__ import annotations

import torch

from xtrain.core.comm import Communicator

_MASK64 = (1 << 64) - 1
MAX_TERMS = 1 << 21  # 32-bit hashes summed per step that stay exact in float64 (< 2^53)


def hash32(x: int) -> int:
    """splitmix64's finaliser, top 32 bits: neighbouring inputs give unrelated hashes."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 32


class StepLedger:
    """This rank's per-step fingerprints, summed over ranks in one collective when asked (at
    checkpoints and the end of the run, never per step)."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, ...]] = []

    def add(self, *values: int) -> None:
        self.pending.append(values)

    def reduce(self, comm: Communicator) -> list[tuple[int, ...]]:
        if not self.pending:
            return []
        sums = torch.tensor(self.pending, dtype=torch.float64, device=comm.device)  # exact: < 2^53
        comm.all_reduce_sum_([sums])
        self.pending = []
        return [tuple(int(v) for v in row) for row in sums.tolist()]
