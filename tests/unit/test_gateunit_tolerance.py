"""The tolerance classes of gates/judges/tolerance.py, by property (Hypothesis), and their mapping from params.yaml.

Approx accepts every value within atol + rtol*|ref| and rejects every value just beyond; Exact accepts
only identical values; a NaN or Inf on either side is out for both, whatever the bounds; a series
passes with at most max_out positions out, and `out` names exactly those. Each verdict explains
itself in one line. Negative controls: a perturbed position is found, a negative bound is refused.
"""

from __future__ import annotations

import math
import struct

import pytest
import yaml
from hypothesis import assume, given
from hypothesis import strategies as st

from conftest import PARAMS
from gates.judges import ddp, fresh_train
from gates.judges.tolerance import Approx, Exact

refs = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
bounds = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
any_float = st.floats(allow_nan=True, allow_infinity=True)


def ulp_room(ref: float, width: float) -> bool:
    """The bound is wide against float rounding at ref, so 'just within/beyond' is representable."""
    return width > 64 * math.ulp(max(abs(ref), 1e-300))


@given(ref=refs, atol=bounds, rtol=bounds, f=st.floats(0.0, 0.5), sign=st.sampled_from([-1.0, 1.0]))
def test_approx_accepts_within_atol_plus_rtol_ref(ref, atol, rtol, f, sign) -> None:
    width = atol + rtol * abs(ref)
    assume(ulp_room(ref, width))
    x = ref + sign * f * width
    assert Approx(atol, rtol).within(x, ref)
    assert Approx(atol, rtol).judge([x], [ref]).ok


@given(ref=refs, atol=bounds, rtol=bounds, g=st.floats(0.01, 10.0), sign=st.sampled_from([-1.0, 1.0]))
def test_approx_rejects_just_beyond(ref, atol, rtol, g, sign) -> None:
    width = atol + rtol * abs(ref)
    assume(ulp_room(ref, width * g))
    x = ref + sign * width * (1 + g)
    v = Approx(atol, rtol).judge([x], [ref], [7])
    assert not Approx(atol, rtol).within(x, ref)
    assert not v.ok and v.out == (7,) and v.line.startswith("fail: ") and "first out at 7" in v.line


@given(
    bad=non_finite, other=any_float, atol=st.floats(0, 1e300), rtol=st.floats(0, 1e300), swap=st.booleans()
)
def test_non_finite_is_always_out(bad, other, atol, rtol, swap) -> None:
    x, ref = (other, bad) if swap else (bad, other)
    assert not Approx(atol, rtol).within(x, ref)
    assert not Exact().within(x, ref)
    assert not Approx(atol, rtol).judge([x], [ref]).ok and not Exact().judge([x], [ref]).ok


@given(x=any_float, y=any_float)
def test_exact_accepts_only_identical(x, y) -> None:
    same = math.isfinite(x) and math.isfinite(y) and struct.pack("<d", x) == struct.pack("<d", y)
    assert Exact().within(x, y) is same
    if math.isfinite(x):
        assert Exact().within(x, x)
        assert not Exact().within(x, math.nextafter(x, math.inf))  # one ulp is a difference


def test_exact_tells_signed_zero_and_compares_ints_exactly() -> None:
    assert not Exact().within(0.0, -0.0)
    big = 2**63 + 1  # hash sums: above float precision, still compared exactly
    assert Exact().within(big, big) and not Exact().within(big, big - 1)


@given(
    n=st.integers(1, 30),
    data=st.data(),
    max_out=st.integers(0, 5),
    rtol=st.floats(1e-6, 1e-2),
)
def test_a_series_passes_with_at_most_max_out_positions_out(n, data, max_out, rtol) -> None:
    ref = data.draw(st.lists(st.floats(0.5, 10.0), min_size=n, max_size=n))
    moved = sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=n)))
    got = [r * (1 + 2 * rtol) if i in moved else r for i, r in enumerate(ref)]
    steps = [10 * i for i in range(n)]
    v = Approx.relative(rtol, max_out=max_out).judge(got, ref, steps)
    assert v.out == tuple(10 * i for i in moved)
    assert v.ok is (len(moved) <= max_out)
    assert v.judged == n and "\n" not in v.line and v.line.startswith("pass: " if v.ok else "fail: ")
    assert v.max_rel == pytest.approx(2 * rtol if moved else 0.0, rel=1e-6)


def test_a_bad_tolerance_or_series_is_refused() -> None:
    for bad in ((-1e-3, 0.0, 0), (0.0, math.nan, 0), (0.0, 0.0, -1)):
        with pytest.raises(ValueError, match="never negative"):
            Approx(*bad)
    with pytest.raises(ValueError, match="cannot judge 2 values against 3"):
        Exact().judge([1, 2], [1, 2, 3])


def test_the_empty_series_passes_and_says_so() -> None:
    v = Approx.relative(1e-3).judge([], [])
    assert v.ok and v.max_rel == 0.0 and v.line == "pass: 0 of 0 within rtol 0.001, max rel 0"


def test_the_gates_build_their_tolerances_from_todays_params_keys() -> None:
    """Every threshold key maps to one class and keeps its value (docs/tolerances.md): config identity
    and every verdict stay what they were."""
    g = yaml.safe_load(PARAMS.read_text())["gates"]
    lm, approx = g["loss_match"], g["fresh_train"]["approx"]
    for device in ("cpu", "cuda"):
        tier = ddp.tier_for(lm, device)
        assert tier.first_step == Approx(0.0, lm[device]["first_step_rtol"], 0)
        assert tier.prefix == Approx(0.0, lm["max_rel"], 0)
        assert tier.end == Approx(lm[device]["final_val_atol"], 0.0, 0)
        assert tier.prefix_steps == lm[device]["prefix_steps"]
        ft = fresh_train.ApproxTier.of(approx[device])
        assert ft.loss == Approx(0.0, approx[device]["loss_rtol"], approx[device]["max_steps_out"])
        assert ft.val == Approx(0.0, approx[device]["eval_rtol"], 0)
        assert ft.prefix_steps == approx[device].get("prefix_steps")
        final = approx[device].get("final_val_atol")
        assert ft.final_val == (None if final is None else Approx(final, 0.0, 0))
    parity = ddp.tier_for({**lm, "max_rel": g["launcher_parity"]["max_rel"]}, "cpu")
    assert parity.prefix == Approx.relative(g["launcher_parity"]["max_rel"])
