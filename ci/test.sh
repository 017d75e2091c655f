#!/usr/bin/env bash
# The tests: install, then the whole suite (DDP tests serial in the xdist group `ddp`).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
ci/browser.sh  # Debian's chromium for the real-browser test of the HTML report
exec ci/in-env.sh python3 -m pytest -n auto --dist loadgroup "$@"
