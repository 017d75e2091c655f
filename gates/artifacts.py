"""Reading artifacts for the gates: schema-validated, md5-recorded, and missing-vs-not-run aware.

A missing artifact is `skip` only when dvc.lock exists and shows its stage never ran; when the
stage ran (or there is no dvc.lock to tell), a missing or invalid artifact is an error (exit 2)
naming the file, the JSON path and the schema rule. No gate passes on an artifact it did not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from xtrain.fileio import md5_file
from xtrain.validate import ValidationError, load_json, load_schema


class ArtifactError(Exception):
    """Missing or invalid artifact from a stage that ran: the gate is `error`, exit code 2."""


class StageNotRun(Exception):
    """The artifact's stage has not run (per dvc.lock): the gate is `skip`."""


@dataclass(frozen=True)
class DvcLock:
    stages: dict[str, Any] | None  # None: no dvc.lock (cannot tell which stages ran)

    @classmethod
    def read(cls, root: Path) -> DvcLock:
        path = root / "dvc.lock"
        if not path.exists():
            return cls(None)
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise ArtifactError(f"{path}: not valid YAML: {e}") from None
        return cls(dict(data.get("stages") or {}))

    def ran(self, stage: str) -> bool | None:
        return None if self.stages is None else stage in self.stages

    def md5(self, rel: str) -> str | None:
        for body in (self.stages or {}).values():
            for out in body.get("outs") or []:
                if out.get("path") == rel:
                    return out.get("md5")
        return None


@dataclass
class Artifacts:
    """One gate's view of the artifact tree; remembers the md5 of everything it read."""

    root: Path
    lock: DvcLock
    read: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_gate(self) -> Artifacts:
        return Artifacts(self.root, self.lock)

    def _require(self, rel: str, stage: str) -> Path:
        path = self.root / rel
        if path.exists():
            return path
        if self.lock.ran(stage) is False:
            raise StageNotRun(f"stage {stage} has not run (dvc repro {stage})")
        raise ArtifactError(f"{rel}: missing, but stage {stage} ran (dvc repro -f {stage} to rebuild it)")

    def record(self, rel: str, path: Path) -> None:
        md5 = md5_file(path)
        locked = self.lock.md5(rel)
        self.read[rel] = {"md5": md5, "matches_dvc_lock": None if locked is None else locked == md5}

    def json(self, rel: str, schema: str, stage: str) -> Any:
        path = self._require(rel, stage)
        try:
            data = load_json(str(path), load_schema("gates", schema))
        except ValidationError as e:
            e_text = str(e).replace(str(path), rel, 1)
            raise ArtifactError(e_text) from None
        self.record(rel, path)
        return data

    def folder(self, rel: str, stage: str, exclude: tuple[str, ...] = ()) -> dict[str, str]:
        """md5 of every file in an artifact folder (each one recorded)."""
        path = self._require(rel, stage)
        out = {}
        for f in sorted(path.iterdir()):
            if f.is_file() and f.name not in exclude:
                self.record(f"{rel}/{f.name}", f)
                out[f.name] = self.read[f"{rel}/{f.name}"]["md5"]
        return out

    def stale(self) -> list[str]:
        """Artifacts whose content differs from what dvc.lock recorded (edited after the stage ran)."""
        return sorted(rel for rel, info in self.read.items() if info["matches_dvc_lock"] is False)
