#!/usr/bin/env bash
# Run a command inside the environment ci/setup.sh chose (.xtrain/python): its bin folder comes
# first on PATH, so `python3`, `dvc`, `pytest` and the pipeline's own `python3 -m ...` stages all
# use that interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -s .xtrain/python ]; then
  echo "error: .xtrain/python: missing: run ci/setup.sh first" >&2
  exit 2
fi
bin="$(dirname "$(cat .xtrain/python)")"
export PATH="$bin:$PATH" DVC_NO_ANALYTICS=1
exec "$@"
