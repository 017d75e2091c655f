"""contracts/fileio.py under mutation (docs/judge-mutation.md): atomic writes, hashes, bounded reads.

What every artifact is written and hashed through: the bytes, the mode, no temporary left behind on
success or failure, a failure naming the final file, a folder swapped whole, digests of files larger
than one read, and the bounded read of a regular file with each refusal's exact line.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

from contracts import fileio
from contracts.errors import FileWriteError
from contracts.fileio import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    canonical_json,
    md5_file,
    naming_the_file,
    read_regular,
    replace_directory,
    sha256_file,
    sha256_text,
)
from contracts.validate import ValidationError


def test_canonical_json_is_sorted_indented_and_ends_with_a_newline() -> None:
    assert (
        canonical_json({"b": [1, float("nan")], "a": "é"})
        == '{\n  "a": "\\u00e9",\n  "b": [\n    1,\n    NaN\n  ]\n}\n'
    )


def test_naming_the_file_names_the_final_path(tmp_path: Path) -> None:
    with pytest.raises(FileWriteError) as e, naming_the_file(tmp_path / "out.json"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert e.value.path == str(tmp_path / "out.json") and e.value.errno == errno.ENOSPC
    with pytest.raises(FileWriteError) as e, naming_the_file(tmp_path / "out.json"):
        raise OSError(errno.EACCES, "Permission denied", str(tmp_path / "other"))
    assert e.value.path == str(tmp_path / "other")
    scratch = tmp_path / ".run.partial"
    with pytest.raises(FileWriteError) as e, naming_the_file(tmp_path / "run", scratch):
        raise OSError(errno.EFBIG, "File too large", str(scratch / "sub" / "m.json"))
    assert e.value.path == str(tmp_path / "run" / "sub" / "m.json")
    with pytest.raises(FileWriteError) as e, naming_the_file(tmp_path / "run", scratch):
        raise OSError(errno.EFBIG, "File too large", str(tmp_path / "elsewhere"))
    assert e.value.path == str(tmp_path / "elsewhere")
    with naming_the_file(tmp_path / "x"):
        pass


def test_atomic_writes_leave_the_file_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "f.bin"
    atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01" and path.stat().st_mode & 0o777 == 0o644
    atomic_write_text(path, "é\n")
    assert path.read_bytes() == "é\n".encode()
    atomic_write_json(path, {"b": 1, "a": 2})
    assert path.read_text() == canonical_json({"a": 2, "b": 1})
    assert os.listdir(path.parent) == ["f.bin"]


def test_a_failed_write_keeps_the_old_file_removes_its_temporary_and_names_the_file(
    tmp_path: Path, monkeypatch
) -> None:
    path = tmp_path / "f.json"
    path.write_text("old")
    seen = []

    def fail(src, dst):
        seen.append(Path(src))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "replace", fail)
    with pytest.raises(FileWriteError) as e:
        atomic_write_text(path, "new")
    assert str(e.value).startswith(f"{path}: cannot write: No space left on device (ENOSPC)")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["f.json"]
    (tmp,) = seen
    assert tmp.parent == tmp_path and tmp.name.startswith(".f.json.") and tmp.name.endswith(".tmp")
    monkeypatch.undo()
    with pytest.raises(FileWriteError):
        atomic_write_text(tmp_path / "f.json" / "inside", "x")  # a file where a folder must be
    (tmp_path / "d").mkdir()
    with pytest.raises(FileWriteError) as e:
        atomic_write_text(tmp_path / "d", "x")  # a folder where the file must be
    assert sorted(os.listdir(tmp_path)) == [
        "d",
        "f.json",
    ]  # its temporary removed (it is what the error names)


def test_an_interrupted_write_removes_its_temporary(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fileio.os, "fsync", lambda fd: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(tmp_path / "f.json", "x")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("exchange", [True, False])
def test_replace_directory_swaps_a_whole_folder(tmp_path: Path, monkeypatch, exchange: bool) -> None:
    if not exchange:
        monkeypatch.setattr(fileio, "_exchange", lambda a, b: False)
    new, dest = tmp_path / "new", tmp_path / "dest"
    new.mkdir()
    (new / "a").write_text("new")
    replace_directory(new, dest)
    assert (dest / "a").read_text() == "new" and not new.exists()
    new.mkdir()
    (new / "b").write_text("newer")
    (dest / "old-only").write_text("x")
    replace_directory(new, dest)
    assert sorted(os.listdir(dest)) == ["b"] and (dest / "b").read_text() == "newer"
    assert sorted(os.listdir(tmp_path)) == ["dest"]  # no trash left


def test_exchange_swaps_two_paths_or_says_it_cannot(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("A")
    b.write_text("B")
    assert fileio._exchange(a, b) is True
    assert (a.read_text(), b.read_text()) == ("B", "A")
    with pytest.raises(OSError) as e:
        fileio._exchange(a, tmp_path / "missing")
    assert e.value.errno == errno.ENOENT and e.value.filename == str(tmp_path / "missing")


def test_digests_read_past_one_block(tmp_path: Path) -> None:
    path = tmp_path / "big"
    data = os.urandom((1 << 20) + 7)
    path.write_bytes(data)
    assert md5_file(path) == hashlib.md5(data).hexdigest()
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert fileio._file_digest(path, "md5", chunk=3) == hashlib.md5(data).hexdigest()
    assert sha256_text("é") == hashlib.sha256("é".encode()).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert md5_file(tmp_path / "empty") == "d41d8cd98f00b204e9800998ecf8427e"


def test_read_regular_reads_a_bounded_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_bytes(b"12345")
    assert read_regular(path, 5) == b"12345"
    with pytest.raises(ValidationError) as e:
        read_regular(path, 4)
    assert str(e.value) == f"{path}: 5 bytes, larger than the limit (rule: <= 4 bytes)"
    with pytest.raises(ValidationError) as e:
        read_regular(path, 4, "params.yaml", "tokenizer.path", "pass a smaller file")
    assert str(e.value) == (
        f"params.yaml: tokenizer.path: {path}: 5 bytes, larger than the limit (rule: <= 4 bytes); next: pass a "
        "smaller file"
    )
    with pytest.raises(ValidationError) as e:
        read_regular(path, 4, str(path), "key")
    assert str(e.value) == f"{path}: key: 5 bytes, larger than the limit (rule: <= 4 bytes)"


def test_read_regular_refuses_devices_folders_and_missing_files(tmp_path: Path) -> None:
    for bad in (tmp_path, Path("/dev/zero")):
        with pytest.raises(ValidationError) as e:
            read_regular(bad, 10)
        assert str(e.value) == f"{bad}: not a regular file (a device, FIFO or folder) (rule: a regular file)"
    with pytest.raises(ValidationError) as e:
        read_regular(tmp_path / "none", 10, hint="h")
    assert str(e.value) == f"{tmp_path / 'none'}: file not found; next: h"
    with pytest.raises(ValidationError) as e:
        read_regular(tmp_path / "f" / "x", 10)
    assert str(e.value) == f"{tmp_path / 'f' / 'x'}: file not found"
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValidationError) as e:
        read_regular(tmp_path / "f" / "x", 10)
    assert str(e.value) == f"{tmp_path / 'f' / 'x'}: cannot read: Not a directory"


def test_a_file_that_grows_while_read_is_refused(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"123456")
    real = os.stat
    monkeypatch.setattr(fileio.os, "stat", lambda p: _small(real(p)))
    with pytest.raises(ValidationError) as e:
        read_regular(path, 4)
    assert str(e.value) == f"{path}: grew larger than the limit while read (rule: <= 4 bytes)"


def _small(st: os.stat_result) -> os.stat_result:
    """The stat of a file when it was 1 byte long."""
    values = list(st)
    values[6] = 1  # st_size
    return os.stat_result(values)
