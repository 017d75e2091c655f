"""A campaign's children end with it (torch-free): `gates mutate` and `gates bisect` start every
command (dvc repro and the training it runs, gates check, git) through `run`, each in a process group
of its own, and a SIGINT, SIGTERM or SIGHUP to the campaign (`ending_on_signal`) is passed to every
group, as a terminal's Ctrl-C would be; whatever still lives after GRACE_S is killed, the processes
those groups started in other sessions too (torchrun's agent and workers). Then the campaign says so
in one line and exits 128+signal. A Ctrl-C to `gates mutate` during its baseline printed a 33-line
traceback while `dvc repro` and its training lived on for seconds (they run in their own sessions,
out of reach of the terminal's signal).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

CAUGHT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_S = 5.0  # how long an interrupted child may take to end before it is killed

_lock = threading.RLock()  # re-entered by the signal handler, which runs in the main thread
_live: dict[int, subprocess.Popen[str]] = {}  # pid (= its process group) -> the child
_signal: list[int] = []  # the signal that interrupted the campaign, once one has


class Interrupted(BaseException):
    """The campaign got a signal: its children are ended. A BaseException: no `except Exception` on
    the way out swallows it; `contracts.errors.report` prints it as one line, exit 128+signal."""

    def __init__(self, command: str, signum: int, ended: int) -> None:
        name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        super().__init__(
            f"{command}: interrupted by {name}: {ended} running processes ended, none left behind; "
            "what finished before is kept"
        )


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str
    timed_out: bool


def interrupted() -> int | None:
    """The signal that interrupted the campaign, or None."""
    return _signal[0] if _signal else None


def check(command: str = "campaign") -> None:
    """Raise Interrupted once a signal has arrived: no new child starts, no half-run result is used."""
    if _signal:
        raise Interrupted(command, _signal[0], 0)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float | None = None,
        merge: bool = False) -> Done:  # fmt: skip
    """`cmd` in a process group of its own, its output captured (`merge`: stderr into out). On timeout
    the group is killed (SIGKILL: torchrun's workers die with their agent). After a signal to the
    campaign, Interrupted: its output is the interruption's, not a result."""
    stderr = subprocess.STDOUT if merge else subprocess.PIPE
    with _lock:
        check()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
                             start_new_session=True)  # fmt: skip
        _live[p.pid] = p
    try:
        try:
            out, err = p.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _signal_group(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            timed_out = True
    finally:
        with _lock:
            del _live[p.pid]
    check()
    return Done(p.returncode, out or "", err or "", timed_out)


def _quietly(call: Callable[..., object], *args: object) -> None:
    """A signal to a process, or to a group, that may have ended meanwhile (or was never ours)."""
    with contextlib.suppress(OSError, psutil.Error):
        call(*args)


def _signal_group(pgid: int, sig: int) -> None:
    _quietly(os.killpg, pgid, sig)


def _signal_alone(q: psutil.Process, sig: int, groups: set[int]) -> None:
    """`sig` to a process outside the children's groups (those had theirs: never twice)."""
    if os.getpgid(q.pid) not in groups:
        q.send_signal(sig)


def _family(pids: list[int]) -> list[psutil.Process]:
    """The children and everything they started, in any session (a pid and its start time: no reuse);
    while this process adopts orphans, also every descendant re-parented to it."""
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            top = psutil.Process(pid)
            found += [top, *top.children(recursive=True)]
    adopted = psutil.Process().children(recursive=True) if _state["adopting"] else []  # never itself
    return [*found, *adopted]


def end_all(sig: int, grace_s: float = GRACE_S) -> int:
    """Pass `sig` to every child's process group and every process they started elsewhere, wait up to
    `grace_s`, then kill what is left (found again after each pass: a dying process may have started
    one meanwhile); returns how many processes there were."""
    with _lock:
        children = list(_live.values())
    seen: dict[int, psutil.Process] = {}

    def alive() -> list[psutil.Process]:
        found = [q for q in _family([p.pid for p in children]) if _lives(q)]
        seen.update((q.pid, q) for q in found)
        return found

    first = alive()  # before any signal: a dying parent must not orphan its children out of sight
    groups = {p.pid for p in children}
    for p in children:
        _signal_group(p.pid, sig)
    for q in first:  # also those in sessions of their own (torchrun's agent and workers)
        _quietly(_signal_alone, q, sig, groups)
    deadline = time.monotonic() + grace_s
    while alive() and time.monotonic() < deadline:  # pragma: no mutate -- equivalent: `<=`, a clock
        time.sleep(0.05)  # pragma: no mutate -- equivalent: only how often it looks
    for _ in range(3):  # pragma: no mutate -- equivalent: a pass with nothing left stops at once
        left = alive()
        if not left:
            break
        for p in children:
            _signal_group(p.pid, signal.SIGKILL)
        for q in left:
            _quietly(q.kill)
        psutil.wait_procs(left, timeout=grace_s)  # pragma: no mutate -- equivalent: SIGKILLed just above
    _reap(children, seen, grace_s)  # pragma: no mutate -- equivalent: all were killed (its waits)
    return len(seen)


def _reap(children: list[subprocess.Popen[str]], seen: dict[int, psutil.Process], grace_s: float) -> None:
    """Reap every ended process this one is the parent of: a child through its Popen, one it adopted
    here (a zombie left behind would be reaped by whoever waits for any child: a test runner's os.wait)."""
    for p in children:
        p.wait(grace_s)  # pragma: no mutate -- equivalent: SIGKILLed above, it has ended
    mine = {p.pid for p in children}
    adopted = [q for pid, q in seen.items() if pid not in mine]
    psutil.wait_procs(adopted, timeout=grace_s)  # pragma: no mutate -- equivalent: all were killed


PR_SET_CHILD_SUBREAPER = 36
_state = {"adopting": False}  # while True, this process is the subreaper of its descendants


def _adopt_orphans(on: bool) -> None:
    """PR_SET_CHILD_SUBREAPER (Linux, as the launchers' process trees): a descendant whose parent dies
    is re-parented to this process, not to init, so end_all still finds it (a stage's child in a
    session of its own, orphaned by the signal)."""
    if ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, int(on)) == 0:
        _state["adopting"] = on


def _lives(q: psutil.Process) -> bool:
    try:
        return q.is_running() and q.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@contextlib.contextmanager
def ending_on_signal(command: str) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP end every child (end_all), then raise Interrupted in the main thread.
    Later signals are ignored: a second Ctrl-C cannot cut the cleanup short or print a traceback."""

    def handler(signum: int, _frame: object) -> None:
        for sig in CAUGHT:
            signal.signal(sig, signal.SIG_IGN)
        _signal.append(signum)
        raise Interrupted(command, signum, end_all(signum))

    _signal.clear()
    _adopt_orphans(True)
    old = {sig: signal.signal(sig, handler) for sig in CAUGHT}
    try:
        yield
    finally:  # the campaign's threads have ended (its pool is joined inside the block)
        for sig, was in old.items():
            signal.signal(sig, was)
        _adopt_orphans(False)
        _signal.clear()
