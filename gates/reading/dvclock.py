"""dvc.lock as the gates read it: which stages ran, and the md5 DVC recorded for every out.

A file out is its md5; a directory out is DVC's `.dir` hash: the md5 of the JSON list of
{"md5", "relpath"} of its files, sorted by relpath (dvc_data's Tree.as_bytes), over the files DVC's
ignore filter keeps (gates/reading/dvcignore.py: `.dvcignore`, `.git`, `.hg`). An entry DVC 2 wrote
(no `hash: md5`) holds md5s of text files read with CRLF as LF ("md5-dos2unix"), and DVC 3 compares
it so: so do the gates. Computing it here keeps the gates torch- and dvc-free and fast (importing dvc
alone costs more than every gate). When the `.dir` listing is in the DVC cache, the file that changed
is named; otherwise the folder. dvc.lock itself is validated by DVC's own schema
(gates/reading/dvcschema.py): an entry DVC refuses (`deps: x`) is one line, exit 2.

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
from gates.reading.dvcignore import IgnoreError, IgnoreFilter
from gates.reading.dvcschema import LOCKFILE, DvcRefuses, check
from gates.reading.dvcyaml import DvcYamlError, StageDef, pipeline_stages

HEAD_LOCK = "HEAD:dvc.lock"  # the committed dvc.lock as its errors would name it (they are dropped)
LISTING_BYTES = 64 << 20  # DVC's cached `.dir` listing: 100,000 files are ~10 MB
CHUNK = 1 << 20  # dvc_data's fobj_md5 reads 1 MiB at a time; each is judged text by its first 512 bytes
TEXT_CHARS = bytes(range(32, 127)) + b"\n\r\t\f\b"  # dvc_data/hashfile/istextfile.py


class LockError(Exception):
    """dvc.lock or dvc.yaml unreadable: exit 2."""


def _stages_of(data: Any, source: str = "dvc.lock") -> dict[str, Any]:
    """dvc.lock's stages; a file DVC's lock schema refuses is LockError with DVC's reason."""
    try:
        check(LOCKFILE, {} if data is None else data, source)
    except DvcRefuses as e:
        raise LockError(str(e)) from None
    return dict(data.get("stages") or {})


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


def dir_listing(folder: Path, lock: DvcLock | None = None, legacy: bool = False) -> list[dict[str, str]]:
    """Every file under `folder` as DVC lists it: [{"md5", "relpath"}] sorted by relpath (with `lock`:
    the files its ignore filter keeps, hashed once; `legacy`: as DVC 2 hashed them)."""
    if lock is None:
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        return [{"md5": md5_file(p), "relpath": p.relative_to(folder).as_posix()} for p in files]
    base = folder.relative_to(lock.root).as_posix()
    return [{"md5": lock.md5(f"{base}/{r}", legacy), "relpath": r} for r in lock.ignore.files(folder)]


def istext(block: bytes) -> bool:
    """dvc_data's istextblock: no NUL and at most 30 % of the bytes outside printable ASCII."""
    if not block:
        return True
    if b"\x00" in block:
        return False
    return len(block.translate(None, TEXT_CHARS)) / len(block) <= 0.30


def md5_dos2unix(path: Path) -> str:
    """The md5 DVC 2 recorded ("md5-dos2unix"): each 1 MiB chunk that looks like text with CRLF as LF."""
    h = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk.replace(b"\r\n", b"\n") if istext(chunk[:512]) else chunk)
    return h.hexdigest()


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
    _dirs: dict[tuple[str, bool], list[dict[str, str]]] = field(default_factory=dict)
    _md5: dict[str, str] = field(default_factory=dict)
    _legacy: dict[str, str] = field(default_factory=dict)
    _ignore: IgnoreFilter | None = None

    @property
    def ignore(self) -> IgnoreFilter:
        """DVC's ignore filter of this project, read once per check."""
        if self._ignore is None:
            self._ignore = IgnoreFilter(self.root, subrepos=True)
        return self._ignore

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
        lock = cls(root, stages, _committed_stages(root), outs, definitions)
        lock.refuse_ignored_outs()
        return lock

    def refuse_ignored_outs(self) -> None:
        """DVC refuses a pipeline with an out that .dvcignore ignores (OutputIsIgnoredError): so do the
        gates, before judging a stage whose out DVC would never hash."""
        rules = IgnoreFilter(self.root)  # DVC asks without nested projects (dvc/output.py)
        for name, paths in self.pipeline.items():
            for out in paths:
                if rules.ignored(self.root / out):
                    raise LockError(
                        f"{self.root / 'dvc.yaml'}: stage {name}: out {out} is ignored by .dvcignore (rule: "
                        "DVC refuses an out its ignore rules hide; dvc status refuses it too)"
                    )

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

    def md5(self, rel: str, legacy: bool = False) -> str:
        """md5 of a file under the root, hashed once per check (the seals and the gates share it);
        `legacy`: as DVC 2 hashed it (md5-dos2unix)."""
        cache, digest = (self._legacy, md5_dos2unix) if legacy else (self._md5, md5_file)
        if rel not in cache:
            cache[rel] = digest(self.root / rel)
        return cache[rel]

    def listing(self, path: str, legacy: bool = False) -> list[dict[str, str]]:
        """The folder's files as DVC hashes them (a ValidationError where DVC refuses the folder)."""
        if (path, legacy) not in self._dirs:
            try:
                self._dirs[path, legacy] = dir_listing(self.root / path, self, legacy)
            except IgnoreError as e:
                raise ValidationError(path, "", str(e), "DVC refuses to hash such a folder") from None
        return self._dirs[path, legacy]

    def legacy(self, rel: str) -> bool:
        """The out holding `rel` was recorded by DVC 2 (no `hash: md5`): hashed as DVC 2 did."""
        found = self.out_entry(rel)
        return found is not None and "hash" not in found[1]

    def out_entry(self, rel: str) -> tuple[str, dict[str, Any]] | None:
        """(out path, dvc.lock's entry) of the out that is `rel` or contains it."""
        for body in self.stages.values():
            for out in (body or {}).get("outs") or []:
                path = out.get("path", "")
                if rel == path or rel.startswith(path.rstrip("/") + "/"):
                    return path, out
        return None

    def out(self, rel: str) -> tuple[str, str] | None:
        """(out path, recorded md5) of the out that is `rel` or contains it."""
        found = self.out_entry(rel)
        return None if found is None else (found[0], found[1].get("md5", ""))

    def changed(self, rel: str, md5: str) -> str | None:
        """Why `rel` (with content `md5`) differs from what dvc.lock recorded, or None if it does not."""
        found = self.out(rel)
        if found is None:
            return None
        path, recorded = found
        if path == rel:
            md5 = self.md5(rel, legacy=True) if self.legacy(rel) else md5
            return None if recorded == md5 else f"{rel}: md5 {md5}, dvc.lock recorded {recorded}"
        return ", ".join(self.folder_changes(path, recorded)) or None

    def folder_changes(self, path: str, recorded: str) -> list[str]:
        """Why folder `path` differs from its recorded `.dir` hash: each file when DVC's cache has the
        listing, else the folder; [] when it does not differ."""
        listing = self.listing(path, self.legacy(path))
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
