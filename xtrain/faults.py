"""Fault injection for the launcher failure tests: XTRAIN_FAULT=<kind>@<rank>:<step>.

kinds: `raise` (the rank raises), `hang` (the rank stops answering collectives), `nan` (the
rank's loss becomes NaN). Unset in normal runs; read once per process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


class InjectedFault(RuntimeError):
    pass


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    step: int


def parse(text: str | None) -> Fault | None:
    if not text:
        return None
    try:
        kind, where = text.split("@")
        rank, step = where.split(":")
        fault = Fault(kind, int(rank), int(step))
    except ValueError:
        raise ValueError(f"XTRAIN_FAULT={text!r}: expected KIND@RANK:STEP, e.g. raise@1:3") from None
    if fault.kind not in ("raise", "hang", "nan"):
        raise ValueError(f"XTRAIN_FAULT={text!r}: kind must be raise, hang or nan")
    return fault


_FAULT = parse(os.environ.get("XTRAIN_FAULT"))


def at_step(rank: int, step: int) -> bool:
    """Apply a `raise`/`hang` fault for (rank, step); True when the loss should be poisoned (`nan`)."""
    f = _FAULT
    if f is None or f.rank != rank or f.step != step:
        return False
    if f.kind == "raise":
        raise InjectedFault(f"injected fault at step {step}")
    if f.kind == "hang":
        while True:  # never returns: peers must time out, the launcher must not hang
            time.sleep(0.5)
    return True
