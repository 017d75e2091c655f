"""Independent DVC stages side by side: `python -m pipeline.repro --jobs N` (docs/run-cache.md).

`dvc repro` runs one stage at a time. Each stage here is its own `dvc --wait-for-lock repro -s STAGE`:
DVC releases its repository lock while a stage's command runs and takes it to record the outputs, so
stages whose inputs are ready run at once and dvc.lock is still written one stage at a time. A stage
that measures time (`exclusive`) runs alone among the stages that contend for what it measures
(`contending`: every stage on a CPU run; on a GPU run the stages that use the GPU, so the CPU-only
export and closed loop overlap a timed training).
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Started = Callable[[str], subprocess.Popen[str]]


@dataclass
class Plan:
    upstream: dict[str, set[str]]  # stage -> the stages whose outputs it reads
    jobs: int
    exclusive: set[str] = field(default_factory=set)  # timed: nothing that contends runs beside them
    contending: set[str] | None = None  # what a timed stage must not share (None: every stage)

    def contends(self, stage: str) -> bool:
        return self.contending is None or stage in self.contending or stage in self.exclusive

    def downstream_count(self, stage: str) -> int:
        """How many stages wait, directly or not, on `stage`: the longer chains start first."""
        seen: set[str] = set()
        todo = [s for s, ups in self.upstream.items() if stage in ups]
        while todo:
            s = todo.pop()
            if s not in seen:
                seen.add(s)
                todo += [t for t, ups in self.upstream.items() if s in ups]
        return len(seen)

    def ready(self, pending: set[str], done: set[str]) -> list[str]:
        """Stages whose inputs are built: longer chains first, then the timed ones last (they wait to
        be alone)."""
        ok = [s for s in pending if self.upstream[s] <= done]
        return sorted(ok, key=lambda s: (-self.downstream_count(s), s in self.exclusive, s))

    def may_start(self, stage: str, running: set[str]) -> bool:
        if len(running) >= self.jobs:
            return False
        if stage in self.exclusive:
            return not any(self.contends(r) for r in running)
        return not (self.contends(stage) and running & self.exclusive)


def _pump(stage: str, proc: subprocess.Popen[str], lines: queue.Queue) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.put((stage, line, None))
    lines.put((stage, "", proc.wait()))


def run_plan(plan: Plan, start: Started, on_line: Callable[[str, str], None]) -> dict[str, dict]:
    """Run every stage of the plan; returns stage -> {exit_code, start_s, wall_s}. After a failure no
    new stage starts (as `dvc repro` stops), the running ones finish."""
    t0, lines = time.monotonic(), queue.Queue()
    pending, running, done = set(plan.upstream), {}, {}
    failed = False
    while (pending and not failed) or running:
        for stage in [] if failed else plan.ready(pending, set(done)):
            if not plan.may_start(stage, set(running)):
                continue
            running[stage] = time.monotonic()
            pending.discard(stage)
            threading.Thread(target=_pump, args=(stage, start(stage), lines), daemon=True).start()
        if not running:
            break  # nothing can start: an upstream stage failed
        stage, line, code = lines.get()
        if code is None:
            on_line(stage, line)
            continue
        began = running.pop(stage)
        done[stage] = {
            "exit_code": code,
            "start_s": round(began - t0, 2),
            "wall_s": round(time.monotonic() - began, 2),
        }
        failed = failed or code != 0
    return done


def print_line(stage: str, line: str) -> None:
    sys.stdout.write(f"[{stage}] {line}")
    sys.stdout.flush()
