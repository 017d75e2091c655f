"""contracts/lockfile.py under mutation (docs/judge-mutation.md): one writer at a time, named.

The lock file beside its target, its one line (pid and command), the second writer's one-line
refusal naming the first, its wait, the release that deletes the file, a stale lock taken over
and named, a lock released under a waiter, and a real second process holding it (issue #51 item 4).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, code_first
from contracts import lockfile
from contracts.errors import FileWriteError, report
from contracts.lockfile import Busy, WriteLock, held, holder, holding, lock_path


def test_the_lock_sits_beside_its_target() -> None:
    assert lock_path("a/b/params.yaml") == Path("a/b/.params.yaml.lock")
    assert lock_path(Path("/r/registry")) == Path("/r/.registry.lock")


def test_a_holder_writes_its_line_and_removes_the_file_on_release(tmp_path: Path) -> None:
    target = tmp_path / "params.yaml"
    lock = held(target, "python -m pipeline.config set")
    assert lock.path == tmp_path / ".params.yaml.lock" and lock.fd is not None and lock.stale is None
    assert lock.path.read_text() == f"{os.getpid()} python -m pipeline.config set\n"
    assert oct(lock.path.stat().st_mode & 0o777) == "0o644"
    lock.release()
    assert not lock.path.exists() and lock.fd is None
    lock.release()  # idempotent
    assert os.listdir(tmp_path) == []


def test_a_with_block_acquires_once_and_releases(tmp_path: Path) -> None:
    lock = WriteLock(tmp_path / "t", "w")
    with lock as inside:
        assert inside is lock and lock.fd is not None and lock.path.exists()
        fd = lock.fd
        with lock as again:  # already held: entered without a second acquire
            assert again is lock and lock.fd == fd
    assert lock.fd is None and not lock.path.exists()


def test_a_second_writer_fails_naming_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockfile, "WAIT_S", 3600.0)  # wait_s=0 given: never this default (it would hang)
    target = tmp_path / "params.yaml"
    with held(target, "python -m pipeline.config set"):
        before = (tmp_path / ".params.yaml.lock").read_bytes()
        with pytest.raises(Busy) as e:
            held(target, "another", wait_s=0)
        assert (tmp_path / ".params.yaml.lock").read_bytes() == before  # the holder's line kept
    assert str(e.value) == (
        f"{target}: being written by pid {os.getpid()} (python -m pipeline.config set) "
        f"(lock {tmp_path / '.params.yaml.lock'}); next: let it finish (or stop it), then re-run"
    )
    assert e.value.exit_code == 2 and report(e.value) == 2
    assert not (tmp_path / ".params.yaml.lock").exists()


def test_the_default_wait_is_the_module_constant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lockfile, "WAIT_S", 0.3)
    with held(tmp_path / "t", "first"):
        t0 = time.monotonic()
        with pytest.raises(Busy):
            WriteLock(tmp_path / "t", "second").acquire()
        assert time.monotonic() - t0 >= 0.3  # it waited (the bound, not a timing of the code)
    assert lockfile.WAIT_S == 0.3


def test_a_second_writer_waits_for_the_first(tmp_path: Path) -> None:
    first = held(tmp_path / "t", "first")
    threading.Timer(0.3, first.release).start()
    second = held(tmp_path / "t", "second", wait_s=30)
    assert second.path.read_text() == f"{os.getpid()} second\n" and second.stale is None
    second.release()


def test_a_stale_lock_is_taken_over_and_named(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    path = tmp_path / ".t.lock"
    path.write_text("999999999 python -m registry pin\n")  # its writer was killed: nobody holds it
    lock = held(tmp_path / "t", "mine", wait_s=0)
    assert lock.stale == "pid 999999999 (python -m registry pin)"
    assert capfd.readouterr().err == (
        f"warning: {path}: left by pid 999999999 (python -m registry pin), which ended without "
        "removing it; taken over\n"
    )
    assert path.read_text() == f"{os.getpid()} mine\n"  # its line replaced whole
    lock.release()


def test_an_empty_lock_file_is_no_stale_owner(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    (tmp_path / ".t.lock").write_text("")
    lock = held(tmp_path / "t", "mine", wait_s=0)
    assert lock.stale is None and capfd.readouterr().err == ""
    lock.release()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("", "an unknown process"),
        ("  \n", "an unknown process"),
        ("123", "pid 123"),
        ("123\n", "pid 123"),
        ("123 gates mutate --jobs 2\n", "pid 123 (gates mutate --jobs 2)"),
        ("1\x1b[31m x\ny", "pid 1\\x1b[31m (x\\ny)"),  # a hostile lock file forges no line
    ],
)
def test_the_holder_is_read_from_the_lock_file(tmp_path: Path, text: str, named: str) -> None:
    (tmp_path / "l").write_text(text)
    fd = os.open(tmp_path / "l", os.O_RDONLY)
    try:
        assert holder(fd) == named
    finally:
        os.close(fd)


def test_a_lock_released_under_a_waiter_is_not_held(tmp_path: Path) -> None:
    """The waiter locked the file its holder deleted: it must see the path names another file now."""
    path = tmp_path / "l"
    path.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert lockfile._same_file(fd, path)
        os.unlink(path)
        assert not lockfile._same_file(fd, path)
        path.write_text("")  # a new file at the same path
        assert not lockfile._same_file(fd, path)
    finally:
        os.close(fd)


def test_a_lock_deleted_between_open_and_flock_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, calls = lockfile._same_file, []

    def first_time_gone(fd: int, path: Path) -> bool:
        calls.append(path)
        return len(calls) > 1 and real(fd, path)

    monkeypatch.setattr(lockfile, "_same_file", first_time_gone)
    lock = held(tmp_path / "t", "mine", wait_s=0)  # the first file "was released": taken on the second try
    assert len(calls) == 2 and lock.fd is not None
    lock.release()


def test_a_lock_in_a_missing_folder_names_the_lock_and_makes_no_folder(tmp_path: Path) -> None:
    with pytest.raises(FileWriteError) as e:
        held(tmp_path / "absent" / "params.yaml", "w")
    assert str(e.value).startswith(f"{tmp_path / 'absent' / '.params.yaml.lock'}: cannot write: ")
    assert os.listdir(tmp_path) == []


HOLD = """
import sys, time
from contracts.lockfile import held
lock = held(sys.argv[1], "python -m registry pin")
print("held", flush=True)
time.sleep(600)
"""


def test_another_process_holding_it_is_named_and_its_death_frees_it(
    tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    target = tmp_path / "registry"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(target)], cwd=REPO, env=code_first(REPO), stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holding(target) is None  # no lock file yet
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        assert holding(target) == f"pid {child.pid} (python -m registry pin)"
        (tmp_path / ".other.lock").symlink_to(tmp_path / ".registry.lock")
        assert holding(tmp_path / "other") is None  # a link is never followed, even to a held lock
        with pytest.raises(Busy, match=f"being written by pid {child.pid} \\(python -m registry pin\\)"):
            held(target, "mine", wait_s=0.2)
        os.kill(child.pid, signal.SIGKILL)  # no release: the file stays, the kernel drops the flock
        child.wait(30)
        assert (tmp_path / ".registry.lock").exists() and holding(target) is None  # nobody holds it
        lock = held(target, "mine", wait_s=5)
        assert holding(target) is None  # this process's own lock is no other writer
        assert lock.stale == f"pid {child.pid} (python -m registry pin)"
        assert "taken over" in capfd.readouterr().err
        lock.release()
    finally:
        child.kill()
        child.wait(30)


def test_a_lock_path_that_is_a_link_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("someone's file\n")
    (tmp_path / ".t.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileWriteError) as e:
        held(tmp_path / "t", "w", wait_s=0)
    assert str(e.value).startswith(f"{tmp_path / '.t.lock'}: cannot write: Too many levels of symbolic links")
    assert holding(tmp_path / "t") is None
    assert (tmp_path / "elsewhere").read_text() == "someone's file\n"


def test_the_lock_is_not_inherited_by_a_started_program(tmp_path: Path) -> None:
    lock = held(tmp_path / "t", "w", wait_s=0)
    assert lock.fd is not None and os.get_inheritable(lock.fd) is False
    lock.release()


def test_a_path_replaced_by_a_link_to_the_same_file_is_not_the_same_lock(tmp_path: Path) -> None:
    path, twin = tmp_path / "l", tmp_path / "twin"
    path.write_text("")
    fd = os.open(path, os.O_RDONLY)
    try:
        os.link(path, twin)  # the same inode under another name
        os.unlink(path)
        path.symlink_to(twin)
        assert not lockfile._same_file(fd, path)
    finally:
        os.close(fd)


def test_a_lock_file_of_other_bytes_or_a_long_line_is_still_named(tmp_path: Path) -> None:
    (tmp_path / "l").write_bytes(b"12 caf\xe9 \xff\n")
    fd = os.open(tmp_path / "l", os.O_RDONLY)
    try:
        assert holder(fd) == "pid 12 (caf\ufffd \ufffd)"
    finally:
        os.close(fd)
    (tmp_path / "l").write_text("7 " + "x" * 600)
    fd = os.open(tmp_path / "l", os.O_RDONLY)
    try:
        assert holder(fd) == "pid 7 (" + "x" * 510 + ")"  # the first 512 bytes
    finally:
        os.close(fd)


def test_release_of_a_file_deleted_by_hand_meanwhile_is_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = held(tmp_path / "t", "w", wait_s=0)
    lock.path.unlink()
    monkeypatch.setattr(lockfile, "_same_file", lambda fd, path: True)  # seen as ours just before
    lock.release()
    assert lock.fd is None
