#!/usr/bin/env bash
# The locked environment (docs/environment-lock.md): ci/requirements.lock, every package the project and
# its dev extra install, exact versions and the sha256 of every file of each, for Python >= 3.10 on any
# platform (`uv pip compile --universal`). ci/setup.sh installs it with pip --require-hashes --no-deps.
#
#   ci/lock.sh compile [UV_ARGS]  # after editing pyproject.toml: re-resolve, keeping every pin that still fits
#                                 # (e.g. --upgrade-package NAME: move that one package only)
#   ci/lock.sh refresh            # the dependency-update workflow: upgrade everything, print what moved
#                                 # (old -> new), then re-check the blessings in a scratch virtualenv with
#                                 # the new lock and say which moved and which cannot be re-checked here
#   ci/lock.sh images [LOCK]      # does each image's own torch (ci/torch.txt `# image:`) fit the lock?
#   ci/lock.sh wheelhouse DIR [PYTHON_VERSION [PLATFORM]]   # the lock's files for an offline runner
#                                 # (default 3.12 manylinux x86_64: the GPU nightly's image)
#
# torch stays outside the lock (ci/torch.txt pins the version the lock's torch dependencies are resolved
# for; ci/setup.sh installs it), and so do the wheels only its CUDA build needs (nvidia-*, cuda-*, triton).
# Exit: 0 done (refresh: no re-checked blessing moved), 1 refresh: a blessing moved, 2 error.
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=ci/requirements.lock
TOOLS="${XTRAIN_LOCK_TOOLS:-.xtrain/lock-tools}"
SDIST_ONLY=(antlr4-python3-runtime)  # pure Python, no wheel on PyPI: pip builds it (setuptools is locked)
export PIP_DISABLE_PIP_VERSION_CHECK=1 DVC_NO_ANALYTICS=1

uv_bin() {  # uv from ci/lock-tools.txt (hash-checked) in its own virtualenv, made once
  if [ ! -x "$TOOLS/bin/uv" ] || ! "$TOOLS/bin/python" ci/lockfile.py drift ci/lock-tools.txt >/dev/null; then
    python3 -m venv "$TOOLS" >&2
    "$TOOLS/bin/python" -m pip install -q --require-hashes --no-deps -r ci/lock-tools.txt >&2
  fi
  echo "$TOOLS/bin/uv"
}

compile() {  # $1: the output (its pins are kept where they fit, unless --upgrade follows)
  local out="$1" uv scratch outside=()
  shift
  uv=$(uv_bin)
  scratch=$(mktemp)
  [ -f "$out" ] && cp "$out" "$scratch"
  # Pass 1 names what torch's CUDA build pulls in (its names change between torch releases) ...
  "$uv" pip compile -q pyproject.toml --extra dev --universal --python-version 3.10 -c ci/torch.txt \
    -c ci/lock-constraints.txt -o "$scratch" "$@"
  mapfile -t outside < <(grep -oE '^(torch|triton|nvidia-[a-z0-9._-]+|cuda-[a-z0-9._-]+)==' "$scratch" | sed 's/==$//' | sort -u)
  rm -f "$scratch"
  # ... pass 2 writes the lock without them (the resolution is the same: uv's cache answers).
  "$uv" pip compile -q pyproject.toml --extra dev --universal --python-version 3.10 -c ci/torch.txt \
    -c ci/lock-constraints.txt --generate-hashes --custom-compile-command "ci/lock.sh compile" \
    "${outside[@]/#/--no-emit-package=}" -o "$out" "$@"
  images "$out"
}

images() {  # each image's own torch (ci/torch.txt `# image:` lines) must resolve against the lock $1
  local uv torch py pins why
  uv=$(uv_bin)
  while read -r torch py; do
    pins=$(mktemp)
    python3 ci/lockfile.py for "$py" "$1" | sed 's/ --hash=.*//' > "$pins"
    if ! why=$("$uv" pip compile -q --no-header - -c "$pins" --python-version "$py" \
        --python-platform x86_64-manylinux_2_28 -o /dev/null <<< "$torch" 2>&1); then
      echo "error: $1: $torch (an image's torch, Python $py) does not fit the lock: $(grep -m1 'cause:' <<< "$why" | sed 's/^ *cause: //')" >&2
      echo "  next: add what it requires to ci/lock-constraints.txt, then ci/lock.sh compile" >&2
      rm -f "$pins"; return 1
    fi
    rm -f "$pins"
    echo "lock: $torch (an image's, Python $py) fits the lock"
  done < <(sed -n 's/^# image: \(torch==[^ ]*\) python \([0-9.]*\).*/\1 \2/p' ci/torch.txt)
}

