"""Stage `scaling`: tokens/s per launcher and world -> bench/scaling.json (schema-checked) and bench/scaling.png."""

from __future__ import annotations

import sys

from xtrain.scaling import main as scaling_main
from xtrain.validate import ValidationError, load_json, load_schema


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    code = scaling_main(argv)
    if code == 0:
        out = argv[argv.index("--out") + 1] if "--out" in argv else "bench"
        try:
            load_json(f"{out}/scaling.json", load_schema("gates", "scaling.schema.json"))
        except ValidationError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
