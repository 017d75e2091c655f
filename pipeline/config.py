"""Read the resolved params, or edit params.yaml (validated, comments kept).

python -m pipeline.config show [--set K=V ...]     # the resolved params (profile and overrides applied)
python -m pipeline.config get KEY                  # one resolved value, e.g. export.dtype
python -m pipeline.config set K=V ...              # a validated edit of the file
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from contracts.errors import cli
from params.config import DEFAULT_PARAMS, load_params, set_in_file


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m pipeline.config",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--params", default=DEFAULT_PARAMS)
    sub = ap.add_subparsers(dest="cmd", required=True)
    show = sub.add_parser("show", help="print the resolved params (profile and overrides applied)")
    show.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    setp = sub.add_parser("set", help="validate and write KEY=VALUE into the params file")
    setp.add_argument("overrides", nargs="+", metavar="KEY=VALUE")
    get = sub.add_parser("get", help="print one resolved value, e.g. export.dtype")
    get.add_argument("key")
    return ap


@cli
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.cmd == "show":
        print(yaml.safe_dump(load_params(args.params, args.overrides).raw, sort_keys=False), end="")
    elif args.cmd == "get":
        value = load_params(args.params).lookup(args.key)
        print(value if not isinstance(value, (dict, list)) else json.dumps(value))
    else:
        set_in_file(args.params, args.overrides)
        print(f"{args.params}: set {', '.join(args.overrides)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
