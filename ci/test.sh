#!/usr/bin/env bash
# The tests: install, then the whole suite (DDP tests serial in the xdist group `ddp`).
#   ci/test.sh [PYTEST_ARGS...]           # the whole suite (what .ci/run runs)
#   ci/test.sh --quick [PYTEST_ARGS...]   # the unit tier only: tests/unit, in-process (docs/house.md)
# Any other argument goes to pytest as is.
set -euo pipefail
cd "$(dirname "$0")/.."
what=() args=()
for a in "$@"; do
  if [ "$a" = --quick ]; then what=(tests/unit); else args+=("$a"); fi
done
ci/setup.sh
# Debian's chromium for the real-browser test of the HTML report (tests/pipeline: not in the unit tier)
[ ${#what[@]} -gt 0 ] || ci/browser.sh
# Bytecode caches on, whatever the image says: the suite starts ~700 Python processes over the same
# project modules, and pytest caches its rewritten test modules only where bytecode may be written
# (a worker's collection: 12.7 CPU-s without the cache, 6.0 with it; docs/performance.md).
unset PYTHONDONTWRITEBYTECODE
exec ci/in-env.sh python3 -m pytest -n auto --dist loadgroup ${what[@]+"${what[@]}"} ${args[@]+"${args[@]}"}
