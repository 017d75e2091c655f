#!/usr/bin/env bash
# Is data parallelism at world 2 systematically worse than one device at the same global batch?
# Trains `single` and `thread --world 2` for each seed with the active profile (the GPU nightly's:
# python3 -m pipeline.config set profile=gpu), then prints the final validation losses side by side.
#
#   SEEDS="1 2 3" ci/world2-offset.sh        # run folders under runs/offset/, table on stdout
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS="${SEEDS:-1 2 3}"
for s in $SEEDS; do
  for launcher in single thread; do
    python3 -m pipeline.train "$launcher" --run-dir "runs/offset/$launcher-$s" --set "seed=$s" \
      > "runs/offset-$launcher-$s.log" 2>&1 || { echo "error: $launcher seed $s failed: runs/offset-$launcher-$s.log" >&2; exit 1; }
  done
done
SEEDS="$SEEDS" python3 - <<'PYEOF'
import json, os, statistics
rows = []
for s in os.environ["SEEDS"].split():
    m = {k: json.load(open(f"runs/offset/{k}-{s}/metrics.json")) for k in ("single", "thread")}
    d = m["thread"]["final_val_loss"] - m["single"]["final_val_loss"]
    tail = [t - u for t, u in zip(m["thread"]["train_loss"][-50:], m["single"]["train_loss"][-50:])]
    rows.append((s, m["single"]["final_val_loss"], m["thread"]["final_val_loss"], d, statistics.mean(tail)))
print("| seed | single final val | world 2 final val | world 2 - single | mean train-loss gap, last 50 steps |")
print("|---|---|---|---|---|")
for s, a, b, d, t in rows:
    print(f"| {s} | {a:.4f} | {b:.4f} | {d:+.4f} | {t:+.4f} |")
ds = [r[3] for r in rows]
print(f"mean difference {statistics.mean(ds):+.4f}, {sum(d > 0 for d in ds)} of {len(ds)} seeds worse at world 2")
PYEOF
