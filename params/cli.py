"""The command-line arguments every command that reads params.yaml shares (torch-free).

Only entry points use it (pipeline/, gates/__main__.py, registry/__main__.py): the library below
them takes typed config, never argv.
"""

from __future__ import annotations

import argparse

from params.config import DEFAULT_PARAMS


def add_params_args(ap: argparse.ArgumentParser, overrides: bool = True) -> None:
    """`--params FILE` and (with overrides) repeatable `--set KEY=VALUE`: every command reads params this way."""
    ap.add_argument("--params", default=DEFAULT_PARAMS)
    if overrides:
        ap.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a params.yaml value (validated like the file)",
        )
