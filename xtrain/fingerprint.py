"""32-bit hashes whose sums fingerprint a set of samples or dropout masks, exactly and order-free.

A sum of 32-bit hashes is independent of order and of how the set is split over ranks, and stays
exact in float64 for up to 2^21 terms, so per-rank sums reduced over ranks equal the single-device
sum bit for bit when (and, except with probability ~2^-32, only when) the sets are equal.
"""

from __future__ import annotations

_MASK64 = (1 << 64) - 1
MAX_TERMS = 1 << 21  # 32-bit hashes summed per step that stay exact in float64 (< 2^53)


def hash32(x: int) -> int:
    """splitmix64's finaliser, top 32 bits: neighbouring inputs give unrelated hashes."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) >> 32
