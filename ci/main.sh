#!/usr/bin/env bash
# The main job: install, run the pipeline, judge it. Exit code: the gates' (0 pass, 1 fail, 2 error).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
ci/in-env.sh dvc repro
exec ci/in-env.sh python3 -m gates check "$@"
