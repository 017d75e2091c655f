#!/usr/bin/env bash
# Install xtrain-gates (editable, with dev tools) into the project's Python environment.
#
# Which environment (printed):
#   - the active virtualenv or conda env, if any;
#   - otherwise a project virtualenv, .venv (made once, then reused), when the interpreter is
#     externally managed (PEP 668: Debian's and Ubuntu's python3) or XTRAIN_VENV=1 asks for it;
#   - otherwise the interpreter itself (PYTHON, default python3).
# The choice is written to .xtrain/python; ci/in-env.sh runs commands inside it.
#
# What (printed): the lock, ci/requirements.lock (docs/environment-lock.md): every package but torch at
# its exact version, pip's hash-checking mode, --no-deps (nothing unlocked slips in), then this checkout
# editable (--no-deps), then `pip check`. ci/installed.py skips pip when installed == the lock.
# XTRAIN_LOCK=FILE installs another lock; XTRAIN_LOCK=none pyproject's ranges (+ XTRAIN_EXTRAS, default dev).
#
# Which torch (printed), outside the lock: an environment that already imports torch keeps it (a GPU
# box keeps its CUDA build); otherwise ${XTRAIN_TORCH:-ci/torch.txt's pin}: the CUDA build where
# nvidia-smi sees a GPU, the CPU build elsewhere (the PyTorch CPU index is added only when pip would
# not pick a CPU build by itself, so no machine downloads several GB of CUDA wheels it cannot use).
#
# Offline (a runner with a wheelhouse built by `ci/lock.sh wheelhouse DIR`):
#   PIP_NO_INDEX=1 PIP_FIND_LINKS=DIR ci/setup.sh
set -euo pipefail
PLAN=0; [ "${1:-}" = --plan ] && PLAN=1
cd "$(dirname "$0")/.."
export DVC_NO_ANALYTICS=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
BASE="${PYTHON:-python3}"
TORCH_SPEC="${XTRAIN_TORCH:-$(grep -m1 '^torch==' ci/torch.txt)}"
LOCK="${XTRAIN_LOCK-ci/requirements.lock}"
CPU_INDEX="https://download.pytorch.org/whl/cpu"

in_env() {  # 0 when the interpreter runs inside a virtualenv or conda env
  "$1" -c 'import os, sys; sys.exit(0 if sys.prefix != sys.base_prefix or os.environ.get("CONDA_PREFIX") == sys.prefix else 1)'
}
externally_managed() {  # PEP 668 marker next to the standard library
  "$1" -c 'import os, sys, sysconfig; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'
}

make_venv() {
  local dir="${XTRAIN_VENV_DIR:-.venv}"
  if [ ! -x "$dir/bin/python" ]; then
    if ! "$BASE" -c 'import venv, ensurepip' 2>/dev/null; then
      echo "error: $BASE cannot make a virtualenv (no venv/ensurepip): install it, e.g. apt-get install python3-venv" >&2
      exit 1
    fi
    # A base interpreter that already has torch lends it (a GPU image keeps its CUDA build).
    local lend=()
    "$BASE" -c "import torch" 2>/dev/null && lend=(--system-site-packages)
    "$BASE" -m venv "${lend[@]}" "$dir"
  fi
  PY="$(cd "$dir/bin" && pwd)/python"
}

if ! command -v "$BASE" >/dev/null; then
  echo "error: $BASE not found: install Python >= 3.10 or set PYTHON=/path/to/python3" >&2
  exit 1
fi
if [ "${XTRAIN_VENV:-0}" = 1 ]; then
  make_venv; why="project virtualenv (XTRAIN_VENV=1)"
elif in_env "$BASE"; then
  PY="$("$BASE" -c 'import sys; print(sys.executable)')"; why="the active environment"
elif externally_managed "$BASE"; then
  make_venv; why="project virtualenv ($BASE is externally managed, PEP 668)"
else
  PY="$("$BASE" -c 'import sys; print(sys.executable)')"; why="$BASE (not externally managed)"
fi
mkdir -p .xtrain
printf '%s\n' "$PY" > .xtrain/python
echo "setup: python $PY: $why"

