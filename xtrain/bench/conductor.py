"""The scaling stage's measurements taken in turn: one process per (launcher, world), windows interleaved.

Torch-free (the stage's parent never imports torch on CPU). Every measurement starts at once in its
own fresh process (threads: `pipeline.scaling rank thread --worlds W`; proc: a torchrun of W
workers), sets up, warms up and connects to the conductor's socket, one connection per rank. Once
all are connected the conductor hands out the timed windows one at a time: cycle i takes window i
of every measurement, in a fixed order on even cycles and the reverse on odd ones (ABBA), so thread
and proc at one world, and world w and world 1 of a launcher, see the same moments of a busy
machine: a neighbour's burst slows both windows of a pair, not one launcher's whole measurement.
The others wait on their socket (asleep, no CPU) meanwhile.

Around each window the conductor reads what else ran (xtrain/bench/contention.py): the machine's
busy and stolen CPU time and the measurement's own threads' CPU and run-queue wait. The record keeps
those raw readings beside the window's tokens/s; the gate judges from them (docs/scaling.md).

Protocol (JSON lines over a Unix socket): a rank sends {"launcher", "world", "rank", "pid"} after its
warm-up, then answers each {"do": "window"} with {"rate": tokens/s} and each {"do": "profile"} with
{"profile": ...} (rank 0; the others send null), and leaves at {"do": "stop"}.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Key = tuple[str, int]  # (launcher, world)
Start = Callable[[Key, str], list[str]]  # the command of one measurement's process, given the socket


class Channel:
    """One rank's connection: JSON objects, one per line."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.file = sock.makefile("rwb")

    def send(self, message: dict[str, Any]) -> None:
        self.file.write(json.dumps(message).encode() + b"\n")
        self.file.flush()

    def recv(self) -> dict[str, Any]:
        line = self.file.readline()
        if not line:
            raise EOFError("the connection closed")
        return json.loads(line)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        self.sock.close()


def connect(address: str, launcher: str, world: int, rank: int, pid: int) -> Channel:
    """A measured rank's side: connect and say who it is (after its warm-up)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    channel = Channel(sock)
    channel.send({"launcher": launcher, "world": world, "rank": rank, "pid": pid})
    return channel


def commands(channel: Channel) -> Iterator[dict[str, Any]]:
    """The conductor's commands to one rank, until it says stop."""
    while (command := channel.recv())["do"] != "stop":
        yield command


def turn_order(keys: list[Key], cycle: int) -> list[Key]:
    """The measurements in cycle `cycle`: sorted by world then launcher (thread and proc of a world side
    by side), forwards on even cycles and backwards on odd ones, so no one always goes first."""
    ordered = sorted(keys, key=lambda k: (k[1], k[0]))
    return ordered if cycle % 2 == 0 else ordered[::-1]


@dataclass
class Member:
    """One measurement's process (a thread launcher, or a torchrun of `world` workers) and its ranks."""

    key: Key
    proc: subprocess.Popen[bytes]
    log: Path
    ranks: dict[int, Channel] = field(default_factory=dict)
    pids: set[int] = field(default_factory=set)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


@dataclass
class Taken:
    """What the conductor took: per measurement its window rates and readings, in order."""

    windows: dict[Key, list[float]]
    readings: dict[Key, list[dict[str, float]]]
    profiles: dict[Key, Any] = field(default_factory=dict)
    rounds: int = 0


