"""gates/judges/tolerance.py under mutation (docs/judge-mutation.md): each verdict's numbers and its one line.

tests/unit/test_gateunit_tolerance.py holds the properties (within / beyond / non-finite / max_out); these
pin what a property leaves loose: the exact line a gate prints, the worst differences it reports,
and the description of each bound, so a changed word or number in a verdict is seen.
"""

from __future__ import annotations

import math

import pytest

from gates.judges.tolerance import Approx, Exact, Verdict


def test_a_series_with_one_position_out_explains_itself_exactly() -> None:
    v = Approx(0.0, 0.1, 1).judge([1.0, 2.0, 5.0], [1.0, 2.0, 4.0], [10, 20, 30])
    assert v == Verdict(
        ok=True,
        judged=3,
        out=(30,),
        max_abs=1.0,
        max_rel=0.25,
        line="pass: 2 of 3 within rtol 0.1, <= 1 out, max rel 0.25; 1 out, 1 allowed; first out at 30: 5.0 vs 4.0",
    )


def test_a_failing_series_names_its_first_position_out() -> None:
    v = Approx(0.5, 0.0).judge([3.0, 1.0, 9.0], [1.0, 1.0, 1.0])
    assert (v.ok, v.out, v.max_abs, v.max_rel) == (False, (0, 2), 8.0, 8.0)
    assert v.line == "fail: 1 of 3 within atol 0.5, max rel 8; 2 out, 0 allowed; first out at 0: 3.0 vs 1.0"


def test_a_passing_exact_series() -> None:
    v = Exact().judge([1, 2.5], [1, 2.5], [4, 8])
    assert v == Verdict(True, 2, (), 0.0, 0.0, "pass: 2 of 2 within exact (bitwise), max rel 0")


def test_max_abs_is_the_largest_difference_and_inf_for_non_finite() -> None:
    assert Exact().judge([1.0, 4.0, 2.0], [1.0, 1.0, 1.5]).max_abs == 3.0
    assert Exact().judge([1.0, -4.0], [1.0, -1.0]).max_abs == 3.0
    assert Exact().judge([math.nan], [1.0]).max_abs == math.inf
    assert Exact().judge([1.0], [math.inf]).max_abs == math.inf
    assert Exact().judge([2**60 + 1], [2**60]).max_abs == 1.0  # ints: the exact difference
    assert Approx(1.0).judge([], []).max_abs == 0.0


def test_max_rel_is_the_largest_relative_difference() -> None:
    assert Exact().judge([2.0, 1.5, 1.0], [1.0, 1.0, 1.0]).max_rel == 1.0
    assert Exact().judge([1.0], [0.0]).max_rel == math.inf


@pytest.mark.parametrize(
    ("tolerance", "text"),
    [
        (Approx(), "atol 0"),
        (Approx(0.5), "atol 0.5"),
        (Approx.absolute(0.25), "atol 0.25"),
        (Approx.relative(0.1), "rtol 0.1"),
        (Approx.relative(0.1, max_out=2), "rtol 0.1, <= 2 out"),
        (Approx(0.5, 0.1, 3), "atol 0.5 + rtol 0.1, <= 3 out"),
        (Exact(), "exact (bitwise)"),
    ],
)
def test_each_bound_describes_itself(tolerance, text: str) -> None:
    assert tolerance.describe() == text


def test_the_factories_set_only_their_own_bound() -> None:
    assert Approx.relative(0.1, 2) == Approx(0.0, 0.1, 2)
    assert Approx.absolute(0.25) == Approx(0.25, 0.0, 0)
    assert Approx.relative(0.1).max_out == 0


def test_bounds_are_inclusive_and_add_up() -> None:
    assert Approx(0.5, 0.25).within(3.0, 2.0) and not Approx(0.5, 0.25).within(3.0001, 2.0)
    assert Approx(0.5, 0.25).within(1.0, 2.0) and not Approx(0.5, 0.25).within(0.9999, 2.0)
    assert Approx(0.0, 0.5).within(-3.0, -2.0)  # rtol scales |ref|
    assert Approx(1, 0, 0).within(2, 1) and not Approx(1, 0, 0).within(3, 1)
    assert Approx(0.0, 0.0, 0) == Approx() and Approx().within(0, 0)


def test_a_zero_bound_is_allowed_and_a_negative_one_refused_by_name() -> None:
    assert Approx(0.0, 0.0, 0).max_out == 0
    with pytest.raises(ValueError, match=r"^a tolerance is never negative: Approx\(atol=-1"):
        Approx(-1.0)
    with pytest.raises(ValueError, match=r"never negative: Approx\(atol=0.0, rtol=0.0, max_out=-1\)"):
        Approx(0.0, 0.0, -1)


def test_exact_tells_an_int_from_the_equal_float() -> None:
    assert not Exact().within(1, 1.0) and not Exact().within(1.0, 1)
    assert Exact().within(3, 3) and Exact().within(0.1, 0.1)


def test_judge_refuses_mismatched_lengths_naming_them() -> None:
    with pytest.raises(ValueError, match=r"^cannot judge 2 values against 2 \(labels 3\)$"):
        Exact().judge([1.0, 2.0], [1.0, 2.0], [1, 2, 3])
    with pytest.raises(ValueError, match=r"^cannot judge 3 values against 2 \(labels 2\)$"):
        Exact().judge([1.0, 2.0, 3.0], [1.0, 2.0])
