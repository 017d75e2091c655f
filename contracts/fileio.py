"""Atomic file writes and content hashes (torch-free).

Every artifact in the pipeline is written through here: a crash mid-write leaves the previous file
(or none), never a half-written one. Whole outputs (folders, reports) go through contracts/outputs.py,
which refuses to replace what their writer did not make.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contracts.errors import FileWriteError
from contracts.validate import ValidationError


def canonical_json(obj: Any) -> str:
    """Stable JSON text: sorted keys, fixed indent, trailing newline (byte-identical across runs)."""
    return json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n"


@contextlib.contextmanager
def naming_the_file(path: str | Path, scratch: Path | None = None) -> Iterator[None]:
    """An OSError while writing becomes one line naming the file (ENOSPC, EACCES, EFBIG, ...).

    A file inside `scratch` (the temporary twin of directory `path`) is named by its final path.
    """
    try:
        yield
    except OSError as e:
        name = Path(e.filename) if e.filename else Path(path)
        if scratch is not None and name.is_relative_to(scratch):
            name = Path(path) / name.relative_to(scratch)
        raise FileWriteError(name, e) from e


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    with naming_the_file(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, canonical_json(obj))


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_directory(new: Path, dest: Path) -> None:
    """Make directory `new` appear at `dest` (readers see the old or the new one), then delete the old.

    rename(2) cannot replace a non-empty directory: the two are exchanged atomically where the
    kernel can, else the old one is moved aside first.
    """
    new, dest = Path(new), Path(dest)
    if not dest.exists():
        os.replace(new, dest)
        return
    trash = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".old"))
    if _exchange(new, dest):
        os.replace(new, trash / "x")  # `new` now holds the old directory
    else:
        os.replace(dest, trash / "x")
        os.replace(new, dest)
    shutil.rmtree(trash)


def _file_digest(path: str | Path, algorithm: str, chunk: int = 1 << 20) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def md5_file(path: str | Path) -> str:
    return _file_digest(path, "md5")


def sha256_file(path: str | Path) -> str:
    return _file_digest(path, "sha256")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_regular(path: str | Path, limit: int, source: str = "", key: str = "", hint: str = "") -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is one line naming it.

    A device (/dev/zero), FIFO or folder would hang or exhaust memory when read whole: refused
    before it is opened. The read itself stops at `limit + 1` bytes (a file growing meanwhile).
    """
    source = source or str(path)
    where = f"{key}: {path}" if key and source != str(path) else key
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ValidationError(
                source, where, "not a regular file (a device, FIFO or folder)", "a regular file", hint
            )
        if st.st_size > limit:
            raise ValidationError(
                source, where, f"{st.st_size} bytes, larger than the limit", f"<= {limit} bytes", hint
            )
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise ValidationError(source, where, "file not found", "", hint) from None
    except OSError as e:
        raise ValidationError(source, where, f"cannot read: {e.strerror or e}", "", hint) from None
    if len(data) > limit:
        raise ValidationError(
            source, where, "grew larger than the limit while read", f"<= {limit} bytes", hint
        )
    return data
