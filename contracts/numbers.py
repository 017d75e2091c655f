"""The one relative difference of the project (gates, registry bless, tests and the nightly use it).

Torch-free and pure. Non-finite values and a nonzero value against a zero reference compare as
infinitely far apart, so a NaN or a blow-up never hides behind a comparison that returns False.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def rel_diff(x: float, ref: float) -> float:
    """|x - ref| / |ref|; 0.0 when equal, inf where they cannot be compared (non-finite, or ref == 0)."""
    if not (math.isfinite(x) and math.isfinite(ref)):
        return math.inf
    if x == ref:
        return 0.0
    return abs(x - ref) / abs(ref) if ref else math.inf


def rel_diffs(values: Sequence[float], refs: Sequence[float]) -> list[float]:
    """rel_diff per position; the two sequences must be the same length."""
    return [rel_diff(x, y) for x, y in zip(values, refs, strict=True)]


def max_rel(values: Sequence[float], refs: Sequence[float]) -> float:
    """The largest rel_diff (0.0 for two empty sequences)."""
    return max(rel_diffs(values, refs), default=0.0)
