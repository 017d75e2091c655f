"""Loaded by every Python process of a census run (ci/suite_census.py puts this folder first on
PYTHONPATH): at exit, one JSON line of the process's own CPU to $XTRAIN_CENSUS_PROCS.

What it imported tells the fixed costs apart: `import torch` and torch._dynamo are ~4 CPU-s of a
tiny training process on a 2-core box (docs/performance.md). A process that ends by a signal or
os._exit writes nothing, and git, sh and chromium are not Python: the census undercounts them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import time

_STARTED = time.monotonic()


def _record() -> None:
    path = os.environ.get("XTRAIN_CENSUS_PROCS")
    if not path:
        return
    times = os.times()
    line = json.dumps(
        {
            "argv": sys.argv[:6],
            "user": times.user,
            "sys": times.system,
            "wall": time.monotonic() - _STARTED,
            "torch": "torch" in sys.modules,
            "dynamo": "torch._dynamo" in sys.modules,
            "transformers": "transformers" in sys.modules,
            "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
            "xdist_worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        }
    )
    # one write of one line to a file opened for appending: concurrent processes do not interleave.
    # Silent when it cannot write: the census must not change what a process prints (a test that
    # limits its child's file size saw this logger's EFBIG traceback on stderr).
    with contextlib.suppress(OSError), open(path, "a") as log:
        log.write(line + "\n")


atexit.register(_record)
