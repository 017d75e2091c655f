"""One writer at a time: a lock file beside what is written (torch-free), as git's index.lock.

    <folder>/.<name>.lock    exists while a writer holds it; one line: the writer's pid and command

A writer creates the lock file and holds flock(2) on it; a second writer waits up to `wait_s` and
then fails in one line naming the holder's pid and command. The kernel drops flock when the holder
exits, however it exits, so a lock file left by a killed writer is known to be stale: the next
writer takes it over and names whose it was (git leaves that to the user; DVC's lock, zc.lockfile,
is flock too). A holder releases by deleting the file while still holding it; a waiter that locked
the deleted file sees it is no longer the file at the path and starts over.

Not the `filelock` package (installed with torch): its flock lock does not record its holder (the
pid lives only in its soft fallback), so a waiter could not say who holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from pathlib import Path

from contracts.errors import XtrainError, printable
from contracts.fileio import naming_the_file

WAIT_S = 10.0  # how long a second writer of a params file or a registry waits for the first
POLL_S = 0.05


class Busy(XtrainError):
    """Another writer holds the lock: one line naming it (exit 2, as every refusal before work)."""

    exit_code = 2


def lock_path(target: str | Path) -> Path:
    """The lock of `target`: `.<name>.lock` beside it (a run folder's, a params file's, a registry's)."""
    target = Path(target)
    return target.parent / f".{target.name}.lock"


def _flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _same_file(fd: int, path: Path) -> bool:
    """The open lock file is still the one at `path` (not deleted by a holder that released it)."""
    try:
        at = os.lstat(path)  # a link put in its place is another file
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (at.st_dev, at.st_ino)


def _named(fd: int) -> list[str]:
    """The lock file's line (its first 512 bytes): [pid, command], [pid] or [] (empty)."""
    return os.pread(fd, 512, 0).decode(errors="replace").split(maxsplit=1)  # UTF-8


def holder(fd: int) -> str:
    """Who the lock file names: `pid N (command)`, or `an unknown process` (an empty file)."""
    words = _named(fd)
    if not words:
        return "an unknown process"
    what = f" ({printable(words[1].strip())})" if len(words) > 1 else ""
    return f"pid {printable(words[0])}{what}"


def holding(target: str | Path) -> str | None:
    """Who holds `target`'s lock now (`pid N (command)`), or None: nobody, or this process itself. A
    reader that finds a writer's half-done work names the writer instead of blaming a past crash."""
    try:
        fd = os.open(lock_path(target), os.O_RDONLY | os.O_NOFOLLOW)  # Python adds O_CLOEXEC (PEP 446)
    except OSError:  # no lock file: nobody writes
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return None if _named(fd)[:1] == [str(os.getpid())] else holder(fd)
        return None  # a lock file nobody holds (left by a killed writer)
    finally:
        os.close(fd)


class WriteLock:
    """The lock of one target; `acquire()` ... `release()`, or a `with` block."""

    def __init__(self, target: str | Path, what: str) -> None:
        self.target, self.what = Path(target), what
        self.path = lock_path(self.target)
        self.fd: int | None = None
        self.stale: str | None = None  # the holder named by a stale lock file this writer took over

    def acquire(self, wait_s: float | None = None) -> WriteLock:
        """Hold the lock, waiting up to `wait_s` (default WAIT_S) for another writer; Busy naming it after."""
        deadline = time.monotonic() + (WAIT_S if wait_s is None else wait_s)
        while True:
            # its folder must exist: a lock never makes one; never through a link; O_CLOEXEC: Python's
            with naming_the_file(self.path):  # pragma: no mutate -- equivalent: os.open's error names it
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            if _flock(fd):
                if _same_file(fd, self.path):
                    break
                os.close(fd)  # its holder released it (deleted the file) as this one opened it
                continue
            who = holder(fd)
            os.close(fd)
            if time.monotonic() >= deadline:  # pragma: no mutate -- equivalent: `>`, the clock moved
                raise Busy(
                    f"{self.target}: being written by {who} (lock {self.path}); next: let it finish "
                    f"(or stop it), then re-run"
                )
            time.sleep(POLL_S)
        if os.fstat(fd).st_size:  # no holder, yet a name: its writer ended without removing it (killed)
            self.stale = holder(fd)
            print(
                f"warning: {self.path}: left by {self.stale}, which ended without removing it; taken over",
                file=sys.stderr,
            )
        written = os.pwrite(fd, f"{os.getpid()} {printable(self.what)}\n".encode(), 0)
        os.ftruncate(fd, written)  # a longer line of a stale holder's is cut
        self.fd = fd
        return self

    def release(self) -> None:
        """Delete the lock file (while still holding it), then let go. Idempotent."""
        fd, self.fd = self.fd, None
        if fd is None:
            return
        try:
            if _same_file(fd, self.path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
        finally:
            os.close(fd)

    def __enter__(self) -> WriteLock:
        return self if self.fd is not None else self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def held(target: str | Path, what: str, wait_s: float | None = None) -> WriteLock:
    """`with held(params.yaml, "pipeline.config set"):` the one writer of `target` for the block."""
    return WriteLock(target, what).acquire(wait_s)
