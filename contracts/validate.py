"""JSON Schema validation with one-line errors that name the file, the key and the rule (torch-free).

Shared by params loading, artifact writers, the registry and the gates, so every bad input in
the project fails the same way: `FILE: KEY: what is wrong (rule: what is allowed)`.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from contracts.errors import (  # re-exported: their home is errors
    ValidationError,
    clip,
)
from contracts.fileio import read_json


@cache
def load_schema(name: str) -> dict[str, Any]:
    """Load `contracts/schemas/<name>` (every schema of the project lives there, shipped as package data).

    Not checked against the metaschema here: that cost ~0.12 CPU-s per process that loads params.yaml
    (hundreds of stage, rank and gate processes per test run); every shipped schema is checked by
    tests/unit/test_judge_contracts_validate.py instead."""
    text = resources.files("contracts").joinpath("schemas", name).read_text(encoding="utf-8")
    return json.loads(text)


def json_path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _allowed(err: jsonschema.ValidationError) -> str:
    v, s = err.validator, err.validator_value
    if v == "additionalProperties":
        allowed = sorted((err.schema.get("properties") or {}).keys())
        return clip("known keys: " + ", ".join(allowed), 150) if allowed else "no extra keys"
    if v == "required":  # the missing key is named in the key path
        return "a required key"
    if v == "enum":
        return "one of " + ", ".join(json.dumps(x) for x in s)
    if v == "const":
        return f"exactly {json.dumps(s)}"
    if v == "type":
        return f"type {s if isinstance(s, str) else ' or '.join(s)}"
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[v]
        return f"{op} {s}"
    if v in ("minItems", "maxItems", "minLength", "maxLength", "pattern", "format"):
        return f"{v} {json.dumps(s)}"
    return f"{v}"


def _problem(err: jsonschema.ValidationError) -> tuple[str, str]:
    """(key path, problem) for an error; unknown keys are reported at the key itself."""
    path = json_path(err.absolute_path)
    if err.validator == "type" and isinstance(err.instance, float) and err.instance.is_integer():
        return path, f"{err.instance!r} is a float, not an integer (write {int(err.instance)})"
    if err.validator == "additionalProperties":
        known = set((err.schema.get("properties") or {}).keys())
        extras = sorted((k for k in err.instance if k not in known), key=str)  # YAML keys need not be strings
        key = f"{path}.{extras[0]}" if path else str(extras[0])
        return key, "unknown key"
    if err.validator == "required":
        missing = [k for k in err.validator_value if k not in err.instance]
        key = f"{path}.{missing[0]}" if path else missing[0]
        return key, "missing required key"
    return path or "(top level)", f"{_shown(err.instance)} is invalid"


def _shown(instance: Any) -> str:
    """A bad value, short; YAML gives dates, bytes and sets that JSON cannot write."""
    try:
        text = json.dumps(instance, default=repr)
    except (TypeError, ValueError):
        text = repr(instance)
    return " ".join(text.split())[:80]


def _strict_integer(checker: Any, instance: Any) -> bool:
    """An integer is an int: 160.0 or 1e2 (a float) is refused where a count is expected."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _whole_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    """`pattern` as JSON Schema (ECMA-262) means it: a final `$` ends the string. Python's `$` also
    matches before a trailing newline, so a name "tiny\n" passed `^[a-z0-9_-]+$`."""
    if not validator.is_type(instance, "string"):
        return
    ecma = pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith(r"\$") else pattern
    if not re.search(ecma, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


Validator = jsonschema.validators.extend(Draft202012Validator, validators={"pattern": _whole_pattern})
StrictValidator = jsonschema.validators.extend(
    Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
)


def non_finite(instance: Any, path: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], float] | None:
    """(key path, value) of the first NaN or infinity in a nested dict/list, else None."""
    if isinstance(instance, float) and not math.isfinite(instance):
        return path, instance
    items = (
        instance.items()
        if isinstance(instance, dict)
        else enumerate(instance)
        if isinstance(instance, list)
        else ()
    )
    for k, v in items:
        if (found := non_finite(v, (*path, k))) is not None:
            return found
    return None


def errors(instance: Any, schema: dict[str, Any], strict: bool = False) -> list[jsonschema.ValidationError]:
    validator = (StrictValidator if strict else Validator)(schema)
    return sorted(
        validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.validator)
    )


def validate(instance: Any, schema: dict[str, Any], source: str, strict: bool = False) -> None:
    """Raise ValidationError for the first problem (in key order), else return.

    strict (params): integers must be ints and every number finite, so `nan` or `1e2` never
    reaches the trainer.
    """
    if strict and (bad := non_finite(instance)) is not None:
        key, value = bad
        raise ValidationError(source, json_path(key), f"{value} is not a finite number", "a finite number")
    errs = errors(instance, schema, strict)
    if not errs:
        return
    # Prefer the deepest, most specific error (jsonschema's relevance heuristic).
    err = jsonschema.exceptions.best_match(errs)
    key, problem = _problem(err)
    raise ValidationError(source, key, problem, _allowed(err))


def load_json(path: str, schema: dict[str, Any] | None = None) -> Any:
    """Read a JSON file, bounded (contracts/fileio.py read_json: a regular file, size and depth capped;
    one-line errors), and validate it if a schema is given."""
    data = read_json(path)
    if schema is not None:
        validate(data, schema, path)
    return data
