"""What every stage entry point shares: common arguments and one-line errors with exit codes."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from contracts.errors import KNOWN, report
from params.cli import add_params_args
from params.config import Params, load_params


def parser(description: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    add_params_args(ap)
    return ap


def params_of(args: argparse.Namespace) -> Params:
    return load_params(args.params, args.overrides)


def run(body: Callable[[], None], errors: tuple[type[BaseException], ...] = ()) -> int:
    """Run a stage body; known errors become one line on stderr and a non-zero exit (contracts.errors)."""
    try:
        body()
    except (*KNOWN, *errors) as e:
        return report(e)
    return 0
