#!/usr/bin/env bash
# The example's run (after ci/setup.sh): dvc repro (corpus, tokenizer, transformers.Trainer on one
# device and under torchrun at world 2, md5 against hf_registry, reload closed loop), then the
# real gates on this folder's artifacts. Exit code: the gates' (0 pass, 1 fail, 2 error, 3 inconclusive).
set -euo pipefail
if [ -z "${HF_EXAMPLE_IN_ENV:-}" ]; then  # inside the environment ci/setup.sh chose
  export HF_EXAMPLE_IN_ENV=1
  exec "$(dirname "$0")/../../ci/in-env.sh" examples/hf-trainer/run.sh "$@"
fi
cd "$(dirname "$0")"
dvc repro
exec python3 -m gates check "$@"
