"""What every stage entry point shares: common arguments and one-line errors with exit codes."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from xtrain.config import Params, load_params
from xtrain.errors import KNOWN, report


def parser(description: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a params.yaml value (validated like the file)",
    )
    return ap


def params_of(args: argparse.Namespace) -> Params:
    return load_params(args.params, args.overrides)


def run(body: Callable[[], None], errors: tuple[type[BaseException], ...] = ()) -> int:
    """Run a stage body; known errors become one line on stderr and a non-zero exit (xtrain.errors)."""
    try:
        body()
    except (*KNOWN, *errors) as e:
        return report(e)
    return 0
