"""Imported first by `python -m pipeline.train`: a torchrun worker dies with its agent from here on.

A worker spends seconds importing torch before any of its code runs. An agent killed in that time
(the whole tree SIGKILLed, as `dvc repro` may do) left the worker orphaned until its imports ended:
more than 5 s on a loaded 2-core box (tests/process/test_failures.py). So the parent death signal is set
before those imports, and a worker whose launcher is already gone leaves at once. Torch-free.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

LAUNCHER_ENV = "XTRAIN_LAUNCHER_PID"  # xtrain.core.proctree sets it for the launcher's tree


def guard_torchrun_worker() -> None:
    if "TORCHELASTIC_RUN_ID" not in os.environ or "LOCAL_RANK" not in os.environ:
        return  # not a torchrun worker (the launcher itself runs this module too)
    with contextlib.suppress(OSError, AttributeError):  # no prctl (not Linux): die_with_parent watches later
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    launcher = os.environ.get(LAUNCHER_ENV, "")
    if launcher.isdigit():
        try:
            os.kill(int(launcher), 0)
        except ProcessLookupError:  # the launcher died before this worker started: nothing may outlive it
            os._exit(1)
        except PermissionError:
            pass


guard_torchrun_worker()
