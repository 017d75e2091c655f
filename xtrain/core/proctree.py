"""The proc launcher owns its process tree (Linux; torch-free).

    launcher (python -m pipeline.train proc)      commits runs/<launcher>, only while alive
      └─ torchrun agent   own session, PR_SET_PDEATHSIG=SIGKILL: dies with the launcher
           └─ worker × N  own sessions (torchrun), PR_SET_PDEATHSIG=SIGKILL: die with the agent,
                          and a watcher thread: a pidfd on the launcher (exits when it does),
                          a heartbeat file every BEAT_S, an exit marker on every way out

Whatever kills the launcher (its pid alone, SIGTERM, SIGINT, SIGHUP, SIGKILL, or under DVC the
death of `dvc repro`), nothing of the tree outlives it by more than a moment, and runs/<launcher>
is never written after it is gone: workers write only to the staging directory; the launcher
alone swaps it in. A caught signal kills the tree (SIGKILL, which also reaches a stopped rank)
before the launcher exits 128+signal.

The launcher watches the heartbeats: a rank whose heartbeat is older than launchers.timeout_s
(stopped by SIGSTOP, or stuck holding the GIL) is named and the job is stopped; a rank that dies
without a word (SIGKILL, a crash) is named; an agent killed by a signal is named.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from contracts import artifact_table
from contracts.errors import XtrainError
from xtrain.core import rundir

LAUNCHER_ENV = "XTRAIN_LAUNCHER_PID"  # set by the launcher for its tree: it commits the run
HEARTBEAT_ENV = "XTRAIN_HEARTBEAT_DIR"
BEAT_S = 0.5
POLL_S = 0.2
SILENT_GRACE_S = 2.0  # torchrun's agent notices a dead worker within its monitor interval (0.1 s)
CAUGHT = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: a preexec_fn must not load it


class TreeFailed(XtrainError):
    """The job failed in a way no worker reported itself: this line names what died or hung."""


class Interrupted(BaseException):
    """The launcher caught a signal: its tree is killed before it exits 128+signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def set_parent_death_signal(sig: int) -> bool:
    """PR_SET_PDEATHSIG: this process gets `sig` when the thread that forked it exits."""
    return _LIBC.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


@dataclass(frozen=True)
class ProcStat:
    state: str
    ppid: int
    start: int  # clock ticks after boot: with the pid, the identity of a process


def proc_stat(pid: int) -> ProcStat | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    return ProcStat(fields[0], int(fields[1]), int(fields[19]))


def alive(pid: int, start: int | None = None) -> bool:
    """The process exists, is not a zombie and (if `start` is given) is the same process."""
    st = proc_stat(pid)
    return st is not None and st.state not in ("Z", "X") and (start is None or st.start == start)


def is_ancestor(pid: int, depth: int = 8) -> bool:
    p = os.getppid()
    for _ in range(depth):
        if p == pid:
            return True
        st = proc_stat(p)
        if st is None or p <= 1:
            return False
        p = st.ppid
    return False


def launcher_commits() -> bool:
    """Under our launcher the workers leave the finished run in staging; the launcher swaps it in.
    Under a bare torchrun (multi-node) rank 0 commits, as before."""
    return LAUNCHER_ENV in os.environ


SHELLS = {"sh", "dash", "bash", "zsh", "ksh", "fish"}


