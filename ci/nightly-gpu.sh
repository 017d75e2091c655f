#!/usr/bin/env bash
# Nightly GPU job: install, GPU smoke tests, the pipeline with the GPU profile on every visible GPU,
# the gates, a determinism probe, the test suite (DDP tests serially); optionally the benchmark.
#
#   ci/nightly-gpu.sh                     # a runner with a package index
#   WHEELHOUSE=.whl ci/nightly-gpu.sh     # an offline runner: missing wheels are unpacked beside the image's
#
# Everything worth keeping lands in $ARTIFACTS (default: artifacts/). Exit status: non-zero if the
# pipeline, the gates or the tests failed (each step still runs, so one failure shows all the others).
set -uo pipefail
cd "$(dirname "$0")/.."
export DVC_NO_ANALYTICS=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
# NVLink multicast can take a shared host's GPUs down: keep it off (see the runner's notes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ART="${ARTIFACTS:-artifacts}"
PROFILE="${NIGHTLY_PROFILE:-gpu}"
BENCH="${NIGHTLY_BENCH:-0}"  # the benchmark is a separate, optional step (NIGHTLY_BENCH=1)
mkdir -p "$ART"
status=0
step() { echo; echo "=== nightly: $* ($(date -u +%H:%M:%S))"; }
fail() { echo "=== nightly: FAILED: $*"; status=1; }

step "install"
if [ -n "${WHEELHOUSE:-}" ]; then
  SITE="${SITE:-/tmp/xtrain-site}"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELHOUSE"/*.whl || exit 2
  export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
else
  XTRAIN_EXTRAS="${XTRAIN_EXTRAS-dev}" ci/setup.sh || exit 2
fi
DVC="python3 -m dvc"
# A runner's checkout without git history (an exported tree): DVC works without SCM.
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || $DVC config --local core.no_scm true
python3 - <<'EOF' | tee "$ART/environment.txt"
import torch, transformers
print(f"torch {torch.__version__}, cuda {torch.version.cuda}, transformers {transformers.__version__}")
for i in range(torch.cuda.device_count()):
    print(f"cuda:{i} {torch.cuda.get_device_name(i)}")
EOF
NGPU=$(python3 -c "import torch; print(torch.cuda.device_count())")
if [ "$PROFILE" = gpu ] && [ "$NGPU" -lt 1 ]; then echo "no CUDA device visible"; exit 2; fi
WORLD=$(( NGPU > 0 ? NGPU : 2 ))

step "GPU smoke tests (serial: they share the GPUs; stop early if the CUDA paths are broken)"
smoke=0
[ "${NIGHTLY_SMOKE:-1}" = 1 ] && { python3 -m pytest -q -p no:cacheprovider --tb=short tests/test_cuda.py \
  > "$ART/smoke.log" 2>&1 || smoke=$?; }
# The DDP gate's CUDA controls judge the gate itself: reported, and the pipeline still runs.
[ "${NIGHTLY_DDP_CUDA:-1}" = 1 ] && [ -f tests/test_ddp_gate_cuda.py ] && { python3 -m pytest -q -s -p no:cacheprovider --tb=short \
  tests/test_ddp_gate_cuda.py > "$ART/ddp-gate-cuda.log" 2>&1 || fail "DDP gate CUDA tests (ddp-gate-cuda.log)"; }
tail -3 "$ART/smoke.log" "$ART/ddp-gate-cuda.log" 2>/dev/null | tee "$ART/smoke.txt"
[ "$smoke" -eq 0 ] || { fail "CUDA smoke tests (smoke.log)"; exit 1; }

step "profile $PROFILE, world $WORLD for both launchers"
python3 -m pipeline.config set "profile=$PROFILE" "launchers.thread.world=$WORLD" "launchers.proc.world=$WORLD" || exit 2

