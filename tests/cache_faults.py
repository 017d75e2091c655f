"""Caches that cannot be written, as a user meets them: a folder nobody here may write into.

Mode 0555 stops an ordinary user; root ignores it, so where it does not hold the folder is made
immutable (chattr +i, as the issue measured it). A machine where neither holds skips the test.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def writable(folder: Path) -> bool:
    try:
        fd, name = tempfile.mkstemp(dir=folder)
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


@contextlib.contextmanager
def unwritable(folder: Path) -> Iterator[Path]:
    """`folder` (made if absent) closed to writes for the duration, opened again afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    immutable = False
    try:
        if writable(folder):
            with contextlib.suppress(FileNotFoundError):  # no chattr on this machine
                immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
            if writable(folder):
                pytest.skip("no way to make a folder unwritable here (root, and no chattr +i)")
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)