torch_cmd=()
# metadata, not `import torch` (1.5-3 s): an installed torch is kept whatever its build
if torch_version=$("$PY" -c 'from importlib.metadata import version; print(version("torch"))' 2>/dev/null); then
  echo "setup: torch: keeping $torch_version"
elif command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "setup: torch: a GPU is present: $TORCH_SPEC, CUDA build"
  torch_cmd=("$PY" -m pip install -q "$TORCH_SPEC")
else
  # What would pip pick without help? A +cpu build (a local wheel, a CPU mirror) is taken as is.
  picked=$("$PY" -m pip install -q --dry-run --no-deps --report - "$TORCH_SPEC" 2>/dev/null |
    "$PY" -c 'import json, sys; print(json.load(sys.stdin)["install"][0]["metadata"]["version"])' || true)
  extra=()
  case "$picked" in *+cpu) ;; *) extra=(--extra-index-url "$CPU_INDEX") ;; esac
  echo "setup: torch: no GPU: $TORCH_SPEC, CPU build${extra:+ from $CPU_INDEX}"
  torch_cmd=("$PY" -m pip install -q "${extra[@]}" "$TORCH_SPEC")
fi
[ "$PLAN" = 1 ] && exit 0
if [ "$LOCK" = none ]; then  # a user's own environment: pyproject's ranges
  [ ${#torch_cmd[@]} -eq 0 ] || "${torch_cmd[@]}"
  EXTRAS="${XTRAIN_EXTRAS-dev}"  # XTRAIN_EXTRAS= installs without the dev tools
  # pip resolves an environment that has everything in ~10 s; ci/installed.py reads the metadata
  # (0 nothing to do, 3 only this checkout's editable install, 1 pip resolves)
  set +e; "$PY" ci/installed.py "$EXTRAS"; have=$?; set -e
  if [ "$have" = 3 ]; then
    "$PY" -m pip install -q --no-deps --no-build-isolation -e . 2>/dev/null || "$PY" -m pip install -q --no-deps -e .
  elif [ "$have" != 0 ]; then
    "$PY" -m pip install -q -e ".${EXTRAS:+[$EXTRAS]}"
  fi
else
  [ -f "$LOCK" ] || { echo "error: $LOCK: missing (XTRAIN_LOCK names the lock; none: pyproject's ranges)" >&2; exit 2; }
  # 0: installed == the lock and this checkout; 3: only this checkout; 1: the lock (a package drifted)
  set +e; "$PY" ci/installed.py --lock "$LOCK"; have=$?; set -e
  if [ "$have" = 1 ]; then
    # The lock's build backend first, so the sdists the lock holds (antlr4-python3-runtime: no wheel
    # on PyPI) build with it, offline too: nothing unlocked is fetched, not even to build.
    backend=$(mktemp)
    "$PY" ci/lockfile.py pick setuptools > "$backend"
    "$PY" -m pip install -q --require-hashes --no-deps -r "$backend"
    rm -f "$backend"
    echo "setup: lock: pip install --require-hashes --no-deps --no-build-isolation -r $LOCK"
    "$PY" -m pip install -q --require-hashes --no-deps --no-build-isolation -r "$LOCK"
  fi
  [ ${#torch_cmd[@]} -eq 0 ] || "${torch_cmd[@]}"  # its pure-Python dependencies are the lock's
  # setuptools (the build backend) is in the lock: no build isolation, so nothing unlocked is fetched
  [ "$have" = 0 ] || "$PY" -m pip install -q --no-deps --no-build-isolation -e .
  if [ "$have" = 1 ] || [ ${#torch_cmd[@]} -gt 0 ]; then  # what the lock or torch installed fits together
    "$PY" -m pip check | sed 's/^/setup: pip check: /'
    "$PY" ci/installed.py --lock "$LOCK" > /dev/null || {
      echo "error: $LOCK: installed differs from the lock after the install: $("$PY" ci/installed.py --lock "$LOCK")" \
        "(torch's own requirements? ci/torch.txt pins the torch the lock is resolved for; next: ci/lock.sh compile)" >&2
      exit 1
    }
  fi
fi
"$PY" - <<'PYEOF'
from importlib.metadata import version
print("setup: " + ", ".join(f"{n} {version(n)}" for n in ("torch", "transformers", "dvc", "tokenizers", "safetensors")))
PYEOF
