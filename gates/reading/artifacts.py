"""Reading artifacts for the gates: schema-validated, md5-recorded, and missing-vs-not-run aware.

A missing artifact is `skip` only when its stage is not in the pipeline at all (dvc.yaml does not
define it, dvc.lock does not record it); a stage that dvc.yaml defines but dvc.lock does not record
is a partial dvc.lock, an error. When the stage ran, a missing or invalid artifact is an error
(exit 2) naming the file, the JSON path and the schema rule. No gate passes on an artifact it did not read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import artifact_table as contract
from contracts.fileio import md5_file
from contracts.validate import ValidationError
from gates.reading.dvclock import DvcLock
from params.config import Params


class ArtifactError(Exception):
    """Missing, invalid, edited or unrecorded artifact from a stage that ran: `error`, exit code 2."""


class StageNotRun(Exception):
    """The artifact's stage has not run (per dvc.lock): the gate is `skip`."""


class NonFinite(Exception):
    """A NaN or Inf somewhere in an artifact: the gate fails (never hidden by max() or a comparison)."""


def nonfinite(data: Any, where: str = "") -> list[str]:
    """JSON paths of every non-finite number in `data`."""
    if isinstance(data, float):
        return [] if math.isfinite(data) else [f"{where or '(top level)'} = {data}"]
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in nonfinite(v, f"{where}.{k}" if where else str(k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in nonfinite(v, f"{where}[{i}]")]
    return []


RUN_METRICS = re.compile(r"runs/([^/]+)/metrics\.json")
REPLICA_FOLDER = re.compile(r"single-r[0-9]+")


def misplaced_run(rel: str, data: Any) -> str | None:
    """A run lives in the folder of its launcher: runs/thread holding a proc run is refused (exit 2)."""
    m = RUN_METRICS.fullmatch(rel)
    if m is None or not isinstance(data, dict) or data.get("launcher") == m.group(1):
        return None
    if data.get("launcher") == "single" and REPLICA_FOLDER.fullmatch(m.group(1)):
        return None  # a replica of single (the statistical tier): runs/single-r<k>
    return (
        f"{rel}: launcher: {data.get('launcher')!r}, but the run lives in runs/{m.group(1)}: a run "
        f"copied from another launcher's folder (dvc repro the stage that writes runs/{m.group(1)})"
    )


@dataclass
class Artifacts:
    """One gate's view of the artifact tree; remembers the md5 of everything it read.

    Everything read is checked against dvc.lock: an artifact edited after its stage wrote it (a
    file out, or any file inside a folder out) or one whose stage dvc.lock does not list is an error.
    """

    root: Path
    lock: DvcLock
    params: Params | None = None  # resolved params.yaml: what the runs must have been
    scope: list[str] | None = None  # the selected gates' stages (None: every gate, every stage)
    read: dict[str, dict[str, Any]] = field(default_factory=dict)
    # shared by every gate's view: each file is validated once per check (validation is most of the cost)
    validated: dict[tuple[str, str, str], Any] = field(default_factory=dict)

    def for_gate(self) -> Artifacts:
        return Artifacts(self.root, self.lock, self.params, self.scope, validated=self.validated)

    def _require(self, rel: str, stage: str) -> Path:
        path = self.root / rel
        if self.lock.removed(stage):
            raise ArtifactError(
                f"{rel}: stage {stage} was removed from dvc.lock (git HEAD's dvc.lock has it): "
                f"restore dvc.lock (git checkout dvc.lock) or dvc repro {stage}"
            )
        if self.lock.unrecorded(stage):
            raise ArtifactError(
                f"{rel}: dvc.lock has no entry for stage {stage}, which dvc.yaml defines: "
                f"restore dvc.lock (git checkout dvc.lock) or dvc repro {stage}"
            )
        ran = self.lock.ran(stage)
        if path.exists():
            if ran is False:
                raise ArtifactError(
                    f"{rel}: exists but dvc.lock does not record stage {stage}: it was not written by "
                    f"dvc repro (dvc repro {stage})"
                )
            return path
        if ran is False:
            raise StageNotRun(f"stage {stage} has not run (dvc repro {stage})")
        raise ArtifactError(f"{rel}: missing, but stage {stage} ran (dvc repro -f {stage} to rebuild it)")

    def record(self, rel: str, path: Path) -> str:
        md5 = self.lock.md5(rel) if path == self.root / rel else md5_file(path)
        declared = self.lock.pipeline_out(rel)
        if declared and self.lock.out(rel) is None:
            raise ArtifactError(
                f"{rel}: dvc.lock has no entry for out {declared[1]} of stage {declared[0]}: restore "
                f"dvc.lock (git checkout dvc.lock) or dvc repro {declared[0]}"
            )
        why = self.lock.changed(rel, md5)
        self.read[rel] = {"md5": md5, "matches_dvc_lock": None if self.lock.out(rel) is None else why is None}
        if why:
            raise ArtifactError(
                f"{why}: changed since dvc repro wrote it (dvc repro the stage, or restore it)"
            )
        return md5

    def json(self, rel: str, schema: str, stage: str, refuse_non_finite: bool = True) -> Any:
        """The validated content (gates only read it); checked against dvc.lock and for non-finite numbers
        (`refuse_non_finite=False`: only for drawing where they are, never for a verdict)."""
        path = self._require(rel, stage)
        key = (rel, schema, self.record(rel, path))
        if key not in self.validated:
            try:
                self.validated[key] = contract.read(contract.kind_of_schema(schema), path)
            except ValidationError as e:
                raise ArtifactError(str(e).replace(str(path), rel, 1)) from None
        data = self.validated[key]
        if misplaced := misplaced_run(rel, data):
            raise ArtifactError(misplaced)
        bad = nonfinite(data) if refuse_non_finite else []
        if bad:
            raise NonFinite(
                f"{rel}: {bad[0]}" + (f" ({len(bad)} non-finite numbers)" if len(bad) > 1 else "")
            )
        return data

    def folder(self, rel: str, stage: str, exclude: tuple[str, ...] = ()) -> dict[str, str]:
        """md5 of every file in an artifact folder (each one recorded)."""
        path = self._require(rel, stage)
        return {
            f.name: self.record(f"{rel}/{f.name}", f)
            for f in sorted(path.iterdir())
            if f.is_file() and f.name not in exclude
        }

    def path(self, rel: str, stage: str) -> Path:
        """An artifact file that a gate recomputes from (checked against dvc.lock, like json())."""
        path = self._require(rel, stage)
        self.record(rel, path)
        return path
