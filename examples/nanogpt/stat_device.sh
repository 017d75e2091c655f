#!/bin/bash
# The statistical tier's campaign on one H200 host (docs/statistical-tier.md), one command:
# 1. CUDA: nanoGPT's model.py with train.py's arithmetic (stat_loop.py), bf16 autocast, fused AdamW,
#    dropout inside SDPA's kernel; DDP at world 2 on the one GPU (NCCL if it takes two ranks on one
#    device, else gloo), then a quiet cost run (one single and one DDP run at a time);
# 2. CPU (gloo) on the host's 16 cores: stat_loop.py (SHOWCASE=1: the showcase trainer itself,
#    stat_showcase.py: examples/nanogpt/train.py run by python and torchrun);
# 3. the judge's table for each. Usage (repository root): OUT=/some/dir examples/nanogpt/stat_device.sh
set -u
OUT=${OUT:-/tmp/stat-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
if ! python3 -c 'import jsonschema' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site
fi
C=examples/nanogpt/stat_campaign.py
{ date -u; git log --oneline -1; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0), torch.cuda.nccl.version())'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
s=$SECONDS
B=nccl
timeout 50 python3 $C run --device cuda --backend nccl --pool 1 --nulls 1 --mistakes --steps 4 \
  --records /tmp/smoke.json --port 29651 --result-timeout 40 && python3 -c \
  'import json,sys; d=json.load(open("/tmp/smoke.json")); print(d["meta"]["errors"]); sys.exit(1 if d["meta"]["errors"] else 0)' || B=gloo
echo "cuda backend: $B at $((SECONDS - s)) s"
timeout 150 python3 $C run --device cuda --backend $B --pairs 4 --singles 2 --pool 24 --nulls 100 --per-mistake 20 --deadline 140 \
  --records "$OUT/records-cuda.json" --port 29671
merge='import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); a["records"]+=b["records"]; json.dump(a,open(sys.argv[3],"w"))'
timeout 40 python3 $C run --device cuda --backend $B --pool 4 --nulls 0 --mistakes --records /tmp/cs.json --port 29691
timeout 40 python3 $C run --device cuda --backend $B --pool 0 --nulls 4 --mistakes --records /tmp/cd.json --port 29693
python3 -c "$merge" /tmp/cs.json /tmp/cd.json "$OUT/cost-cuda.json"
echo "cuda done at $((SECONDS - s)) s"
timeout 30 python3 $C run --device cpu --pool 4 --nulls 0 --mistakes --records /tmp/ps.json --port 29695
timeout 30 python3 $C run --device cpu --pool 0 --nulls 4 --mistakes --records /tmp/pd.json --port 29697
python3 -c "$merge" /tmp/ps.json /tmp/pd.json "$OUT/cost-cpu.json"
if [ "${SHOWCASE:-0}" = 1 ]; then
timeout 190 python3 examples/nanogpt/stat_showcase.py --pool 24 --nulls 100 --per-mistake 20 --workers 10 --deadline 180 \
  --records "$OUT/records-host-cpu.json"
else
timeout 110 python3 $C run --device cpu --pairs 6 --singles 3 --pool 24 --nulls 100 --per-mistake 20 --deadline 100 \
  --records "$OUT/records-host-cpu.json" --port 29711
fi
echo "cpu campaign done at $((SECONDS - s)) s"
python3 $C judge "$OUT/records-cuda.json" --k 2 3 4 --cost "$OUT/cost-cuda.json" --out "$OUT/summary-cuda.json"
python3 $C judge "$OUT/records-host-cpu.json" --k 2 3 4 --out "$OUT/summary-host-cpu.json"
python3 -c 'import json; d=json.load(open("'"$OUT"'/cost-cpu.json")); print("cpu cost records", len(d["records"]), d["meta"]["errors"])'
python3 $C judge "$OUT/cost-cpu.json" --k 3 --perms 0 | tail -2
