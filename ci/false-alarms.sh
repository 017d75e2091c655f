#!/usr/bin/env bash
# False alarms of the default profile (issue #33, docs/profiles.md): RUNS forced runs of the whole
# pipeline in a scratch clone whose registry holds no golden of this machine, so fresh_train is judged
# in the approximate tier against another environment's golden, with one core spinning (a busy CI
# box). A false alarm is any gate that is not pass or skip on unchanged code.
#
#   ci/false-alarms.sh [RUNS] [WORK]     # default: 10 runs in /tmp/xtrain-false-alarms
#
# Prints one line per run and a table of verdict counts; exit 1 if any run had a fail, error or
# inconclusive gate. Each run's reports/gates.json is kept under WORK/reports/.
set -euo pipefail
RUNS="${1:-10}"
WORK="${2:-/tmp/xtrain-false-alarms}"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
PY="$(cat "$SRC/.xtrain/python" 2>/dev/null || command -v python3)"
export DVC_NO_ANALYTICS=1

[ -e "$WORK" ] && { echo "false-alarms: $WORK exists; remove it or name another folder" >&2; exit 2; }
git clone -q "$SRC" "$WORK/tree"
cd "$WORK/tree"
mkdir -p "$WORK/reports"
"$PY" -m dvc repro -q env
env_id="$("$PY" -c 'import json; print(json.load(open("runs/env.json"))["single_env_id"])')"
if [ -d "registry/goldens/$env_id" ]; then  # this machine without its golden: a new machine
  git rm -rq "registry/goldens/$env_id"
  rm registry/index.json && "$PY" -m registry index > /dev/null
  git commit -qam "false-alarms: no golden for $env_id"
fi
echo "false-alarms: $RUNS runs, environment $env_id (no golden of its own), one core spinning"

yes > /dev/null &
spinner=$!
trap 'kill $spinner 2>/dev/null' EXIT
for i in $(seq 1 "$RUNS"); do
  start=$SECONDS
  "$PY" -m dvc repro -f -q > "$WORK/reports/repro-$i.log" 2>&1 || { echo "run $i: dvc repro failed (see $WORK/reports/repro-$i.log)"; exit 2; }
  rc=0
  "$PY" -m gates check > "$WORK/reports/check-$i.txt" 2>&1 || rc=$?
  cp reports/gates.json "$WORK/reports/gates-$i.json"
  "$PY" - "$WORK/reports/gates-$i.json" "$i" "$rc" "$((SECONDS - start))" <<'EOF'
import collections, json, sys
report, run, rc, secs = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4]
counts = collections.Counter(g["status"] for g in report["gates"])
bad = [f'{g["id"]}: {g["status"]}' for g in report["gates"] if g["status"] not in ("pass", "skip")]
tier = next((g["message"][:70] for g in report["gates"] if g["id"] == "fresh_train"), "-")
print(f"run {run}: exit {rc}, {secs} s, {dict(counts)}; fresh_train: {tier}" + (f"; NOT PASS: {bad}" if bad else ""))
EOF
done
"$PY" - "$WORK/reports" <<'EOF'
import collections, json, pathlib, sys
reports = sorted(pathlib.Path(sys.argv[1]).glob("gates-*.json"))
table = collections.Counter(g["status"] for r in reports for g in json.loads(r.read_text())["gates"])
print(f"{len(reports)} runs: " + ", ".join(f"{s} {table[s]}" for s in ("pass", "skip", "inconclusive", "fail", "error")))
sys.exit(1 if table["inconclusive"] or table["fail"] or table["error"] else 0)
EOF
