"""dvc.yaml and dvc.lock as DVC validates them: DVC's own schema, checked with voluptuous as DVC does.

DVC refuses a dvc.yaml or dvc.lock its schema rejects (`outs: [{path: {cache: 'no'}}]`: "expected bool";
`probes: {deps: x}` in dvc.lock: "expected a list"; `frozen` beside a `foreach`: "extra keys not
allowed"), and `dvc status` and `dvc repro` with it. The gates refuse the same files with DVC's reason,
one line, exit 2: a form DVC refuses is never judged as a pipeline DVC would run.

The schema is dvc/schema.py's (DVC 3: STAGE_DEFINITION, FOREACH_IN, MULTI_STAGE_SCHEMA, LOCKFILE_SCHEMA,
with output.py's and annotations.py's parts), written out here because importing dvc.schema costs
0.12-0.17 s (it imports dvc.output and dvc.dependency, most of DVC) where voluptuous alone costs ~0.01 s
(docs/verdicts.md, "Cost"); tests/unit/test_dvc_refusals.py holds the two equal, key by key and validator by
validator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import voluptuous as vol

# dvc/output.py
CHECKSUM_SCHEMA = vol.Any(
    None,
    vol.And(str, vol.Length(max=0), vol.SetTo(None)),
    vol.And(vol.Any(str, vol.And(int, vol.Coerce(str))), vol.Length(min=3), vol.Lower),
)
CASE_SENSITIVE_CHECKSUM_SCHEMA = vol.Any(
    None,
    vol.And(str, vol.Length(max=0), vol.SetTo(None)),
    vol.And(vol.Any(str, vol.And(int, vol.Coerce(str))), vol.Length(min=3)),
)
CHECKSUMS_SCHEMA = {
    "md5": CHECKSUM_SCHEMA,
    "checksum": CHECKSUM_SCHEMA,
    "etag": CASE_SENSITIVE_CHECKSUM_SCHEMA,
}
META_SCHEMA = {"size": int, "nfiles": int, "isexec": bool, "version_id": str}
CLOUD_SCHEMA = vol.All({str: META_SCHEMA | CHECKSUMS_SCHEMA}, vol.Length(max=1))
DIR_FILES_SCHEMA: dict[Any, Any] = {
    **CHECKSUMS_SCHEMA,
    **META_SCHEMA,
    vol.Required("relpath"): str,
    "cloud": CLOUD_SCHEMA,
}
# dvc/annotations.py
ANNOTATION_SCHEMA = {"desc": str, "type": str, "labels": [str], "meta": object}
ARTIFACT_SCHEMA: dict[Any, Any] = {vol.Required("path"): str, **ANNOTATION_SCHEMA}

# dvc/schema.py
DATA_SCHEMA: dict[Any, Any] = {
    **CHECKSUMS_SCHEMA,
    **META_SCHEMA,
    vol.Required("path"): str,
    "cloud": CLOUD_SCHEMA,
    "files": [DIR_FILES_SCHEMA],
    "hash": str,
    "dataset": dict,
}
LOCK_FILE_STAGE_SCHEMA = {
    vol.Required("cmd"): vol.Any(str, list),
    "deps": [DATA_SCHEMA],
    "params": {str: {str: object}},
    "outs": [DATA_SCHEMA],
}
LOCKFILE_SCHEMA = {
    vol.Required("schema"): vol.Equal("2.0", "invalid schema version"),
    "datasets": object,
    "stages": {str: LOCK_FILE_STAGE_SCHEMA},
}
OUT_PSTAGE_DETAILED_SCHEMA = {
    str: {
        **ANNOTATION_SCHEMA,
        "cache": bool,
        "persist": bool,
        "checkpoint": bool,
        "remote": str,
        "push": bool,
    }
}
PLOT_PROPS = {
    "template": str,
    "x": str,
    "y": str,
    "x_label": str,
    "y_label": str,
    "title": str,
    "header": bool,
}
PLOT_PROPS_SCHEMA = OUT_PSTAGE_DETAILED_SCHEMA[str] | PLOT_PROPS
PLOT_PSTAGE_SCHEMA = {str: vol.Any(PLOT_PROPS_SCHEMA, [PLOT_PROPS_SCHEMA])}
VARS_SCHEMA = [str, dict]
STAGE_DEFINITION = {
    "matrix": {str: vol.Any(str, list)},
    vol.Required("cmd"): vol.Any(str, list),
    vol.Optional("wdir"): str,
    vol.Optional("deps"): [str],
    vol.Optional("params"): [vol.Any(str, dict)],
    vol.Optional("vars"): VARS_SCHEMA,
    vol.Optional("frozen"): bool,
    vol.Optional("meta"): object,
    vol.Optional("desc"): str,
    vol.Optional("always_changed"): bool,
    vol.Optional("outs"): [vol.Any(str, OUT_PSTAGE_DETAILED_SCHEMA)],
    vol.Optional("metrics"): [vol.Any(str, OUT_PSTAGE_DETAILED_SCHEMA)],
    vol.Optional("plots"): [vol.Any(str, PLOT_PSTAGE_SCHEMA)],
}


def either_or(primary: Any, fallback: Any, fallback_includes: list[str]) -> Any:
    """DVC's validator of a stage: a foreach stage (`foreach` or `do` present) or a plain one."""

    def validator(data: Any) -> Any:
        schema = primary
        if isinstance(data, Mapping) and set(fallback_includes) & data.keys():
            schema = fallback
        return vol.Schema(schema)(data)

    return validator


