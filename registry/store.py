"""The registry on disk (torch-free): blessed export versions, per-environment goldens, pinned checkpoints.

    registry/models/<model>/v<N>.json     a blessed export of the model's pinned checkpoint
    registry/goldens/<env_id>/v<N>.json   golden values of a fresh pipeline run on one environment
    registry/baselines/<env_id>/v<N>.json perf baseline (raw windows, peak memory) of one environment
    registry/pinned/<model>/              the pinned reference checkpoint (+ pin.json)

Every file is validated against contracts/schemas/ when read; a hand-broken file is a one-line
schema error naming the file and key. Every file also carries `content_sha256`, the sha256 of its
canonical JSON without that field, written when it is blessed and checked on every read: a hand
edit (a golden moved to match a run, cut short or switched to another tier) is an error. Entries
are write-once: a new blessing is a new version, created with an exclusive link so an existing
file can never be replaced.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import XtrainError
from contracts.fileio import canonical_json, md5_file
from contracts.validate import ValidationError
from registry import index
from registry.sealed import VERSION_FILE, load_sealed

ROOT = Path(__file__).resolve().parent
MANIFEST = "manifest.json"


class RegistryError(XtrainError, RuntimeError):
    exit_code = 2


@dataclass(frozen=True)
class Entry:
    path: Path
    data: dict[str, Any]

    @property
    def version(self) -> int:
        return int(self.data["version"])


def write_once(path: Path, obj: dict[str, Any]) -> None:
    """Create `path` atomically; refuse if it exists (a blessed entry is never rewritten)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # pragma: no mutate -- equivalent: the JSON is ASCII
            f.write(canonical_json(obj))
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, path)  # fails if path exists: no overwrite, no race
        except FileExistsError:
            raise RegistryError(f"{path} already exists: registry entries are never rewritten") from None
    finally:
        with contextlib.suppress(FileNotFoundError):  # pragma: no mutate -- equivalent: tmp exists here
            os.unlink(tmp)


