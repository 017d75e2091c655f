"""A refusal the user's loop does not catch is one line on stderr and exit 2, never a traceback.

runrecord refuses a value or a setting at the call that receives it (`RunRecordError`, the run folder
guard's `OutputRefused`, a busy run folder): project errors (contracts/errors.py `XtrainError`). A
user's training script does not catch them, so Python would print a traceback through the user's
code and runrecord's. `one_line_errors()` (called when a recorder is made, before its first check)
chains a `sys.excepthook` that prints such an error as the project's one line (`error: runrecord:
CALL: ARG: problem (rule: ...)`, through contracts/errors.py `report`) and exits with its code;
every other exception goes to the hook that was there before, untouched. `XTRAIN_DEBUG=1` prints
the traceback first, as every command of the project does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType

from contracts.errors import XtrainError, report


class _OneLine:
    """sys.excepthook: project errors as one line and their exit code, the rest to `previous`."""

    def __init__(self, previous: Callable[..., object]) -> None:
        self.previous = previous

    def __call__(self, kind: type[BaseException], err: BaseException, tb: TracebackType | None) -> None:
        if not isinstance(err, XtrainError):
            self.previous(kind, err, tb)
            return
        code = report(err)
        sys.stdout.flush()
        raise SystemExit(code)  # raised by the hook, Python exits with it (nothing more is printed)


def one_line_errors() -> None:
    """Install the hook once per process (a second recorder, or a hook someone set after ours, is left be)."""
    if not isinstance(sys.excepthook, _OneLine):
        sys.excepthook = _OneLine(sys.excepthook)
