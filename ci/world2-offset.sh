#!/usr/bin/env bash
# Is data parallelism at world 2 systematically worse than one device at the same global batch?
# For each seed trains `single`, `single` with grad_accum 2 (the same global batch reordered, no DDP)
# and `thread --world 2`, with the active profile (the GPU nightly's: profile=gpu), then prints the
# final validation losses side by side. A bias shows as the same sign in every seed for world 2 but
# not for grad_accum 2 (docs/ddp-gate.md). With 2+ GPUs all runs share the GPUs at once.
#
#   SEEDS="1 2 3" ci/world2-offset.sh        # run folders under runs/offset/, table on stdout
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS="${SEEDS:-1 2 3}"
NGPU=$(python3 -c "import torch; print(torch.cuda.device_count())")
mkdir -p runs/offset
train() {  # name seed gpu [--set ...]: one run, its log beside it
  local name=$1 seed=$2 gpu=$3; shift 3
  local launcher=single; [ "$name" = world2 ] && launcher=thread
  CUDA_VISIBLE_DEVICES=$gpu python3 -m pipeline.train "$launcher" --run-dir "runs/offset/$name-$seed" \
    --set "seed=$seed" "$@" > "runs/offset/$name-$seed.log" 2>&1 \
    || { echo "error: $name seed $seed failed: runs/offset/$name-$seed.log" >&2; return 1; }
}
all=$(seq -s, 0 $(( NGPU > 0 ? NGPU - 1 : 0 )))
if [ "$NGPU" -ge 2 ]; then
  # On GPUs every run of every seed at once: the numbers are deterministic whatever runs beside
  # them, and eager runs leave most of an H200 idle (the time, not the result, depends on sharing).
  pids=()
  for s in $SEEDS; do
    train single "$s" 0 & pids+=($!)
    train accum2 "$s" 1 --set train.grad_accum=2 & pids+=($!)
    train world2 "$s" "$all" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
else
  for s in $SEEDS; do
    train single "$s" "$all" && train accum2 "$s" "$all" --set train.grad_accum=2 && train world2 "$s" "$all"
  done
fi
SEEDS="$SEEDS" python3 - <<'PYEOF'
import json, os, statistics
names = ("single", "accum2", "world2")
rows = []
for s in os.environ["SEEDS"].split():
    m = {k: json.load(open(f"runs/offset/{k}-{s}/metrics.json")) for k in names}
    val = {k: m[k]["final_val_loss"] for k in names}
    tail = statistics.mean(t - u for t, u in zip(m["world2"]["train_loss"][-50:], m["single"]["train_loss"][-50:]))
    rows.append((s, val["single"], val["world2"] - val["single"], val["accum2"] - val["single"], tail))
print("| seed | single final val | world 2 - single | grad_accum 2 - single | world 2 - single, mean train loss last 50 steps |")
print("|---|---|---|---|---|")
for s, a, d, g, t in rows:
    print(f"| {s} | {a:.4f} | {d:+.4f} | {g:+.4f} | {t:+.4f} |")
for col, name in ((2, "world 2"), (3, "grad_accum 2")):
    ds = [r[col] for r in rows]
    print(f"{name}: mean {statistics.mean(ds):+.4f}, {sum(d > 0 for d in ds)} of {len(ds)} seeds higher than single")
PYEOF
