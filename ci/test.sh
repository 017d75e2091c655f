#!/usr/bin/env bash
# The tests: install, then the whole suite (DDP tests serial in the xdist group `ddp`).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
ci/browser.sh  # Debian's chromium for the real-browser test of the HTML report
# Bytecode caches on, whatever the image says: the suite starts ~700 Python processes over the same
# project modules, and pytest caches its rewritten test modules only where bytecode may be written
# (a worker's collection: 12.7 CPU-s without the cache, 6.0 with it; docs/performance.md).
unset PYTHONDONTWRITEBYTECODE
exec ci/in-env.sh python3 -m pytest -n auto --dist loadgroup "$@"
