"""Failpoints: process and environment faults for the failure and perf tests, inert unless armed.

Like FoundationDB's BUGGIFY or TiKV's `fail_point!`, only faults of the process and its environment
live here (a rank that crashes, hangs or diverges, a slower launcher, a slower step, more memory);
bugs in the logic never do: they are mutants of the catalogue (gates/campaigns/mutants.yaml), applied from
outside the code under test (docs/failpoints.md). The environment is read once per process, at
import; the trainer asks once per run (`step_failpoint`), so an unarmed step pays a single `is None`.

    XTRAIN_FAULT=<kind>@<rank|*>:<step>   raise (the rank raises), hang (it stops answering
                                          collectives), nan (its loss becomes NaN), at that step;
                                          slow_thread | slow_proc[:F]: that launcher's timed scaling-benchmark
                                          steps take F times as long (default 2; xtrain.bench.scaling.slowed),
                                          e.g. slow_proc:1.5@*:0
    XTRAIN_FAULT_IN=<name>                raise/hang/nan only in runs whose folder has a path component
                                          <name>: one pilot cell (runs/pilot/<cell>/<launcher>)
    XTRAIN_PERF_FAULT=sleep_ms=N,hold_mb=M   every step sleeps N ms inside the timed window; every rank
                                          holds M MiB on its device from before training to the end
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STEP_KINDS = ("raise", "hang", "nan")
SLOW_KINDS = ("slow_thread", "slow_proc")
KINDS = STEP_KINDS + SLOW_KINDS
EVERY_RANK = -1


class InjectedFault(RuntimeError):
    pass


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int  # EVERY_RANK for `*`
    step: int
    factor: float = 2.0  # slow_*: how many times as long a timed step takes


@dataclass(frozen=True)
class PerfFault:
    sleep_ms: float = 0.0
    hold_mb: int = 0


def parse(text: str | None) -> Fault | None:
    if not text:
        return None
    try:
        kind, where = text.split("@")
        kind, _, factor = kind.partition(":")
        rank, step = where.split(":")
        fault = Fault(kind, EVERY_RANK if rank == "*" else int(rank), int(step), float(factor or 2.0))
    except ValueError:
        raise ValueError(
            f"XTRAIN_FAULT={text!r}: expected KIND[:FACTOR]@RANK:STEP, e.g. raise@1:3 or slow_proc:1.5@*:0"
        ) from None
    if fault.kind not in KINDS:
        raise ValueError(f"XTRAIN_FAULT={text!r}: kind must be one of {', '.join(KINDS)}")
    if factor and (fault.kind not in SLOW_KINDS or not 1.0 <= fault.factor <= 100.0):
        raise ValueError(
            f"XTRAIN_FAULT={text!r}: a factor is for {' and '.join(SLOW_KINDS)} only, from 1 to 100"
        )
    return fault


def parse_perf(text: str | None) -> PerfFault:
    if not text:
        return PerfFault()
    try:
        fields = dict(item.split("=") for item in text.split(","))
        fault = PerfFault(float(fields.pop("sleep_ms", 0)), int(fields.pop("hold_mb", 0)))
    except ValueError:
        raise ValueError(f"XTRAIN_PERF_FAULT={text!r}: expected sleep_ms=N,hold_mb=M") from None
    if fields:
        raise ValueError(f"XTRAIN_PERF_FAULT={text!r}: unknown key {', '.join(fields)} (sleep_ms, hold_mb)")
    return fault


_FAULT = parse(os.environ.get("XTRAIN_FAULT"))
_SCOPE = os.environ.get("XTRAIN_FAULT_IN") or None
_PERF = parse_perf(os.environ.get("XTRAIN_PERF_FAULT"))


def _in_scope(run_dir: str | None) -> bool:
    return _SCOPE is None or (run_dir is not None and _SCOPE in Path(run_dir).parts)


def step_failpoint(rank: int, run_dir: str | None) -> Callable[[int], bool] | None:
    """What this rank's steps of the run training in `run_dir` must do, or None when nothing is armed.
    The callable takes the step: it raises or hangs at the armed step, sleeps every step under
    sleep_ms, and returns True where the step's loss must become NaN."""
    fault = _FAULT
    if fault is not None and not (
        fault.kind in STEP_KINDS and fault.rank in (EVERY_RANK, rank) and _in_scope(run_dir)
    ):
        fault = None
    sleep_s = _PERF.sleep_ms / 1000
    if fault is None and not sleep_s:
        return None
    return lambda step: _act(fault, sleep_s, step)


def _act(fault: Fault | None, sleep_s: float, step: int) -> bool:
    if sleep_s:
        time.sleep(sleep_s)
    if fault is None or step != fault.step:
        return False
    if fault.kind == "raise":
        raise InjectedFault(f"injected fault at step {step}")
    if fault.kind == "hang":
        while True:  # never returns: peers must time out, the launcher must not hang
            time.sleep(0.5)
    return True  # nan


def slow_factor(launcher: str) -> float:
    """How many times as long `launcher`'s timed benchmark steps take (XTRAIN_FAULT=slow_<launcher>[:F]@...);
    1.0 when nothing is armed."""
    return _FAULT.factor if _FAULT is not None and _FAULT.kind == f"slow_{launcher}" else 1.0


def hold(device: Any) -> Any:
    """The injected allocation (keep the returned tensor alive for the run), or None."""
    if not _PERF.hold_mb:
        return None
    import torch

    return torch.ones(_PERF.hold_mb << 18, dtype=torch.float32, device=device)  # 4-byte floats, touched