# The rest of the suite needs no GPU: it runs on the runner's spare cores beside the GPU pipeline
# (DDP tests serially in their xdist group), so the nightly waits for the slower of the two.
step "tests in the background (CPU only)"
tests_pid=""
if [ "${NIGHTLY_TESTS:-1}" = 1 ]; then
  CUDA_VISIBLE_DEVICES="" python3 -m pytest -n "${NIGHTLY_TEST_WORKERS:-8}" --dist loadgroup -q -p no:cacheprovider \
    --ignore=tests/test_cuda.py --ignore=tests/test_ddp_gate_cuda.py > "$ART/tests.log" 2>&1 &
  tests_pid=$!
fi

step "dvc repro tokenizer (the determinism probe trains on its tokens)"
$DVC repro tokenizer 2>&1 | tail -2

# Determinism probe: a second fresh single-device run on the last GPU while train_single runs on
# cuda:0 (bitwise equal on two GPUs of one model is also what a golden from another machine needs).
step "train_single, and the determinism probe beside it on cuda:$((NGPU - 1))"
( CUDA_VISIBLE_DEVICES=$((NGPU - 1)) python3 -m pipeline.train single --run-dir runs/rerun \
    && python3 -m pipeline.export runs/rerun exports/rerun --dtype "$(python3 -m pipeline.config get export.dtype)" \
       --name "$(python3 -m pipeline.config get export.pinned_model)-fresh" ) \
  > "$ART/rerun.log" 2>&1 &
probe_pid=$!
{ time $DVC repro train_single; } 2>&1 | grep -vE "^\[(single|thread|proc) w" | tail -4
wait $probe_pid || fail "determinism probe (see rerun.log)"

step "dvc repro (the rest)"
{ time $DVC repro; } 2>&1 | tee "$ART/repro.log" | grep -vE "^\[(single|thread|proc) w" || true
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "dvc repro"

step "gates"
python3 -m gates check --html "$ART/gates.html" --junit "$ART/gates-junit.xml" --markdown "$ART/gates.md" \
  2>&1 | tee "$ART/gates.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "gates"

step "determinism probe: the two fresh runs compared"
python3 - <<'PYEOF' | tee "$ART/determinism.txt"
import json
a = json.load(open("exports/fresh/manifest.json"))["files"]
b = json.load(open("exports/rerun/manifest.json"))["files"]
la = json.load(open("runs/single/metrics.json"))["train_loss"]
lb = json.load(open("runs/rerun/metrics.json"))["train_loss"]
diff = [i for i, (x, y) in enumerate(zip(la, lb)) if x != y]
same = all(a[k]["md5"] == b[k]["md5"] for k in a)
print(f"two fresh runs (cuda:0, cuda:last): export md5 {'IDENTICAL' if same else 'DIFFERENT'} "
      f"(model.safetensors {a['model.safetensors']['md5']} vs {b['model.safetensors']['md5']}); "
      f"losses: {len(diff)} of {len(la)} steps differ")
PYEOF

if [ -n "$tests_pid" ]; then
  step "tests: waiting for the background suite"
  wait "$tests_pid" || fail "tests (tests.log)"
  tail -15 "$ART/tests.log" | tee "$ART/tests.txt"
fi

if [ "$BENCH" = 1 ] && [ "$NGPU" -ge 1 ]; then
  step "benchmark: harness vs plain PyTorch, reference and large configs"
  # shellcheck disable=SC2086  # NIGHTLY_BENCH_ARGS is a list of arguments
  python3 -m pipeline.bench --device cuda ${NIGHTLY_BENCH_ARGS:---configs ref large --compile none reduce-overhead --profile --warmup 5 --window 10 --windows 5} \
    --json "$ART/bench.json" 2>&1 | tee "$ART/bench.txt"
fi

step "collect artifacts"
cp -r reports bench "$ART"/ 2>/dev/null
for r in single thread proc; do mkdir -p "$ART/runs/$r" && cp runs/$r/metrics.json runs/$r/summary.json "$ART/runs/$r/" 2>/dev/null; done
$DVC plots show -o "$ART/plots" > /dev/null 2>&1 || true
echo "nightly: exit $status"
exit $status
