"""What importing a piece of DVC would add to `python3 -m gates check` (docs/verdicts.md, "Cost").

    python3 tests/dvc_import_cost.py [RUNS]

Each module is imported in a fresh interpreter after gates.__main__ (what the check has loaded by
then; voluptuous, which gates.__main__ now loads, after contracts.validate), RUNS times (default 5); the table gives the CPU seconds of that one import (min and median)
and the modules it adds. Timing is never asserted in a test: this prints a table.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULES = {  # module -> what the gates do with it
    "voluptuous": "reused: DVC's validator, with dvc/schema.py written out",
    "dvc.schema": "not imported: its schema written out (gates/reading/dvcschema.py)",
    "pathspec": "reused: DVC's gitignore patterns",
    "dvc.ignore": "not imported: its matching mirrored (gates/reading/dvcignore.py)",
    "dvc.pathspec_math": "not imported: merge_patterns mirrored",
    "dvc.parsing.interpolate": "reused, imported only for a value that is not a string (to_str)",
    "pyparsing": "not imported: DVC's expression grammar as a regex",
    "dvc.utils.serialize": "reused, imported only for a .toml or .py params file",
    "dvc_data.hashfile.hash": "not imported: md5-dos2unix mirrored (for DVC 2 entries)",
    "dvc.repo": "not imported: Repo.status, the lead's measurement (0.9-2.2 s a check)",
}
PROBE = """
import time, sys
import {base}
n = len(sys.modules)
t = time.process_time()
import {module}
print(time.process_time() - t, len(sys.modules) - n)
"""


def cost(module: str, runs: int) -> tuple[float, float, int]:
    seconds, added = [], 0
    for _ in range(runs):
        base = "contracts.validate" if module == "voluptuous" else "gates.__main__"  # gates import it now
        out = subprocess.run([sys.executable, "-c", PROBE.format(base=base, module=module)], capture_output=True, text=True,
                             cwd=REPO, check=True).stdout.split()  # fmt: skip
        seconds.append(float(out[0]))
        added = int(out[1])
    return min(seconds), statistics.median(seconds), added


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"{'module':26} {'min s':>7} {'median s':>9} {'+modules':>9}  the gates")
    for module, use in MODULES.items():
        low, mid, added = cost(module, runs)
        print(f"{module:26} {low:7.3f} {mid:9.3f} {added:9d}  {use}")


if __name__ == "__main__":
    main()
