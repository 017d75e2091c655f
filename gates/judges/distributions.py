"""Tail probabilities of Student's t and Fisher's F, for the statistical tier (gates/judges/replicas.py).

Both reduce to the regularized incomplete beta function I_x(a, b), evaluated by its continued fraction
(Lentz's method, as in Numerical Recipes' betacf). Pure math, torch-free, no scipy (not a dependency).
"""

from __future__ import annotations

import math

_TINY = 1e-300
_EPS = 1e-15
_ITERATIONS = 300


def _away_from_zero(v: float) -> float:
    """Lentz's guard: an exact 0 replaced by a tiny number."""
    return v if abs(v) > _TINY else _TINY  # pragma: no mutate -- equivalent: only an exact 0 reaches it


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b), converging fastest for x < (a + 1) / (a + b + 2): at most 55
    iterations for degrees of freedom up to 3000 (measured), so the cap of 300 is never reached."""
    c, d = 1.0, 1.0 / _away_from_zero(1.0 - (a + b) * x / (a + 1.0))
    h = d
    for m in range(1, _ITERATIONS + 1):  # pragma: no mutate -- equivalent: the loop breaks long before
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
        ):
            d = 1.0 / _away_from_zero(1.0 + num * d)
            c = _away_from_zero(1.0 + num / c)
            h *= d * c
        if abs(d * c - 1.0) < _EPS:  # pragma: no mutate -- equivalent: <= at exactly eps is the same stop
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), a, b > 0, 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    # which of the two continued fractions converges faster; both are right on either side
    if x < (a + 1.0) / (a + b + 2.0):  # pragma: no mutate -- equivalent: the switch only picks the faster
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isnan(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def f_upper(f: float, df1: float, df2: float) -> float:
    """P(F >= f) for Fisher's F(df1, df2)."""
    if math.isnan(f):
        return 0.0
    if f <= 0.0:  # pragma: no mutate -- equivalent: at f == 0, betainc(.., .., 1) is 1.0 too
        return 1.0
    return betainc(df2 / 2.0, df1 / 2.0, df2 / (df2 + df1 * f))
