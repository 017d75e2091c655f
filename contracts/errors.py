"""One error path for every command line (torch-free).

A known failure is one line on stderr, `error: FILE: KEY: problem (rule: ...); next: what to do`,
and a non-zero exit; the traceback is printed only with XTRAIN_DEBUG=1. An unknown exception is a
bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn, ParamSpec

DEBUG_ENV = "XTRAIN_DEBUG"

P = ParamSpec("P")


class XtrainError(Exception):
    """A known failure; str(err) is one line naming the file (and key) and, if known, the next step."""

    exit_code = 1


class ValidationError(XtrainError, ValueError):
    """A file or value failed validation; str(err) is one line naming file, key, rule and next step."""

    exit_code = 2

    def __init__(self, source: str, key: str, problem: str, rule: str = "", hint: str = "") -> None:
        self.source, self.key, self.problem, self.rule, self.hint = source, key, problem, rule, hint
        key, problem = (
            clip(printable(str(key)), 100),
            clip(printable(str(problem)), 160),
        )  # a hostile file's own text
        where = f"{source}: {key}" if key else source
        tail = f" (rule: {rule})" if rule else ""
        step = f"; next: {hint}" if hint else ""
        super().__init__(printable(f"{where}: {problem}{tail}{step}"))


def clip(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with an ellipsis (a 10 KB key must not make a 10 KB error line)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def printable(text: str) -> str:
    """One line whatever a file holds: a key or value with a newline (or any unprintable character)
    is shown escaped, so it can neither split the error nor forge a second line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(value: object, markup: bool = False) -> str:
    """A file's own text as a command prints it (a registry reason, a report's gate id): unprintable
    characters escaped, so a newline cannot forge a line nor an ANSI escape recolour or retitle the
    terminal; with `markup` (printed through rich) its markup escaped too, so `[red]` stays text."""
    text = printable(str(value))
    if markup:
        from rich.markup import escape  # only where rich prints: the rest of contracts needs no rich

        text = escape(text)
    return text


class FileWriteError(XtrainError):
    """Writing an artifact failed (full disk, permissions, file size limit): the file is named."""

    def __init__(self, path: object, err: OSError) -> None:
        self.path, self.errno = str(path), err.errno
        code = errno.errorcode.get(err.errno or 0, "?")
        super().__init__(
            f"{path}: cannot write: {err.strerror or err} ({code}); "
            "next: free space or fix permissions, then re-run (the previous file is unchanged)"
        )


def debug() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def one_line(err: BaseException) -> str:
    """The message of a known failure, on one line (library messages can span several)."""
    if isinstance(err, OSError) and not isinstance(err, XtrainError) and err.filename is not None:
        code = errno.errorcode.get(err.errno or 0, "?")
        return f"{err.filename}: {err.strerror} ({code})"
    text = " ".join(str(err).split())
    return text or type(err).__name__


def exit_code(err: BaseException) -> int:
    return getattr(err, "exit_code", 1)


def report(err: BaseException, prefix: str = "") -> int:
    """Print a known failure as one line (traceback first with XTRAIN_DEBUG=1); return the exit code."""
    if debug():
        traceback.print_exception(err)
    print(f"error: {prefix}{one_line(err)}", file=sys.stderr)  # stderr is line-buffered: the line is out
    return exit_code(err)


KNOWN: tuple[type[BaseException], ...] = (XtrainError, OSError)


def cli(main: Callable[P, int]) -> Callable[P, int]:
    """Decorate a command's main(): known failures become one line and their exit code."""

    @functools.wraps(main)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except KNOWN as e:
            return report(e)

    return wrapper


def moved(module: str, command_file: str) -> NoReturn:
    """`python -m MODULE` of a library module that used to be a command: one line naming the command
    that replaced it (given as its file, `pipeline/train.py`: a path, not an import), exit 2. A script
    not yet updated must not succeed having done nothing."""
    command = command_file.removesuffix(".py").replace("/", ".")
    print(
        f"error: python -m {module}: moved; run python -m {command} (the same arguments)",
        file=sys.stderr,  # line-buffered: the line is out before the exit
    )
    raise SystemExit(2)
