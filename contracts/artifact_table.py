"""The artifact table: for each JSON artifact its path, format tag and schema; write() and read() validate.

A writer hands its record to write(), which refuses a record its schema refuses (one line naming the
file and the key) before a byte reaches the disk; read() validates the same way. The gates read
through gates/reading/artifacts.py, which adds dvc.lock checks on top of read(). Non-finite numbers are
allowed on write on purpose: a diverged run must record its NaN so the `finite` gate can fail it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts import outputs
from contracts.fileio import canonical_json
from contracts.validate import ValidationError, load_json, load_schema, validate


@dataclass(frozen=True)
class Artifact:
    kind: str
    pattern: str  # where it lives, relative to the repository root ({placeholders} vary per run)
    format: str | None  # the `format` tag the file carries (its schema's const), None if it has none

    @property
    def schema(self) -> str:
        """Its file name in contracts/schemas/. Derived, never spelled here: a stage depends on the
        schemas of the kinds it names in read/write calls (tests/process/test_dvc_deps.py), not on all of them."""
        return f"{self.kind}.schema.json"


TABLE: dict[str, Artifact] = {
    a.kind: a
    for a in (
        Artifact("metrics", "runs/{launcher}/metrics.json", "xtrain-metrics/1"),
        Artifact("summary", "runs/{launcher}/summary.json", None),
        Artifact("manifest", "exports/{name}/manifest.json", "xtrain-export-manifest/1"),
        Artifact("closed_loop", "reports/closed_loop.json", "xtrain-closed-loop/2"),
        Artifact(
            "registry_check",
            "reports/registry_check.json",
            "xtrain-registry-check/1",
        ),
        Artifact("env", "runs/env.json", "xtrain-env/1"),
        Artifact("repro", "reports/repro.json", "xtrain-repro/1"),
        Artifact("probes", "runs/probes.json", "xtrain-probes/1"),
        Artifact("pilot", "runs/pilot/pilot.json", "xtrain-pilot/2"),
        Artifact("scaling", "bench/scaling.json", "xtrain-scaling/2"),
        Artifact("gates_report", "reports/gates.json", "xtrain-gates-report/2"),
        Artifact("version", "registry/models/{model}/v{n}.json", "xtrain-registry-version/1"),
        Artifact("golden", "registry/goldens/{env_id}/v{n}.json", "xtrain-golden/1"),
        Artifact("pinned", "registry/pinned/{model}/pin.json", "xtrain-registry-pin/1"),
        Artifact(
            "baseline",
            "registry/baselines/{env_id}/v{n}.json",
            "xtrain-perf-baseline/1",
        ),
    )
}


def artifact(kind: str) -> Artifact:
    try:
        return TABLE[kind]
    except KeyError:
        raise ValueError(f"unknown artifact kind {kind!r} (known: {', '.join(sorted(TABLE))})") from None


def kind_of_schema(schema: str) -> str:
    """The artifact kind a schema file describes (the gates name artifacts by schema)."""
    for a in TABLE.values():
        if a.schema == schema:
            return a.kind
    raise ValueError(f"no artifact kind has schema {schema!r}")


def check(kind: str, data: Any, source: str | Path) -> None:
    """Raise ValidationError naming `source` and the key if `data` is not a valid `kind` record."""
    validate(data, load_schema(artifact(kind).schema), str(source))


def write(kind: str, path: str | Path, data: Any) -> None:
    """Validate, then write atomically (canonical JSON); an invalid record never reaches the disk,
    nor any record over a file that is not a previous one of its kind (contracts/outputs.py)."""
    check(kind, data, path)
    # never over something else: only an absent file or one of the same format family is replaced
    outputs.write_file(path, canonical_json(data), outputs.json_kind(kind, artifact(kind).format))


def read(kind: str, path: str | Path) -> Any:
    """The file's content, validated against the kind's schema (ValidationError names file and key)."""
    return load_json(str(path), load_schema(artifact(kind).schema))


__all__ = ["TABLE", "Artifact", "ValidationError", "artifact", "check", "kind_of_schema", "read", "write"]
