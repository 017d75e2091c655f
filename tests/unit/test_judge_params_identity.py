"""params/identity.py config_diff under mutation (docs/judge-mutation.md): the keys a gate names."""

from __future__ import annotations

import pytest

from params.identity import config_diff


@pytest.mark.parametrize(
    ("a", "b", "line"),
    [
        ({"x": 1}, {"x": 1}, "the configs are equal: a hash was edited"),
        ({"t": {"g": 1}}, {"t": {"g": 2}}, "differing keys: t.g 2 vs 1"),
        ({}, {"x": None}, "differing keys: x None vs '<absent>'"),
        ({"x": None}, {}, "differing keys: x '<absent>' vs None"),
        ({}, {"x": "<absent>"}, "differing keys: x '<absent>' vs '<absent>'"),  # a value, not absence
        ({"x": 1, "y": 2}, {"x": 1, "y": 3}, "differing keys: y 3 vs 2"),
        (
            {"a": 1, "b": 1, "c": 1},
            {},
            "differing keys: a '<absent>' vs 1, b '<absent>' vs 1, c '<absent>' vs 1",
        ),
        (
            {"a": 1, "b": 1, "c": 1, "d": 1},
            {},
            "differing keys: a '<absent>' vs 1, b '<absent>' vs 1, c '<absent>' vs 1 and 1 more",
        ),
    ],
)
def test_config_diff_names_each_differing_key_b_then_a(a: dict, b: dict, line: str) -> None:
    assert config_diff(a, b) == line


def test_config_diff_limit_is_the_number_shown() -> None:
    a = {k: 1 for k in "abcde"}
    assert config_diff(a, {}, limit=1) == "differing keys: a '<absent>' vs 1 and 4 more"
    assert config_diff(a, {}, limit=5).endswith("e '<absent>' vs 1")
