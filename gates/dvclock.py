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
            # ./: the dvc.lock beside dvc.yaml, also where the DVC project is a subdirectory of the git
            # repository (examples/hf-trainer); HEAD:dvc.lock would name the repository root's
            ["git", "-C", str(root), "show", "HEAD:./dvc.lock"],
            capture_output=True,
            text=True,  # pragma: no mutate -- equivalent: yaml reads bytes as well as text
            timeout=5,  # pragma: no mutate -- equivalent: only bounds a git that hangs
        )
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if out.returncode != 0:
        return set()
    try:
        return set(_parse(out.stdout, "HEAD:dvc.lock"))  # pragma: no mutate -- equivalent: error dropped
    except LockError:
        return set()


def _outs_of(body: dict[str, Any]) -> list[str]:
    """The paths of a dvc.yaml stage's outs, metrics and plots (DVC records all three in dvc.lock)."""
    paths = []
    for key in ("outs", "metrics", "plots"):
        for entry in body.get(key) or []:
            paths.append(str(next(iter(entry))) if isinstance(entry, dict) else str(entry))
    return paths


def _expand(name: str, body: dict[str, Any]) -> dict[str, list[str]]:
    """One dvc.yaml stage, a `foreach` expanded to `name@key` (${key}, ${item} substituted)."""
    if "foreach" not in body:
        return {name: _outs_of(body)}
    each, do = body["foreach"], body.get("do") or {}
    pairs = each.items() if isinstance(each, dict) else ((v, v) for v in each)
    return {
        f"{name}@{key}": [p.replace("${key}", str(key)).replace("${item}", str(item)) for p in _outs_of(do)]
        for key, item in pairs
    }


def pipeline_stages(root: Path) -> dict[str, list[str]]:
    """Every stage of dvc.yaml and its out paths."""
    path = root / "dvc.yaml"
    if not path.is_file():
        raise LockError(f"{path}: missing: the gates cannot tell which stages the pipeline has")
    try:
        data = yaml.load(path.read_text(), Loader=Loader) or {}
    except yaml.YAMLError as e:
        raise LockError(f"{path}: not valid YAML: {e}") from None
    stages: dict[str, list[str]] = {}
    for name, body in ((data.get("stages") or {}) if isinstance(data, dict) else {}).items():
        stages.update(_expand(str(name), body if isinstance(body, dict) else {}))
    return stages


def dir_listing(folder: Path, lock: DvcLock | None = None) -> list[dict[str, str]]:
    """Every file under `folder` as DVC lists it: [{"md5", "relpath"}] sorted by relpath."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    digest = (lambda p: lock.md5(p.relative_to(lock.root).as_posix())) if lock else md5_file
    return [{"md5": digest(p), "relpath": p.relative_to(folder).as_posix()} for p in files]


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
    stages: dict[str, Any]  # dvc.lock's stages
    committed: set[str] = field(default_factory=set)
    pipeline: dict[str, list[str]] = field(default_factory=dict)  # dvc.yaml: stage -> out paths
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
        return cls(root, _parse(path.read_text(), str(path)), _committed_stages(root), pipeline_stages(root))

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
        try:
            then = {e["relpath"]: e["md5"] for e in json.loads(obj.read_text())}
        except (OSError, ValueError, TypeError, KeyError):
            return []
        now = {e["relpath"]: e["md5"] for e in listing}
        diff = sorted(k for k in then.keys() | now.keys() if then.get(k) != now.get(k))
        return [
            f"{path}/{k}: md5 {now.get(k, '(absent)')}, dvc.lock recorded {then.get(k, '(absent)')}"
            for k in diff
        ]
