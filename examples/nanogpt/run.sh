#!/usr/bin/env bash
# nanoGPT gated: dvc repro (prepare, train_single, train@proc under torchrun with 2 ranks, gloo), then
# the gates on this folder's runs. Exit code: the gates' (0 pass, 1 fail, 2 error, 3 inconclusive).
set -euo pipefail
cd "$(dirname "$0")"
export DVC_NO_ANALYTICS=1 PYTHONPATH="$(cd ../.. && pwd)${PYTHONPATH:+:$PYTHONPATH}"
dvc repro
exec python3 -m gates check "$@"
