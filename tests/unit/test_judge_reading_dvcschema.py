"""gates/reading/dvcschema.py under mutation (docs/judge-mutation.md): DVC's reason, one line, in-process.

The schema itself is held to dvc.schema's by tests/unit/test_dvc_refusals.py; here the three functions: the
foreach-or-plain choice of a stage's schema, DVC's wording of the first error, the one-line refusal.
"""

from __future__ import annotations

import pytest
import voluptuous as vol

from gates.reading.dvcschema import LOCKFILE, PIPELINE, DvcRefuses, check, either_or, reason

RULE = "(rule: DVC's schema of this file; dvc status refuses it too)"


def errors(schema: vol.Schema, data: object) -> vol.MultipleInvalid:
    with pytest.raises(vol.MultipleInvalid) as e:
        schema(data)
    return e.value


def test_either_or_takes_the_fallback_when_a_key_of_it_is_present() -> None:
    pick = either_or({"a": int}, {"b": int, "c": int}, ["b", "c"])
    assert pick({"a": 1}) == {"a": 1} and pick({"b": 1}) == {"b": 1} and pick({"c": 2}) == {"c": 2}
    with pytest.raises(vol.Invalid):
        pick({"a": 1, "b": 2})  # b present: the fallback, where a is an extra key
    with pytest.raises(vol.Invalid):
        pick({"b": "x"})
    with pytest.raises(vol.Invalid):
        pick([1])  # not a mapping: the primary schema's refusal
    assert either_or({"a": int}, {"b": int}, [])({"a": 1}) == {"a": 1}


def test_reason_is_the_first_error_in_dvcs_words() -> None:
    e = errors(PIPELINE, {"stages": {"d": {"cmd": "x", "outs": [{"o": {"cache": "no"}}]}}})
    assert reason(e) == "expected bool, in stages -> d -> outs -> 0 -> o -> cache"
    assert reason(errors(LOCKFILE, [1])) == "expected a dictionary"  # no path: the top level
    two = errors(vol.Schema({"a": int, "b": int}), {"a": "x", "b": "y"})
    assert reason(two) in ("expected int, in a (and 1 more)", "expected int, in b (and 1 more)")


def test_check_passes_what_dvc_takes_and_refuses_the_rest_in_one_line() -> None:
    assert check(LOCKFILE, {"schema": "2.0", "stages": {}}, "dvc.lock") is None
    with pytest.raises(DvcRefuses) as e:
        check(LOCKFILE, {"schema": "2.0", "stages": {"probes": {"cmd": "x", "deps": "x"}}}, "p/dvc.lock")
    assert str(e.value) == f"p/dvc.lock: expected a list, in stages -> probes -> deps {RULE}"
    assert "\n" not in str(e.value) and e.value.__cause__ is None
