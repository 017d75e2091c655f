#!/usr/bin/env bash
# Install xtrain-gates (editable) and its dev tools into the current Python.
#
# torch: a machine that already has torch keeps it (a GPU box keeps its CUDA build). Elsewhere
# we install the pinned CPU build, ${XTRAIN_TORCH:-torch==2.13.0}; on a generic CPU box set
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu so pip does not pull a CUDA build.
# An offline GPU runner installs from a wheelhouse instead: see ci/nightly-gpu.sh (WHEELHOUSE=).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export DVC_NO_ANALYTICS=1 PIP_DISABLE_PIP_VERSION_CHECK=1

if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q "${XTRAIN_TORCH:-torch==2.13.0}"
fi
EXTRAS="${XTRAIN_EXTRAS-dev}"  # XTRAIN_EXTRAS= installs without the dev tools
"$PY" -m pip install -q -e ".${EXTRAS:+[$EXTRAS]}"
"$PY" - <<'PYEOF'
import torch, transformers, dvc, tokenizers, safetensors
print(f"setup: torch {torch.__version__} (cuda {torch.cuda.is_available()}), transformers {transformers.__version__}, "
      f"dvc {dvc.__version__}, tokenizers {tokenizers.__version__}, safetensors {safetensors.__version__}")
PYEOF
