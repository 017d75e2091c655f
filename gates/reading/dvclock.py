"""dvc.lock as the gates read it: which stages ran, and the md5 DVC recorded for every out.

A file out is its md5; a directory out is DVC's `.dir` hash: the md5 of the JSON list of
{"md5", "relpath"} of its files, sorted by relpath (dvc_data's Tree.as_bytes). Computing it here
keeps the gates torch- and dvc-free and fast (importing dvc alone costs more than every gate).
When the `.dir` listing is in the DVC cache, the file that changed is named; otherwise the folder.

dvc.yaml says which stages and outs the pipeline has: dvc.lock must exist and record every one of
them (a missing or partial dvc.lock would turn every artifact check off), so both are read here.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.fileio import md5_file, read_json
from contracts.validate import ValidationError
from contracts.yamlfile import decoded, load_pipeline, load_pipeline_text
from gates.reading.dvcyaml import DvcYamlError, StageDef, pipeline_stages

HEAD_LOCK = "HEAD:dvc.lock"  # the committed dvc.lock as its errors would name it (they are dropped)
LISTING_BYTES = 64 << 20  # DVC's cached `.dir` listing: 100,000 files are ~10 MB


class LockError(Exception):
    """dvc.lock or dvc.yaml unreadable: exit 2."""


def _stages_of(data: Any, source: str = "dvc.lock") -> dict[str, Any]:
    """dvc.lock's stages; anything that is not a DVC lock file (schema 2.0) is LockError."""
    data = {} if data is None else data
    if (
        not isinstance(data, dict)
        or not set(data) <= {"schema", "stages"}
        or data.get("schema", "2.0") != "2.0"
    ):
        raise LockError(f"{source}: not a DVC lock file (schema '2.0' and its stages)")
    stages = data.get("stages") or {}
    if not isinstance(stages, dict) or not all(isinstance(body, dict) for body in stages.values()):
        raise LockError(f"{source}: stages: not a mapping of stage entries")
    return dict(stages)


def _committed_stages(root: Path) -> set[str]:
    """Stages of the dvc.lock committed at git HEAD (empty outside git): a stage deleted from the
    working dvc.lock must not turn its gates into a silent skip."""
    try:
        out = subprocess.run(
            # ./: the dvc.lock beside dvc.yaml, also where the DVC project is a subdirectory of the git
            # repository (examples/hf-trainer); HEAD:dvc.lock would name the repository root's
            ["git", "-C", str(root), "show", "HEAD:./dvc.lock"],
            capture_output=True,  # bytes: text=True raised UnicodeDecodeError on a non-UTF-8 commit
            timeout=5,  # pragma: no mutate -- equivalent: only bounds a git that hangs
        )
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if out.returncode != 0:
        return set()
    try:  # bounded like the working one: a hostile commit cannot hang the check either
        text = decoded(
            out.stdout,
            HEAD_LOCK,  # pragma: no mutate -- equivalent: it names an error that is dropped
        )
        data = load_pipeline_text(
            text,
            HEAD_LOCK,  # pragma: no mutate -- equivalent: it names an error that is dropped
            aliases=False,  # pragma: no mutate -- equivalent: None is False
        )
        return set(_stages_of(data))
    except (ValidationError, LockError):  # unreadable at HEAD: nothing committed to compare with
        return set()


def dir_listing(folder: Path, lock: DvcLock | None = None) -> list[dict[str, str]]:
    """Every file under `folder` as DVC lists it: [{"md5", "relpath"}] sorted by relpath."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    digest = (lambda p: lock.md5(p.relative_to(lock.root).as_posix())) if lock else md5_file
    return [{"md5": digest(p), "relpath": p.relative_to(folder).as_posix()} for p in files]


def dir_md5(listing: list[dict[str, str]]) -> str:
    return hashlib.md5(json.dumps(listing, sort_keys=True).encode()).hexdigest() + ".dir"


def cache_dir(root: Path) -> Path:
    """DVC's cache (core `cache.dir` in .dvc/config or config.local, relative to .dvc/)."""
    cfg = configparser.ConfigParser()
    cfg.read([root / ".dvc" / "config", root / ".dvc" / "config.local"])
    where = cfg.get(
        "cache",
        "dir",  # pragma: no mutate -- equivalent: configparser lowercases option names ("DIR" reads "dir")
        fallback=None,
    )
    return (root / ".dvc" / where) if where else root / ".dvc" / "cache"


