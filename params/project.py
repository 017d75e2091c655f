"""A project's own params file (torch-free): a file that does not describe runs in our schema.

Our pipeline's params.yaml describes its runs (`model:`, `train:`; params.schema.json): the gates
hold every run to it, and everything in it is validated (params/config.py). A project that gates
its own trainer (runrecord: transformers.Trainer, a plain loop) has no such sections: its runs are
described by their own records (metrics.json `config`). Its params file holds its own knobs, which
are not ours to validate, and what it asks of us:

- `gates:`, the thresholds it wants. Each section it gives is validated in full against
  contracts/schemas/thresholds.schema.json (one line naming the file and `gates.<key>`); each section
  it leaves out is the harness's own, `gates:` of the params.yaml beside this package (HARNESS_PARAMS:
  the tiers measured on our runs, docs/tolerances.md), named in the report's thresholds_source; but
  `scope` (the stages its verdict needs): a project's own or none.
- for one of our stages it runs (the corpus and tokenizer stages), that stage's sections (`data:`,
  `tokenizer:`), validated against their params.schema.json definitions: `load_sections`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contracts import yamlfile
from contracts.validate import ValidationError, load_schema, validate
from params.config import (
    Params,
    check_data,
    check_thresholds,
    describes_runs,
    load_params,
    parse_override,
    resolve,
    set_path,
)

HARNESS_PARAMS = Path(__file__).resolve().parent.parent / "params.yaml"
HINT = "run from the repository root or pass --params"  # as load_params
# `gates:` sections a project never takes from the harness: `scope` names the harness's own stages
# (gates/reading/scope.py); a project that declares none is judged on what its dvc.yaml defines
OWN = ("scope",)


def _load_raw(path: str | Path) -> dict[str, Any]:
    raw = yamlfile.load_file(str(path), hint=HINT)
    if not isinstance(raw, dict):
        raise ValidationError(str(path), "", "expected a mapping at the top level", "a YAML mapping")
    return raw


def harness_thresholds() -> dict[str, Any]:
    """The harness's own `gates:` (validated with the rest of its params.yaml); {} where it is absent."""
    return load_params(HARNESS_PARAMS).thresholds if HARNESS_PARAMS.is_file() else {}


def project_thresholds(given: Any, source: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A project file's `gates:` with the harness's sections for the ones it leaves out, validated
    (strict); and the sections taken from the harness."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise ValidationError(
            source,
            "gates",
            f"{type(given).__name__} is not a mapping",
            "gates: sections as in thresholds.schema.json",
        )
    defaults = {k: v for k, v in harness_thresholds().items() if k not in given and k not in OWN}
    try:
        merged = check_thresholds({**given, **defaults}, source)
    except ValidationError as e:
        if e.problem != "missing required key" or HARNESS_PARAMS.is_file():
            raise
        raise ValidationError(
            source, e.key, e.problem, e.rule, f"set it: no defaults here ({HARNESS_PARAMS} is missing)"
        ) from None
    return merged, tuple(sorted(defaults))


def load_judging(path: str | Path) -> Params:
    """The params `python -m gates check` judges with: our pipeline's params.yaml as load_params reads
    it, or a project's own file (its `gates:` validated, the harness's sections where it has none)."""
    raw = _load_raw(path)
    if describes_runs(raw):
        return resolve(raw, str(path))
    gates, defaulted = project_thresholds(raw.get("gates"), str(path))
    return Params(raw={**raw, "gates": gates}, source=str(path), defaults=defaulted)


def thresholds_source(params: Params, shown: str) -> str:
    """Where the thresholds came from, as the report says it (`shown`: the file as it was named)."""
    if not params.defaults:
        return shown
    return f"{shown} (gates.{', gates.'.join(params.defaults)}: {HARNESS_PARAMS})"


def load_sections(
    path: str | Path, overrides: list[str] | tuple[str, ...], sections: tuple[str, ...]
) -> Params:
    """What one of our stages reads: from our params.yaml, all of it (load_params, unchanged); from a
    project's own file, only `sections`, each validated against its params.schema.json definition."""
    raw = _load_raw(path)
    if describes_runs(raw):
        return resolve(raw, str(path), overrides)
    source, schema = str(path), load_schema("params.schema.json")
    for text in overrides:
        parts, value = parse_override(text)
        if parts[0] not in sections:
            raise ValidationError(
                f"{source} (--set {text})",
                parts[0],
                "not read by this stage",
                "one of " + ", ".join(sections),
            )
        set_path(raw, parts, value, f"{source} (--set {text})")
    for section in sections:
        if section not in raw:
            raise ValidationError(source, section, "missing required key", f"params.schema.json {section}")
        try:  # a section's definition refers to no other (no $ref): it is a schema on its own
            validate(raw[section], schema["$defs"][section], source, strict=True)
        except ValidationError as e:  # validate() gives no next step: the problem and its rule
            key = section if e.key in ("", "(top level)") else f"{section}.{e.key}"
            raise ValidationError(e.source, key, e.problem, e.rule) from None
    if "data" in sections:
        check_data(raw["data"], source)
    return Params(raw={s: raw[s] for s in sections}, source=source)