PLOT_DEFINITION = {
    "x": vol.Any(str, {str: str}),
    "y": vol.Any(str, [str], {str: vol.Any(str, [str])}),
    "x_label": str,
    "y_label": str,
    "title": str,
    "template": str,
}
SINGLE_PLOT_SCHEMA = {vol.Required(str): vol.Any(PLOT_DEFINITION, None)}
SINGLE_ARTIFACT_SCHEMA = vol.Schema({str: ARTIFACT_SCHEMA})
FOREACH_IN = {vol.Required("foreach"): vol.Any(dict, list, str), vol.Required("do"): STAGE_DEFINITION}
SINGLE_PIPELINE_STAGE_SCHEMA = {str: either_or(STAGE_DEFINITION, FOREACH_IN, ["foreach", "do"])}
MULTI_STAGE_SCHEMA = {
    "datasets": object,
    "plots": [vol.Any(str, SINGLE_PLOT_SCHEMA)],
    "stages": SINGLE_PIPELINE_STAGE_SCHEMA,
    "vars": VARS_SCHEMA,
    "params": [str],
    "metrics": [str],
    "artifacts": SINGLE_ARTIFACT_SCHEMA,
}
PIPELINE = vol.Schema(MULTI_STAGE_SCHEMA)
LOCKFILE = vol.Schema(LOCKFILE_SCHEMA)


class DvcRefuses(Exception):
    """A file DVC's schema rejects: `str()` is DVC's reason, one line."""


def reason(exc: vol.MultipleInvalid) -> str:
    """DVC's words for the first error (dvc/utils/strictyaml.py): the message, `in a -> b -> c`."""
    error = exc.errors[0]
    where = f", in {' -> '.join(str(p) for p in error.path)}" if error.path else ""
    more = f" (and {len(exc.errors) - 1} more)" if len(exc.errors) > 1 else ""
    return f"{error.error_message}{where}{more}"


def check(schema: vol.Schema, data: Any, source: str) -> None:
    """`data` as DVC validates `source` (dvc.yaml or dvc.lock); DvcRefuses with DVC's reason."""
    try:
        schema(data)
    except vol.MultipleInvalid as e:
        raise DvcRefuses(
            f"{source}: {reason(e)} (rule: DVC's schema of this file; dvc status refuses it too)"
        ) from None