def is_shell_running_a_command(pid: int) -> bool:
    """`$SHELL -c cmd`, the way dvc runs a stage: dash (Debian's /bin/sh) stays as a parent."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return Path(argv[0]).name in SHELLS and "-c" in argv


def caller_pid() -> int:
    """The process that started this stage: the parent, or above the shell dvc runs the command in."""
    parent = os.getppid()
    if is_shell_running_a_command(parent):
        st = proc_stat(parent)
        if st is not None and st.ppid > 1:
            return st.ppid
    return parent


def die_with_caller() -> None:
    """Under `dvc repro` (DVC_STAGE set) the launcher gets SIGTERM when dvc dies: nobody is left to
    record the result, so the job stops. Elsewhere (nohup, a shell that exits) it runs on.
    PDEATHSIG covers a direct parent; a watcher thread covers dvc above a `sh -c` that stays."""
    if "DVC_STAGE" not in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):
        set_parent_death_signal(signal.SIGTERM)
    caller = caller_pid()
    st = proc_stat(caller)
    if caller <= 1 or st is None:  # dvc died before the signal was armed
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if caller != os.getppid():
        threading.Thread(target=_term_self_when_gone, args=(caller, st.start), daemon=True).start()


def _term_self_when_gone(pid: int, start: int) -> None:
    while alive(pid, start):
        time.sleep(POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)


# -- the worker's side --------------------------------------------------------------------------


class WorkerGuard:
    """One rank under our launcher: heartbeat, launcher watch, signal-to-marker, exit marker."""

    def __init__(self, rank: int, launcher: int, beats: Path) -> None:
        self.rank, self.launcher = rank, launcher
        self.beat = beats / f"rank-{rank}.beat"
        self.marker = beats / f"rank-{rank}.exit"
        self.pidfd = _pidfd(launcher)
        if not is_ancestor(launcher):  # the launcher died before we could watch it
            self.exit(1, "launcher gone", f"rank {rank}: the launcher (pid {launcher}) is gone; exiting")
        st = proc_stat(os.getpid())
        _write(self.beat, f"{os.getpid()} {st.start if st else 0}\n")
        # Caught signals wait for the watcher thread (threads started later inherit the mask): it
        # learns who sent one even while the main thread blocks in a collective.
        # Processes this one starts inherit the mask: a fork child gets it back; an exec'd one keeps
        # it (CPU ranks start none; torch.compile's workers watch their parent and use SIGKILL).
        signal.pthread_sigmask(signal.SIG_BLOCK, CAUGHT)
        os.register_at_fork(after_in_child=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, CAUGHT))
        threading.Thread(target=self._watch, name="xtrain-tree-watch", daemon=True).start()

    def _watch(self) -> None:
        poller = select.poll()
        if self.pidfd is not None:
            poller.register(self.pidfd, select.POLLIN)
        while True:
            info = signal.sigtimedwait(CAUGHT, BEAT_S)
            if info is not None:
                sig = signal.Signals(info.si_signo)
                sender = "torchrun agent" if info.si_pid == os.getppid() else f"pid {info.si_pid}"
                self.exit(128 + sig, f"{sig.name} from {sender}")
            if poller.poll(0) or (self.pidfd is None and not alive(self.launcher)):
                if self.rank == 0:  # the launcher could not clean its heartbeat folder
                    shutil.rmtree(self.beat.parent, ignore_errors=True)
                os.kill(os.getpid(), signal.SIGKILL)  # the launcher is gone: nothing may outlive it
            with contextlib.suppress(OSError):
                os.utime(self.beat)

    def exit(self, code: int, reason: str, message: str = "") -> None:
        """Leave now, saying how: the launcher tells a reported failure from a silent death."""
        with contextlib.suppress(OSError):
            _write(self.marker, f"{code} {reason}\n")
        if message:
            print(f"error: {message}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)

    def mark(self, code: int) -> None:
        """A normal exit (the process then shuts down as usual)."""
        _write(self.marker, f"{code} {'ok' if code == 0 else 'error'}\n")


def guard_worker(rank: int) -> WorkerGuard | None:
    """Start the guard when this worker runs under our launcher (its environment says so)."""
    launcher, beats = os.environ.get(LAUNCHER_ENV), os.environ.get(HEARTBEAT_ENV)
    if not launcher or not beats:
        return None
    return WorkerGuard(rank, int(launcher), Path(beats))


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):  # no such process (is_ancestor then says so), or an old kernel
        return None


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# -- the launcher's side ------------------------------------------------------------------------


@dataclass(frozen=True)
class RankState:
    rank: int
    pid: int
    start: int
    beat_age: float  # seconds since its last heartbeat
    code: int | None  # its exit marker, if it left one
    reason: str
    exited_at: float


def read_ranks(beats: Path) -> dict[int, RankState]:
    ranks = {}
    now = time.time()
    for beat in beats.glob("rank-*.beat"):
        with contextlib.suppress(OSError, ValueError):
            rank = int(beat.name.split("-")[1].split(".")[0])
            pid, start = (int(x) for x in beat.read_text().split())
            age = now - beat.stat().st_mtime
            code, reason, at = _marker(beats / f"rank-{rank}.exit")
            ranks[rank] = RankState(rank, pid, start, age, code, reason, at)
    return ranks


def _marker(path: Path) -> tuple[int | None, str, float]:
    try:
        code, reason = path.read_text().split(maxsplit=1)
        return int(code), reason.strip(), path.stat().st_mtime
    except (OSError, ValueError):
        return None, "", 0.0


def _agent_preexec(launcher: int) -> None:
    """In the agent between fork and exec: die with the launcher, even if it is already gone."""
    set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != launcher:
        os._exit(1)


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM, SIGINT and SIGHUP raise Interrupted in the launcher, so its tree dies first."""
    old = {sig: signal.signal(sig, _raise_interrupted) for sig in CAUGHT}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


