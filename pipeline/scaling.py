"""Stage `scaling`: tokens/s per launcher and world -> bench/scaling.json and bench/scaling.png.

bench/scaling.json is validated when written (contracts.artifacts); a bad record is one line, exit 2.
"""

from __future__ import annotations

import sys

from pipeline import stage
from xtrain.scaling_bench import main as scaling_main


def main(argv: list[str] | None = None) -> int:
    code = 0

    def body() -> None:
        nonlocal code
        code = scaling_main(sys.argv[1:] if argv is None else argv)

    return stage.run(body) or code


if __name__ == "__main__":
    sys.exit(main())
