"""contracts/fileio.py _exchange under mutation (docs/judge-mutation.md): renameat2 RENAME_EXCHANGE,
the real call on relative paths (resolved against the working directory, AT_FDCWD) and, for what
this kernel never answers, a fake C library."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest

from contracts import fileio


@pytest.fixture()
def two_dirs(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        Path(name).mkdir()
        (Path(name) / "who").write_text(name)
    return Path("a"), Path("b")


def test_exchange_swaps_two_relative_directories(two_dirs: tuple[Path, Path]) -> None:
    a, b = two_dirs
    assert fileio._exchange(a, b) is True
    assert ((a / "who").read_text(), (b / "who").read_text()) == ("b", "a")


def test_exchange_with_a_missing_path_raises_naming_it(two_dirs: tuple[Path, Path]) -> None:
    a, _ = two_dirs
    with pytest.raises(OSError) as e:
        fileio._exchange(a, Path("absent"))
    assert (e.value.errno, e.value.strerror, e.value.filename) == (
        errno.ENOENT,
        os.strerror(errno.ENOENT),
        "absent",
    )
    assert (a / "who").read_text() == "a"


class FakeLibc:
    def __init__(self, err: int) -> None:
        self.err = err

    def renameat2(self, *args) -> int:
        ctypes.set_errno(self.err)
        return -1


@pytest.mark.parametrize("err", [errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP])
def test_exchange_unsupported_is_false(monkeypatch, err: int) -> None:
    monkeypatch.setattr(fileio.ctypes, "CDLL", lambda *a, **k: FakeLibc(err))
    assert fileio._exchange(Path("x"), Path("y")) is False


def test_exchange_other_errors_are_raised(monkeypatch) -> None:
    monkeypatch.setattr(fileio.ctypes, "CDLL", lambda *a, **k: FakeLibc(errno.EXDEV))
    with pytest.raises(OSError) as e:
        fileio._exchange(Path("x"), Path("y"))
    assert (e.value.errno, e.value.filename) == (errno.EXDEV, "y")


def test_exchange_without_renameat2_is_false(monkeypatch) -> None:
    monkeypatch.setattr(fileio.ctypes, "CDLL", lambda *a, **k: object())
    assert fileio._exchange(Path("x"), Path("y")) is False
