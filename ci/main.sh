#!/usr/bin/env bash
# The main job: install, run the pipeline, judge it. Exit code: the gates' (0 pass, 1 fail, 2 error).
# The pipeline reuses what DVC's run cache (shared through the default remote, docs/run-cache.md)
# already holds for this environment; a green verdict shares this run's stages back.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
unset PYTHONDONTWRITEBYTECODE  # ~60 processes import the same project modules: compile them once
ci/in-env.sh python3 -m pipeline.repro --jobs 2  # stages side by side; timed ones alone (docs/run-cache.md)
rc=0
ci/in-env.sh python3 -m gates check "$@" || rc=$?
if [ "$rc" -eq 0 ]; then ci/in-env.sh python3 -m pipeline.repro push || echo "main: warning: the run cache was not shared"; fi
exit "$rc"