refresh() {
  local new old status=0
  new=$(mktemp -d /tmp/xtrain-lock.XXXXXX)
  cp "$LOCK" "$new/old.lock"
  cp "$LOCK" "$new/requirements.lock"
  echo "refresh: uv pip compile --upgrade ($("$(uv_bin)" --version))"
  compile "$new/requirements.lock" --upgrade
  python3 ci/lockfile.py check "$new/requirements.lock" >/dev/null || {
    python3 ci/lockfile.py check "$new/requirements.lock"; exit 2; }
  python3 ci/lockfile.py moved "$new/old.lock" "$new/requirements.lock"
  cp "$new/requirements.lock" "$LOCK"
  echo "refresh: $LOCK written ($(grep -cE '^[a-z0-9]' "$LOCK") pins, $(wc -c < "$LOCK") bytes)"
  recheck "$new" || status=$?
  echo "refresh: scratch $new (rm -r it when done)"
  return "$status"
}

recheck() {  # $1: a scratch folder holding requirements.lock
  local s="$1"
  [ -z "$(git status --porcelain -- . ":!$LOCK")" ] ||
    echo "refresh: note: uncommitted changes besides the lock are not in the re-check (it clones HEAD)"
  git clone -q . "$s/repo" && cp "$s/requirements.lock" "$s/repo/$LOCK" && python3 -m venv "$s/venv" || return 2
  echo "refresh: a fresh virtualenv with the new lock ($s/venv): ci/setup.sh"
  # (called in an `||` list, where set -e does not hold: each step's failure is an error of its own)
  (cd "$s/repo" && VIRTUAL_ENV="$s/venv" PATH="$s/venv/bin:$PATH" ci/setup.sh 2>&1 | sed 's/^/  /') || {
    echo "refresh: error: ci/setup.sh with the new lock failed in $s (above); nothing re-checked" >&2
    return 2
  }
  (cd "$s/repo" && VIRTUAL_ENV="$s/venv" PATH="$s/venv/bin:$PATH" python3 ci/lock_recheck.py)
}

wheelhouse() {  # the lock's files for an offline interpreter: every pin that holds there, hash-checked
  local dir="${1:?wheelhouse DIR [PYTHON_VERSION [PLATFORM]]}" py="${2:-3.12}" plat="${3:-manylinux_2_28_x86_64}"
  local tags=(--platform "$plat")
  case "$plat" in manylinux_2_28_x86_64) tags+=(--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform linux_x86_64) ;; esac
  # wheels only: a version without a wheel for that Python fails here, not by building C or Rust offline
  # (the pure-Python sdists the lock has no wheel of are listed in SDIST_ONLY and built there offline)
  local reqs
  reqs=$(mktemp)
  python3 ci/lockfile.py for "$py" > "$reqs"  # the target's markers, not this interpreter's
  python3 -m pip download -q --require-hashes --no-deps -r "$reqs" -d "$dir" --only-binary=:all: \
    "${SDIST_ONLY[@]/#/--no-binary=}" \
    --python-version "$py" --implementation cp --abi "cp${py/./}" --abi abi3 --abi none "${tags[@]}"
  rm -f "$reqs"
  echo "wheelhouse: $dir: $(ls "$dir" | wc -l) files, $(du -sh "$dir" | cut -f1) for Python $py on $plat;"
  echo "  install: PIP_NO_INDEX=1 PIP_FIND_LINKS=$dir ci/setup.sh  (hash-checked against $LOCK)"
}

case "${1:-}" in
  compile) shift; compile "$LOCK" "$@"; python3 ci/lockfile.py check "$LOCK" ;;
  refresh) refresh ;;
  wheelhouse) shift; wheelhouse "$@" ;;
  images) images "${2:-$LOCK}" ;;
  *) sed -n '2,18p' "$0"; exit 2 ;;
esac
