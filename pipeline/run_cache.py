"""DVC's cache under `python -m pipeline.repro`: verified after a restore, bypassed when it cannot be written.

DVC checks a cache object's md5 on use only while the object is writable: once protected (mode 0444,
which DVC sets itself after the first check) it is trusted by its mode alone (dvc_data
`LocalHashFileDB.check`). An object changed in place, or pulled corrupt from a remote whose copy is
0444, is checked out as the stage's output, dvc.lock keeps the recorded md5 and `dvc status` says "up
to date" (measured with DVC 3.67, docs/run-cache.md). So after a repro, every out of a stage DVC
restored is hashed against dvc.lock (as the seals do); a stage whose out differs has its corrupt cache
objects removed and is run again here with `dvc repro -f -s` (which never restores), and so is every
stage that ran downstream of it; one line says so.

A cache DVC cannot write (`.dvc/cache` or its run cache read-only, immutable or not a folder) failed
every stage after its command ran; it is now one warning line, nothing is pulled (a pull writes the
cache) and the repro runs with `--no-commit`: the stages run, and restore from what the cache holds, as
before; their outputs are not cached (nothing to push); the gates never needed the cache
(gates/reading/dvcstatus.py: "not in cache" is not staleness).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contracts.fileio import md5_file


def cache_dirs() -> tuple[Path, Path]:
    """DVC's object store (files/md5) and run cache (runs) for the checkout in the working directory."""
    from dvc.repo import Repo

    with Repo(".") as repo:
        return Path(repo.cache.local.path), Path(repo.cache.legacy.path) / "runs"


def cannot_write(folder: Path) -> str | None:
    """Why nothing can be written into `folder` (made as DVC would make it), or None when it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=".probe-")
    except OSError as e:
        return f"{e.strerror or e} ({errno.errorcode.get(e.errno or 0, '?')})"
    os.close(fd)
    os.unlink(name)
    return None


def unwritable_cache() -> str | None:
    """One warning line when DVC's cache cannot be written (the repro then runs with --no-commit), else None."""
    from dvc.exceptions import DvcException

    try:
        folders = cache_dirs()
    except DvcException:  # not a DVC checkout: dvc repro says so itself
        return None
    for folder in folders:
        why = cannot_write(folder)
        if why:
            return (
                f"repro: warning: DVC's cache {folder} cannot be written ({why}): the stages run without "
                "caching their outputs (dvc repro --no-commit; nothing to push)"
            )
    return None


def lock_outs(lock: Any, stage: str) -> list[dict[str, Any]]:
    return [o for o in (lock.stages.get(stage) or {}).get("outs") or [] if isinstance(o, dict)]


def corrupt_restored(stages: dict[str, str]) -> dict[str, list[str]]:
    """Each stage DVC restored whose outs are not the bytes dvc.lock records: stage -> the differences."""
    restored = [s for s, how in stages.items() if how == "restored"]
    if not restored:
        return {}
    from gates.reading.dvclock import DvcLock
    from gates.reading.dvcstatus import md5_now

    lock = DvcLock.read(Path("."))
    bad: dict[str, list[str]] = {}
    for stage in restored:
        for out in lock_outs(lock, stage):
            now, recorded = md5_now(lock, str(out.get("path"))), out.get("md5")
            if now != recorded:
                bad.setdefault(stage, []).append(f"{out.get('path')}: md5 {now}, dvc.lock records {recorded}")
    return bad


def objects_of(objects: Path, md5: str) -> Iterator[tuple[Path, str]]:
    """(cache object, the md5 its bytes must have) for an out's recorded md5: a folder's listing and files."""
    obj = objects / md5[:2] / md5[2:]
    yield obj, md5.removesuffix(".dir")
    if md5.endswith(".dir"):
        with contextlib.suppress(OSError, ValueError, TypeError):
            for entry in json.loads(obj.read_bytes()):
                yield objects / entry["md5"][:2] / entry["md5"][2:], entry["md5"]


def drop_corrupt(objects: Path, outs: list[dict[str, Any]]) -> list[Path]:
    """Remove every cache object of `outs` whose bytes do not hash to its name (DVC trusts 0444 ones)."""
    dropped = []
    for out in outs:
        for obj, want in list(objects_of(objects, str(out.get("md5", "")))):
            with contextlib.suppress(OSError):
                if obj.is_file() and md5_file(obj) != want:
                    obj.chmod(0o644)
                    obj.unlink()
                    dropped.append(obj)
    return dropped


def to_remake(bad: set[str], stages: dict[str, str], upstream: dict[str, set[str]]) -> list[str]:
    """The corrupt stages and every stage that ran on what one wrote (directly or through stages that ran),
    upstream first."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(stage: str) -> None:
        if stage not in seen:
            seen.add(stage)
            for up in sorted(upstream.get(stage, ())):
                visit(up)
            order.append(stage)

    for stage in sorted(upstream):
        visit(stage)

    def read_bad(stage: str) -> bool:  # through stages that ran here (a restored one is verified apart)
        return any(up in bad or (stages.get(up) == "ran" and read_bad(up)) for up in upstream.get(stage, ()))

    return [s for s in order if s in bad or (stages.get(s) == "ran" and read_bad(s))]
