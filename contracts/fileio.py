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

from contracts.errors import FileWriteError, ValidationError


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
        # a copy that runs out of room fails on its destination, which shutil names second
        written = (
            e.filename2 if e.errno in (errno.EFBIG, errno.ENOSPC, errno.EDQUOT) and e.filename2 else None
        )
        name = Path(written or e.filename or path)
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
    return _file_digest(path, "sha256")  # pragma: no mutate -- equivalent: hashlib.new("SHA256") is sha256


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


MAX_JSON_BYTES = 256 << 20  # an input JSON file; the largest the pipeline writes (metrics.json) is ~1 MB
MAX_JSON_DEPTH = 64  # the deepest artifact nests 6 levels


def too_deep(data: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `data` nests deeper than `limit` (iterative: no recursion to exhaust)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def read_json(path: str | Path, source: str = "", limit: int = MAX_JSON_BYTES, hint: str = "") -> Any:
    """The JSON value of a regular file of at most `limit` bytes, nested at most MAX_JSON_DEPTH deep.

    Every JSON input is read here: `gates diff /dev/zero /dev/zero` ran until the kernel killed it at
    ~22 GB, and a deeply nested report gave a RecursionError (exit 1: "a gate got worse"). A device,
    FIFO or folder is refused by type, a file over `limit` by size, text that is not UTF-8 or JSON by
    line and column, and nesting over MAX_JSON_DEPTH before any schema walks it: a ValidationError
    naming the file (exit 2). YAML inputs have the same rules in contracts/yamlfile.py."""
    source = source or str(path)
    data = read_regular(path, limit, source, hint=hint)
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValidationError(
            source, f"byte {e.start}", "not UTF-8 text", "a UTF-8 JSON file", hint
        ) from None
    except json.JSONDecodeError as e:
        raise ValidationError(
            source, f"line {e.lineno} column {e.colno}", f"not valid JSON: {e.msg}"
        ) from None
    except RecursionError:
        raise ValidationError(source, "", f"nested deeper than {MAX_JSON_DEPTH} levels", "", hint) from None
    if too_deep(value):
        raise ValidationError(source, "", f"nested deeper than {MAX_JSON_DEPTH} levels", "", hint)
    return value
