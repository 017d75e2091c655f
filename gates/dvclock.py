"""dvc.lock as the gates read it: which stages ran, and the md5 DVC recorded for every out.

A file out is its md5; a directory out is DVC's `.dir` hash: the md5 of the JSON list of
{"md5", "relpath"} of its files, sorted by relpath (dvc_data's Tree.as_bytes). Computing it here
keeps the gates torch- and dvc-free and fast (importing dvc alone costs more than every gate).
When the `.dir` listing is in the DVC cache, the file that changed is named; otherwise the folder.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contracts.fileio import md5_file

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 12 ms instead of 90 ms for dvc.lock


class LockError(Exception):
    """dvc.lock unreadable: exit 2."""


def _parse(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=Loader) or {}
    except yaml.YAMLError as e:
        raise LockError(f"{source}: not valid YAML: {e}") from None
    return dict(data.get("stages") or {}) if isinstance(data, dict) else {}


def _committed_stages(root: Path) -> set[str]:
    """Stages of the dvc.lock committed at git HEAD (empty outside git): a stage deleted from the
    working dvc.lock must not turn its gates into a silent skip."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "show", "HEAD:dvc.lock"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if out.returncode != 0:
        return set()
    try:
        return set(_parse(out.stdout, "HEAD:dvc.lock"))
    except LockError:
        return set()


def dir_listing(folder: Path) -> list[dict[str, str]]:
    """Every file under `folder` as DVC lists it: [{"md5", "relpath"}] sorted by relpath."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return [{"md5": md5_file(p), "relpath": p.relative_to(folder).as_posix()} for p in files]


def dir_md5(listing: list[dict[str, str]]) -> str:
    return hashlib.md5(json.dumps(listing, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def cache_dir(root: Path) -> Path:
    """DVC's cache (core `cache.dir` in .dvc/config or config.local, relative to .dvc/)."""
    cfg = configparser.ConfigParser()
    cfg.read([root / ".dvc" / "config", root / ".dvc" / "config.local"])
    where = cfg.get("cache", "dir", fallback=None)
    return (root / ".dvc" / where) if where else root / ".dvc" / "cache"


@dataclass
class DvcLock:
    root: Path
    stages: dict[str, Any] | None  # None: no dvc.lock (cannot tell which stages ran)
    committed: set[str] = field(default_factory=set)
    _dirs: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    @classmethod
    def read(cls, root: Path) -> DvcLock:
        path = root / "dvc.lock"
        if not path.exists():
            return cls(root, None)
        return cls(root, _parse(path.read_text(), str(path)), _committed_stages(root))

    def ran(self, stage: str) -> bool | None:
        return None if self.stages is None else stage in self.stages

    def removed(self, stage: str) -> bool:
        """The stage is in git HEAD's dvc.lock but not in the working one."""
        return self.stages is not None and stage not in self.stages and stage in self.committed

    def out(self, rel: str) -> tuple[str, str] | None:
        """(out path, recorded md5) of the out that is `rel` or contains it."""
        for body in (self.stages or {}).values():
            for out in body.get("outs") or []:
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
        if path not in self._dirs:
            self._dirs[path] = dir_listing(self.root / path)
        listing = self._dirs[path]
        if dir_md5(listing) == recorded:
            return None
        return self._which_file(path, recorded, listing) or (
            f"{path}: folder hash {dir_md5(listing)}, dvc.lock recorded {recorded}"
        )

    def _which_file(self, path: str, recorded: str, listing: list[dict[str, str]]) -> str | None:
        obj = cache_dir(self.root) / "files" / "md5" / recorded[:2] / recorded[2:]
        try:
            then = {e["relpath"]: e["md5"] for e in json.loads(obj.read_text())}
        except (OSError, ValueError, TypeError, KeyError):
            return None
        now = {e["relpath"]: e["md5"] for e in listing}
        diff = sorted(k for k in then.keys() | now.keys() if then.get(k) != now.get(k))
        return ", ".join(
            f"{path}/{k}: md5 {now.get(k, '(absent)')}, dvc.lock recorded {then.get(k, '(absent)')}"
            for k in diff
        )