class Tree:
    """A torchrun command run as this launcher's tree (see the module docstring)."""

    def __init__(
        self, cmd: list[str], world: int, timeout_s: float, env: dict[str, str] | None = None
    ) -> None:
        self.world, self.timeout_s = world, timeout_s
        self.first_beat: float | None = None  # when the launcher first saw a rank's heartbeat
        self.beats = Path(tempfile.mkdtemp(prefix="xtrain-tree-"))
        me = os.getpid()
        env = {**os.environ, **(env or {}), LAUNCHER_ENV: str(me), HEARTBEAT_ENV: str(self.beats)}
        self.agent = subprocess.Popen(
            cmd, env=env, start_new_session=True, preexec_fn=lambda: _agent_preexec(me)
        )

    def watch(self) -> int:
        """Until the agent exits; a hung rank stops the job at once. A rank gone without a word is
        named after SILENT_GRACE_S unless the agent exits first: its exit status tells more (a rank
        that exited 0 without reporting success looks the same from here as a SIGKILLed one)."""
        silent_since: float | None = None
        while (rc := self.agent.poll()) is None:
            ranks = read_ranks(self.beats)
            silent = self._silent(ranks)
            silent_since = (silent_since or time.monotonic()) if silent else None
            named = silent if silent and time.monotonic() - silent_since > SILENT_GRACE_S else ""
            problem = self._hung(ranks) or self._unstarted(ranks) or named or self._agent_hung(ranks)
            if problem:
                self.kill()
                raise TreeFailed(f"{problem}; the job was stopped")
            time.sleep(POLL_S)
        return self._after(rc, read_ranks(self.beats))

    def _hung(self, ranks: dict[int, RankState]) -> str:
        late = [r for r in ranks.values() if r.code is None and r.beat_age > self.timeout_s]
        if not late:
            return ""
        r = max(late, key=lambda r: r.beat_age)  # whose heartbeat stopped first: the others wait on it
        st = proc_stat(r.pid)
        how = (
            "is stopped (SIGSTOP?)"
            if st is not None and st.state in ("T", "t")
            else "is stuck holding the GIL"
        )
        return (
            f"rank {r.rank} (pid {r.pid}) hung: no heartbeat for {r.beat_age:.1f} s "
            f"(launchers.timeout_s={self.timeout_s:g}); it {how}"
        )

    def _unstarted(self, ranks: dict[int, RankState]) -> str:
        """A rank with no heartbeat timeout_s after another's first one (stopped while starting)."""
        now = time.monotonic()
        if ranks and self.first_beat is None:
            self.first_beat = now
        missing = [r for r in range(self.world) if r not in ranks]
        if self.first_beat is None or not missing or now - self.first_beat <= self.timeout_s:
            return ""
        return (
            f"rank {missing[0]} never started: no heartbeat {now - self.first_beat:.1f} s after the first "
            f"rank's (launchers.timeout_s={self.timeout_s:g})"
        )

    def _agent_hung(self, ranks: dict[int, RankState]) -> str:
        """Every rank has left but the agent does not exit (stopped, or stuck)."""
        if len(ranks) < self.world or any(r.code is None for r in ranks.values()):
            return ""
        idle = time.time() - max(r.exited_at for r in ranks.values())
        if idle <= self.timeout_s:
            return ""
        return f"torchrun agent (pid {self.agent.pid}) hung: {idle:.1f} s after its last rank exited"

    def _silent(self, ranks: dict[int, RankState]) -> str:
        for r in sorted(ranks.values(), key=lambda r: r.rank):
            if r.code is None and not alive(r.pid, r.start) and _marker(self._exit(r))[0] is None:
                return f"rank {r.rank} (pid {r.pid}) died without a word (killed by SIGKILL, or a crash)"
        return ""

    def _exit(self, r: RankState) -> Path:
        return self.beats / f"rank-{r.rank}.exit"

    def _after(self, rc: int, ranks: dict[int, RankState]) -> int:
        """The agent has exited: 0 only if every rank said so; otherwise name what died first."""
        self.kill()
        if rc < 0:
            name = signal.Signals(-rc).name
            raise TreeFailed(
                f"torchrun agent (pid {self.agent.pid}) was killed by {name}; its workers were stopped"
            )
        if rc == 0:
            missing = [r for r in range(self.world) if r not in ranks or ranks[r].code != 0]
            if missing:
                raise TreeFailed(f"torchrun exited 0 but ranks {missing} never reported success")
            return 0
        if silent := self._silent(ranks):
            raise TreeFailed(silent)
        said = sorted((r for r in ranks.values() if r.code is not None), key=lambda r: r.exited_at)
        failed = [r for r in said if r.code != 0]
        if failed and failed[0].reason.startswith("SIG"):
            r = failed[0]
            if r.reason.endswith("from torchrun agent"):  # nobody failed: the agent stopped them
                raise TreeFailed(
                    f"torchrun agent (pid {self.agent.pid}) stopped its workers ({r.reason.split()[0]}) "
                    f"and exited {rc}: it was signalled or failed"
                )
            raise TreeFailed(f"rank {r.rank} (pid {r.pid}) was stopped by {r.reason}; torchrun exited {rc}")
        if not said:
            raise TreeFailed(f"torchrun (pid {self.agent.pid}) exited {rc} before any rank reported")
        if not failed:  # found by the property test: SIGINT to the agent as its ranks finished
            ok = sorted(r.rank for r in said)
            raise TreeFailed(
                f"torchrun agent (pid {self.agent.pid}) exited {rc} after ranks {ok} reported success: "
                "it was signalled or failed"
            )
        return rc  # the failing rank said why itself (one line)

    def kill(self) -> None:
        """SIGKILL the agent, everything it started (a rank that never beat, a stopped one) and every
        rank with a heartbeat; wait until all are gone. A second signal must not cut this short."""
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, CAUGHT)
        try:
            family = [(r.pid, r.start) for r in read_ranks(self.beats).values()]
            if self.agent.poll() is None:  # not reaped: its pid is still ours
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(self.agent.pid, signal.SIGSTOP)  # it can start nothing while we look
                family += descendants(self.agent.pid)
                _kill(self.agent.pid)
            for pid, start in family:
                if alive(pid, start):
                    _kill(pid)
            deadline = time.monotonic() + 10
            while any(alive(pid, start) for pid, start in family) and time.monotonic() < deadline:
                time.sleep(0.05)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.agent.wait(max(0.0, deadline - time.monotonic()))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.beats, ignore_errors=True)


def descendants(pid: int) -> list[tuple[int, int]]:
    """(pid, start) of every live descendant of `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := proc_stat(int(entry.name))) is not None:
            children.setdefault(st.ppid, []).append(int(entry.name))
            starts[int(entry.name)] = st.start
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append((p, starts[p]))
        todo += children.get(p, [])
    return found


def _kill(pid: int) -> None:
    """SIGKILL a process and its process group (torchrun starts each worker in its own session)."""
    for kill in (os.kill, os.killpg):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def commit(run_dir: str | Path) -> None:
    """The launcher's commit point: the finished run in staging, read back, replaces the run."""
    staging = rundir.partial_dir(run_dir)
    artifact_table.read("metrics", staging / "metrics.json")
    rundir.commit(staging, run_dir)


def supervise(cmd: list[str], world: int, timeout_s: float, env: dict[str, str] | None = None) -> int:
    """Run torchrun as this launcher's tree (`env` added to its environment); its exit status, or
    TreeFailed / Interrupted. Whatever way this returns or raises, no process of the tree is left."""
    with signals_raise():
        tree = Tree(cmd, world, timeout_s, env)
        try:
            return tree.watch()
        finally:
            tree.close()
