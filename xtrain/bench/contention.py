"""What else ran on the machine during a timed window: the raw readings a scaling window keeps.

Torch-free, Linux /proc only. Read before and after each window by the stage's conductor
(xtrain/bench/conductor.py), never inside a measured process:

- the measurement's own threads (every task of each of its processes), from /proc/<pid>/task/<tid>/schedstat:
  time on a CPU (`cpu_s`) and time runnable but waiting for one (`wait_s`), in nanoseconds;
- the machine's CPUs the measurement may run on (this process's affinity), from /proc/stat: busy
  (user, nice, system, irq, softirq) and stolen time in clock ticks, and `procs_running`, the tasks
  runnable at that instant, machine-wide.

The scaling gate turns them into a verdict itself (contracts.perf_record.others_share): whatever was
busy or stolen and was not the measurement's was another process's.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
BUSY_FIELDS = (0, 1, 2, 5, 6)  # user nice system irq softirq (iowait, idle and steal are not busy)
STEAL_FIELD = 7


def cpus_measured() -> list[int]:
    """The CPUs a measured process may run on: this process's affinity (inherited by its children)."""
    return sorted(os.sched_getaffinity(0))


def machine(cpus: Iterable[int], proc: Path = PROC) -> dict[str, float]:
    """Cumulative busy and stolen seconds of `cpus`, and the tasks runnable machine-wide right now."""
    wanted = {f"cpu{c}" for c in cpus}
    tick = os.sysconf("SC_CLK_TCK")
    busy = steal = 0
    runnable = 0
    for line in (proc / "stat").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] in wanted:
            values = [int(v) for v in fields[1:]]
            busy += sum(values[i] for i in BUSY_FIELDS)
            steal += values[STEAL_FIELD] if len(values) > STEAL_FIELD else 0
        elif fields and fields[0] == "procs_running":
            runnable = int(fields[1])
    return {"busy_s": busy / tick, "steal_s": steal / tick, "runnable": runnable}


def threads(pids: Iterable[int], proc: Path = PROC) -> dict[int, tuple[int, int]]:
    """(ns on a CPU, ns runnable and waiting) of every thread of `pids` (a thread that is gone is left out)."""
    out: dict[int, tuple[int, int]] = {}
    for pid in pids:
        try:
            tids = os.listdir(proc / str(pid) / "task")
        except OSError:
            continue
        for tid in tids:
            try:
                run, wait, _ = (proc / str(pid) / "task" / tid / "schedstat").read_text().split()
            except (OSError, ValueError):
                continue
            out[int(tid)] = (int(run), int(wait))
    return out


def threads_delta(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]]
) -> tuple[float, float]:
    """(cpu_s, wait_s) the threads spent between two readings (a thread born meanwhile counts from 0)."""
    cpu = wait = 0
    for tid, (run, waited) in after.items():
        r0, w0 = before.get(tid, (0, 0))
        cpu += run - r0
        wait += waited - w0
    return cpu / 1e9, wait / 1e9


class Probe:
    """Readings of one measurement's processes and the machine, before and after a window."""

    def __init__(self, cpus: list[int] | None = None, proc: Path = PROC) -> None:
        self.cpus = cpus if cpus is not None else cpus_measured()
        self.proc = proc
        if not (proc / "stat").is_file():
            raise RuntimeError(
                f"{proc / 'stat'} is missing: the scaling windows' contention readings need Linux /proc"
            )

    def read(self, pids: Iterable[int]) -> tuple[dict[str, float], dict[int, tuple[int, int]]]:
        return machine(self.cpus, self.proc), threads(pids, self.proc)

    @staticmethod
    def window(
        before: tuple[dict[str, float], dict], after: tuple[dict[str, float], dict]
    ) -> dict[str, float]:
        """One window's raw reading (its start and wall time are the conductor's)."""
        (m0, t0), (m1, t1) = before, after
        cpu, wait = threads_delta(t0, t1)
        return {
            "cpu_s": cpu,
            "wait_s": wait,
            "busy_s": m1["busy_s"] - m0["busy_s"],
            "steal_s": m1["steal_s"] - m0["steal_s"],
            "runnable": m1["runnable"],
        }
