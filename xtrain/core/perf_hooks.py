"""Test hooks for the perf gates' negative controls: XTRAIN_PERF_FAULT="sleep_ms=N,hold_mb=M".

sleep_ms: every training step sleeps N ms inside the timed window (a slowdown).
hold_mb: every rank allocates and touches M MiB on its device before training and holds it to the
end (a memory regression). Unset in normal runs; read once per process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PerfFault:
    sleep_ms: float = 0.0
    hold_mb: int = 0


def parse(text: str | None) -> PerfFault:
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


_FAULT = parse(os.environ.get("XTRAIN_PERF_FAULT"))


def hold(device: torch.device) -> torch.Tensor | None:
    """The injected allocation (keep the returned tensor alive for the run), or None."""
    if not _FAULT.hold_mb:
        return None
    return torch.ones(_FAULT.hold_mb << 18, dtype=torch.float32, device=device)  # 4-byte floats, touched


def step_delay() -> None:
    if _FAULT.sleep_ms:
        time.sleep(_FAULT.sleep_ms / 1000)