@dataclass
class DvcLock:
    root: Path
    stages: dict[str, Any]  # dvc.lock's stages
    committed: set[str] = field(default_factory=set)
    pipeline: dict[str, list[str]] = field(default_factory=dict)  # dvc.yaml: stage -> out paths
    definitions: dict[str, StageDef] = field(default_factory=dict)  # dvc.yaml: each stage as DVC resolves it
    _dirs: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    _md5: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, root: Path) -> DvcLock:
        path = root / "dvc.lock"
        if not path.is_file():
            raise LockError(
                f"{path}: missing: without it no artifact can be checked against what dvc repro "
                "wrote (git checkout dvc.lock, or dvc repro)"
            )
        try:  # bounded: a regular file of at most 32 MiB, no aliases, nesting at most 32 deep
            stages = _stages_of(
                load_pipeline(
                    path,
                    aliases=False,  # pragma: no mutate -- equivalent: None is False
                ),
                str(path),
            )
            definitions = pipeline_stages(root)
        except (ValidationError, DvcYamlError) as e:
            raise LockError(str(e)) from None
        outs = {name: d.out_paths for name, d in definitions.items()}
        return cls(root, stages, _committed_stages(root), outs, definitions)

    def ran(self, stage: str) -> bool:
        return stage in self.stages

    def in_pipeline(self, stage: str) -> bool:
        """This project has the stage at all: dvc.yaml defines it, or dvc.lock (working or git HEAD's) records it."""
        return stage in self.pipeline or stage in self.stages or stage in self.committed

    def removed(self, stage: str) -> bool:
        """The stage is in git HEAD's dvc.lock but not in the working one."""
        return stage not in self.stages and stage in self.committed

    def unrecorded(self, stage: str) -> bool:
        """dvc.yaml defines the stage but dvc.lock has no entry for it (a partial dvc.lock)."""
        return stage in self.pipeline and stage not in self.stages

    def pipeline_out(self, rel: str) -> tuple[str, str] | None:
        """(stage, out path) of the dvc.yaml out that is `rel` or contains it."""
        for stage, outs in self.pipeline.items():
            for path in outs:
                if rel == path or rel.startswith(path.rstrip("/") + "/"):
                    return stage, path
        return None

    def md5(self, rel: str) -> str:
        """md5 of a file under the root, hashed once per check (the seals and the gates share it)."""
        if rel not in self._md5:
            self._md5[rel] = md5_file(self.root / rel)
        return self._md5[rel]

    def listing(self, path: str) -> list[dict[str, str]]:
        if path not in self._dirs:
            self._dirs[path] = dir_listing(self.root / path, self)
        return self._dirs[path]

    def out(self, rel: str) -> tuple[str, str] | None:
        """(out path, recorded md5) of the out that is `rel` or contains it."""
        for body in self.stages.values():
            for out in (body or {}).get("outs") or []:
                path = out.get("path", "")
                if rel == path or rel.startswith(path.rstrip("/") + "/"):
                    return path, out.get("md5", "")
        return None

    def changed(self, rel: str, md5: str) -> str | None:
        """Why `rel` (with content `md5`) differs from what dvc.lock recorded, or None if it does not."""
        found = self.out(rel)
        if found is None:
            return None
        path, recorded = found
        if path == rel:
            return None if recorded == md5 else f"{rel}: md5 {md5}, dvc.lock recorded {recorded}"
        return ", ".join(self.folder_changes(path, recorded)) or None

    def folder_changes(self, path: str, recorded: str) -> list[str]:
        """Why folder `path` differs from its recorded `.dir` hash: each file when DVC's cache has the
        listing, else the folder; [] when it does not differ."""
        listing = self.listing(path)
        now = dir_md5(listing)
        if now == recorded:
            return []
        return self._which_files(path, recorded, listing) or [
            f"{path}: folder hash {now}, dvc.lock recorded {recorded}"
        ]

    def _which_files(self, path: str, recorded: str, listing: list[dict[str, str]]) -> list[str]:
        obj = cache_dir(self.root) / "files" / "md5" / recorded[:2] / recorded[2:]
        try:  # DVC's own object, bounded all the same
            then = {e["relpath"]: e["md5"] for e in read_json(obj, limit=LISTING_BYTES)}
        except (ValidationError, TypeError, KeyError):
            return []
        now = {e["relpath"]: e["md5"] for e in listing}
        diff = sorted(k for k in then.keys() | now.keys() if then.get(k) != now.get(k))
        return [
            f"{path}/{k}: md5 {now.get(k, '(absent)')}, dvc.lock recorded {then.get(k, '(absent)')}"
            for k in diff
        ]
