#!/bin/bash
# The statistical tier's campaign on one H200 host (docs/statistical-tier.md): the CPU campaign (gloo,
# on the host's 16 cores) and the CUDA campaign (bf16 autocast, fused AdamW, dropout inside SDPA's
# kernel; NCCL where two ranks may share the one GPU, else gloo), each with a quiet cost run.
# Usage (repository root): OUT=/some/dir examples/nanogpt/stat_device.sh
set -u
OUT=${OUT:-/tmp/stat-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
if ! python3 -c 'import jsonschema' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site
fi
C=examples/nanogpt/stat_campaign.py
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0), torch.cuda.nccl.version())'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
s=$SECONDS
timeout 220 python3 $C run --device cpu --pairs 6 --singles 3 --pool 40 --nulls 200 --per-mistake 20 \
  --records "$OUT/records-cpu.json" --port 29611
timeout 60 python3 $C run --device cpu --pairs 1 --singles 1 --pool 5 --nulls 5 --mistakes \
  --records "$OUT/cost-cpu.json" --port 29631
echo "cpu done at $((SECONDS - s)) s"
B=nccl
timeout 90 python3 $C run --device cuda --backend nccl --pool 1 --nulls 1 --mistakes --steps 4 \
  --records /tmp/smoke.json --port 29651 --result-timeout 60 && python3 -c \
  'import json,sys; sys.exit(1 if json.load(open("/tmp/smoke.json"))["meta"]["errors"] else 0)' || B=gloo
echo "cuda backend: $B"
timeout 200 python3 $C run --device cuda --backend $B --pairs 4 --singles 2 --pool 24 --nulls 100 --per-mistake 20 \
  --records "$OUT/records-cuda.json" --port 29671
timeout 60 python3 $C run --device cuda --backend $B --pairs 1 --singles 1 --pool 5 --nulls 5 --mistakes \
  --records "$OUT/cost-cuda.json" --port 29691
echo "cuda done at $((SECONDS - s)) s"
for d in cpu cuda; do
  python3 $C judge "$OUT/records-$d.json" --k 2 3 4 --cost "$OUT/cost-$d.json" --out "$OUT/summary-$d.json"
done