class Registry:
    def __init__(self, root: str | Path = ROOT) -> None:
        self.root = Path(root)
        self._indexed = False  # pragma: no mutate -- equivalent: None is as falsy (hides True too)

    # -- the index (registry/index.py): checked before the first read, extended by every write --
    def verify_index(self) -> int:
        """Every file on disk against registry/index.json (once per instance); returns the files listed."""
        listed = index.check(self.root)
        self._indexed = True
        return len(listed)

    def _require_index(self) -> None:
        if not self._indexed:
            self.verify_index()

    def record(self, *paths: Path) -> None:
        """Add files just written (a blessed version, golden, baseline, pinned checkpoint) to the index."""
        index.record(self.root, list(paths))
        self._indexed = True

    # -- reading --
    def _entries(self, folder: Path, schema: str) -> list[Entry]:
        self._require_index()
        if not folder.is_dir():
            return []
        out = []
        for f in sorted(folder.iterdir()):
            m = VERSION_FILE.fullmatch(f.name)
            if not m:
                continue
            data = load_sealed(f, schema)
            if data["version"] != int(m.group(1)):
                raise ValidationError(
                    str(f),
                    "version",
                    f"{data['version']} does not match the file name",
                    f"version {m.group(1)}",
                )
            out.append(Entry(f, data))
        return sorted(out, key=lambda e: e.version)

    def models(self) -> list[str]:
        self._require_index()
        d = self.root / "models"
        return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []

    def versions(self, model: str) -> list[Entry]:
        return self._named(self._entries(self.root / "models" / model, "version.schema.json"), "model", model)

    def version(self, model: str, dtype: str, number: int | None = None) -> Entry:
        """The given version, or the latest one blessed for this dtype."""
        candidates = [e for e in self.versions(model) if e.data["dtype"] == dtype]
        if number is not None:
            candidates = [e for e in candidates if e.version == number]
        if not candidates:
            what = f"version {number}" if number is not None else f"a {dtype} version"
            raise RegistryError(
                f"registry/models/{model}: no {what} blessed "
                f"(bless one: python -m registry bless --reason '...')"
            )
        return candidates[-1]

    def env_ids(self) -> list[str]:
        self._require_index()
        d = self.root / "goldens"
        return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []

    def goldens(self, env_id: str) -> list[Entry]:
        return self._named(
            self._entries(self.root / "goldens" / env_id, "golden.schema.json"), "env_id", env_id
        )

    @staticmethod
    def _named(entries: list[Entry], key: str, folder: str) -> list[Entry]:
        """A sealed file moved into another model's or environment's folder is refused."""
        for e in entries:
            if e.data[key] != folder:
                raise ValidationError(
                    str(e.path), key, f"{e.data[key]!r} does not match its folder", repr(folder)
                )
        return entries

    def golden(self, env_id: str) -> Entry | None:
        entries = self.goldens(env_id)
        return entries[-1] if entries else None

    def baseline_env_ids(self) -> list[str]:
        self._require_index()
        d = self.root / "baselines"
        return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []

    def baselines(self, env_id: str) -> list[Entry]:
        return self._entries(self.root / "baselines" / env_id, "baseline.schema.json")

    def baseline(self, env_id: str) -> Entry | None:
        entries = self.baselines(env_id)
        return entries[-1] if entries else None

    def pinned_dir(self, model: str) -> Path:
        self._require_index()
        return self.root / "pinned" / model

    def pin(self, model: str) -> dict[str, Any]:
        return load_sealed(self.pinned_dir(model) / "pin.json", "pinned.schema.json")

    def validate_all(self) -> int:
        """Read (and so validate) every registry file; returns how many were checked."""
        n = 0
        for model in self.models():
            n += len(self.versions(model))
            if self.pinned_dir(model).exists():
                self.pin(model)
                n += 1
        for env_id in self.env_ids():
            n += len(self.goldens(env_id))
        for env_id in self.baseline_env_ids():
            n += len(self.baselines(env_id))
        return n

    # -- writing --
    def next_path(self, folder: Path) -> Path:
        existing = [int(m.group(1)) for f in folder.glob("v*.json") if (m := VERSION_FILE.fullmatch(f.name))]
        return folder / f"v{max(existing, default=0) + 1}.json"


def export_files(export_dir: Path) -> dict[str, str]:
    """md5 of every file of an export folder except its manifest (the manifest describes them)."""
    if not export_dir.is_dir():
        raise RegistryError(f"{export_dir}: export folder not found (run `dvc repro export`)")
    return {p.name: md5_file(p) for p in sorted(export_dir.iterdir()) if p.is_file() and p.name != MANIFEST}


@dataclass(frozen=True)
class FileCheck:
    name: str
    expected: str | None
    actual: str | None

    @property
    def ok(self) -> bool:
        return self.expected == self.actual


def compare_files(expected: dict[str, str], actual: dict[str, str]) -> list[FileCheck]:
    return [FileCheck(n, expected.get(n), actual.get(n)) for n in sorted(set(expected) | set(actual))]


@dataclass(frozen=True)
class ExportCheck:
    """An export folder against a blessed version: the one comparison `verify` and the gate share."""

    entry: Entry
    files: list[FileCheck]
    source: FileCheck  # the checkpoint the export came from vs the one the version was blessed for

    @property
    def passed(self) -> bool:
        return self.source.ok and all(c.ok for c in self.files)


def check_export(
    reg: Registry, model: str, manifest: dict[str, Any], actual: dict[str, str], number: int | None = None
) -> ExportCheck:
    """Select the version by model name and the export's dtype (latest unless `number`), compare md5s."""
    entry = reg.version(model, manifest["dtype"], number)
    source = FileCheck(
        "(source checkpoint)", entry.data["source_checkpoint_md5"], manifest["source_checkpoint"]["model_md5"]
    )
    return ExportCheck(entry, compare_files(entry.data["files"], actual), source)