class Conductor:
    """Start every measurement, gather its ranks, hand out windows in turn (window, round), stop them."""

    def __init__(
        self,
        keys: list[Key],
        start: Start,
        env: dict[str, str] | None,
        probe: Any,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keys, self.start, self.env, self.probe, self.clock = list(keys), start, env, probe, clock
        self.taken = Taken({k: [] for k in self.keys}, {k: [] for k in self.keys})
        self.members: dict[Key, Member] = {}
        self.cycle = 0
        self.t0 = clock()

    @contextlib.contextmanager
    def running(self) -> Iterator[Conductor]:
        """Every measurement started and connected; on leaving, stopped (or killed after a failure)."""
        with tempfile.TemporaryDirectory(prefix="xtrain-scaling-") as tmp:
            address = str(Path(tmp) / "baton")
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(address)
            server.listen()
            try:
                for key in self.keys:
                    log = Path(tmp) / f"{key[0]}-{key[1]}.log"
                    with open(log, "wb") as err:
                        proc = subprocess.Popen(
                            self.start(key, address),
                            stdout=subprocess.DEVNULL,
                            stderr=err,
                            env=self.env,
                            start_new_session=True,
                        )
                    self.members[key] = Member(key, proc, log)
                self.gather(server)
                yield self
                self.stop()
            except BaseException:
                self.kill()
                raise
            finally:
                server.close()
                for m in self.members.values():
                    for ch in m.ranks.values():
                        ch.close()

    def gather(self, server: socket.socket) -> None:
        """Accept every rank of every measurement; a process that exits first fails the stage."""
        server.settimeout(0.5)
        while any(len(m.ranks) < m.key[1] for m in self.members.values()):
            try:
                sock, _ = server.accept()
            except TimeoutError:
                self.check_alive()
                continue
            sock.settimeout(None)
            channel = Channel(sock)
            hello = channel.recv()
            member = self.members[(hello["launcher"], int(hello["world"]))]
            member.ranks[int(hello["rank"])] = channel
            member.pids.add(int(hello["pid"]))

    def check_alive(self) -> None:
        for m in self.members.values():
            if m.proc.poll() is not None:
                raise RuntimeError(
                    f"scaling {m.key[0]} world {m.key[1]} exited {m.proc.returncode}:\n{m.tail()}"
                )

    def ask(self, member: Member, command: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """Send `command` to every rank of `member` and wait for each one's answer."""
        try:
            for channel in member.ranks.values():
                channel.send(command)
            return {rank: channel.recv() for rank, channel in member.ranks.items()}
        except (EOFError, OSError, ValueError):  # a rank that is gone: its process says why
            member.proc.wait()
            what = f"scaling {member.key[0]} world {member.key[1]}"
            raise RuntimeError(f"{what} exited {member.proc.returncode}:\n{member.tail()}") from None

    def window(self, key: Key) -> None:
        """One timed window of `key`, with the readings around it."""
        member = self.members[key]
        before = self.probe.read(member.pids)
        began = self.clock()
        answers = self.ask(member, {"do": "window"})
        wall = self.clock() - began
        reading = self.probe.window(before, self.probe.read(member.pids))
        self.taken.windows[key].append(float(answers[0]["rate"]))
        self.taken.readings[key].append({"start_s": began - self.t0, "wall_s": wall, **reading})

    def round(self, windows: int) -> None:
        """`windows` cycles, each taking one window of every measurement in turn_order."""
        for _ in range(windows):
            for key in turn_order(self.keys, self.cycle):
                self.window(key)
            self.cycle += 1
        self.taken.rounds += 1

    def profile(self, steps: int) -> None:
        """Rank 0's step profile of each measurement in turn (xtrain/bench/step_profile.py)."""
        for key in turn_order(self.keys, 0):
            answers = self.ask(self.members[key], {"do": "profile", "steps": steps})
            self.taken.profiles[key] = answers[0]["profile"]

    def stop(self) -> None:
        """Every rank leaves; every process must exit 0."""
        for m in self.members.values():
            for channel in m.ranks.values():
                with contextlib.suppress(OSError):  # a rank that already left: its exit code says how
                    channel.send({"do": "stop"})
        for m in self.members.values():
            if m.proc.wait() != 0:
                raise RuntimeError(
                    f"scaling {m.key[0]} world {m.key[1]} exited {m.proc.returncode}:\n{m.tail()}"
                )

    def kill(self) -> None:
        for m in self.members.values():
            if m.proc.poll() is None:
                m.proc.terminate()
        for m in self.members.values():
            try:
                m.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait()


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
