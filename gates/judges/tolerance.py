"""The two kinds of tolerance every numeric gate judges with (Megatron-LM's functional tests have the same two).

- `Exact`: the deterministic tier. Every value identical: ints equal, floats equal bit for bit
  (0.0 is not -0.0), so the max abs difference is 0.
- `Approx(atol, rtol, max_out)`: the approximate tier. A value is within when
  |x - ref| <= atol + rtol * |ref| (numpy.isclose's rule, torch.testing's and Megatron's); a series
  passes with at most `max_out` positions outside (Megatron's "a few steps allowed out").

Non-finite is never within: a NaN or Inf on either side is out, so a diverged run cannot pass a
comparison whose arithmetic returns False. Which steps are judged (a prefix, the first eval, the last)
is the gate's choice; the tolerance judges the values it is given. Every params.yaml threshold key
maps to one of these (`Approx.relative`, `Approx.absolute`): docs/tolerances.md. Pure and torch-free.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.numbers import rel_diff

Number = int | float


@dataclass(frozen=True)
class Verdict:
    """A judged series: which positions are out, the worst differences, and one line saying why."""

    ok: bool
    judged: int
    out: tuple[int, ...]  # the labels (steps) outside the tolerance, in order
    max_abs: float  # largest |x - ref| (inf where a value is non-finite)
    max_rel: float  # largest |x - ref| / |ref| (contracts.numbers.rel_diff)
    line: str


def _finite(x: Number) -> bool:
    return isinstance(x, int) or math.isfinite(x)


def _abs_diff(x: Number, ref: Number) -> float:
    if not (_finite(x) and _finite(ref)):
        return math.inf
    return float(abs(x - ref))


def _bits(x: Number) -> tuple[type, int | bytes]:
    return (int, x) if isinstance(x, int) else (float, struct.pack("<d", x))


class _Tolerance:
    max_out: int = 0

    def within(self, x: Number, ref: Number) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def judge(
        self, got: Sequence[Number], ref: Sequence[Number], labels: Sequence[int] | None = None
    ) -> Verdict:
        """Position by position; `labels` name the positions in `out` (default 0, 1, ...)."""
        names = list(range(len(ref))) if labels is None else list(labels)
        if not len(got) == len(ref) == len(names):
            raise ValueError(f"cannot judge {len(got)} values against {len(ref)} (labels {len(names)})")
        rows = list(zip(names, got, ref, strict=True))  # pragma: no mutate -- equivalent: lengths checked
        out = tuple(n for n, x, y in rows if not self.within(x, y))
        max_abs = max((_abs_diff(x, y) for _, x, y in rows), default=0.0)
        max_rel = max((rel_diff(float(x), float(y)) for _, x, y in rows), default=0.0)
        ok = len(out) <= self.max_out
        return Verdict(ok, len(ref), out, max_abs, max_rel, self._line(ok, got, ref, names, out, max_rel))

    def _line(
        self,
        ok: bool,
        got: Sequence[Number],
        ref: Sequence[Number],
        names: list[int],
        out: tuple[int, ...],
        max_rel: float,
    ) -> str:
        head = f"{len(ref) - len(out)} of {len(ref)} within {self.describe()}, max rel {max_rel:.3g}"
        if not out:
            return f"pass: {head}"
        i = names.index(out[0])
        first = f"first out at {out[0]}: {got[i]!r} vs {ref[i]!r}"
        allowed = f"{len(out)} out, {self.max_out} allowed"
        return f"{'pass' if ok else 'fail'}: {head}; {allowed}; {first}"


@dataclass(frozen=True)
class Exact(_Tolerance):
    """Identical: ints equal, floats bit-identical and finite (the deterministic tier)."""

    def within(self, x: Number, ref: Number) -> bool:
        return _finite(x) and _finite(ref) and _bits(x) == _bits(ref)

    def describe(self) -> str:
        return "exact (bitwise)"


@dataclass(frozen=True)
class Approx(_Tolerance):
    """|x - ref| <= atol + rtol * |ref|, both finite; at most max_out positions outside."""

    atol: float = 0.0
    rtol: float = 0.0
    max_out: int = 0

    def __post_init__(self) -> None:
        if not (self.atol >= 0 and self.rtol >= 0 and self.max_out >= 0):  # NaN bounds refused too
            raise ValueError(f"a tolerance is never negative: {self}")

    @classmethod
    def relative(cls, rtol: float, max_out: int = 0) -> Approx:
        """A relative bound: max_rel, first_step_rtol, loss_rtol, eval_rtol."""
        return cls(0.0, rtol, max_out)

    @classmethod
    def absolute(cls, atol: float) -> Approx:
        """An absolute bound: final_val_atol, cross_rank.max_abs."""
        return cls(atol)

    def within(self, x: Number, ref: Number) -> bool:
        return _finite(x) and _finite(ref) and abs(x - ref) <= self.atol + self.rtol * abs(ref)

    def describe(self) -> str:
        parts = ([f"atol {self.atol:g}"] if self.atol or not self.rtol else []) + (
            [f"rtol {self.rtol:g}"] if self.rtol else []
        )
        out = f", <= {self.max_out} out" if self.max_out else ""
        return " + ".join(parts) + out
