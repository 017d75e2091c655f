"""The statistical tier's campaign over the showcase trainer itself: examples/nanogpt/train.py as
recorded, run as a user runs it (`python train.py config/showcase_cpu.py --dropout=0.1`, and under
`torchrun --standalone --nproc_per_node 2`), with dropout 0.1 inside SDPA.

Each run is a scratch copy (mistakes.scratch_copy: the DDP side with the mistake planted) with the
statistical tier's lines patched in (STAT below: `dropout='replicas'` and `rec.reseed(k)` with k from
the REPLICA environment variable), plus, until the recorder accepts rank-0-only evals and evals at
nanoGPT's own steps (issue #54 item 3, helper "meet"), two lines that emulate it (a 0.0 eval on the
other ranks, nanoGPT's eval after its last step). Writes the records stat_campaign.py `judge` reads.

    python3 examples/nanogpt/stat_showcase.py --pool 24 --nulls 100 --per-mistake 20 --workers 14 \
        --records OUT/records-showcase-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import mistakes  # noqa: E402  (the showcase's catalogue)
from stat_campaign import save, slim  # noqa: E402

RECORDER = "model=model, run_dir='runs/proc' if ddp else 'runs/single') # runrecord"
STAT = (
    (RECORDER, RECORDER.replace("model=model, ", "model=model, dropout='replicas', ") + " stat tier"),
    (
        "running_mfu = -1.0",
        "rec.reseed(int(os.environ.get('REPLICA', '0'))) # runrecord: stat tier\nrunning_mfu = -1.0",
    ),
    (
        "    if iter_num % eval_interval == 0 and master_process:",
        "    if iter_num % eval_interval == 0 and not master_process: rec.eval(iter_num, 0.0) # emulates meet\n"
        "    if iter_num % eval_interval == 0 and master_process:",
    ),
    (
        "rec.finish() # runrecord",
        "if rec.eval_due(iter_num): rec.eval(iter_num, estimate_loss()['val'].item() if master_process else 0.0)"
        " # emulates meet\nrec.finish() # runrecord",
    ),
)


def source(mistake: str) -> str:
    """train.py with the mistake (by name; 'none': as recorded) and the statistical tier's lines."""
    m = next((x for x in mistakes.MISTAKES if x.name == mistake), None)
    text = mistakes.patched(m) if m else mistakes.TRAIN.read_text()
    return mistakes.patched(mistakes.Mistake("stat", STAT, None, ""), text)


def one(job: dict[str, Any], root: Path, args: argparse.Namespace) -> dict[str, Any]:
    folder = root / f"{job['kind']}-{job['mistake']}-{job['replica']}"
    mistakes.scratch_copy(None, folder)
    (folder / "train.py").write_text(source(job["mistake"]))
    if not (folder / "data").exists():
        (folder / "data").symlink_to(root / "data")
    argv = ["train.py", "config/showcase_cpu.py", f"--dropout={args.dropout}", f"--device={args.device}"]
    if args.device == "cuda":
        argv += ["--dtype=bfloat16", f"--backend={args.backend}"]
    if job["kind"] == "ddp":
        argv = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *argv]
    env = {**os.environ, "REPLICA": str(job["replica"]), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )
    wall = time.perf_counter() - t0
    if done.returncode:
        return {"error": f"{job}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    run = "proc" if job["kind"] == "ddp" else "single"
    record = json.loads((folder / "runs" / run / "metrics.json").read_text())
    return slim(record, job, wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=int, default=24)
    ap.add_argument("--nulls", type=int, default=100)
    ap.add_argument("--per-mistake", type=int, default=20)
    ap.add_argument("--mistakes", nargs="*")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", default="gloo")
    ap.add_argument(
        "--deadline", type=float, default=0.0, help="stop after this many seconds, keep the records"
    )
    ap.add_argument("--records", required=True)
    args = ap.parse_args()
    names = [m.name for m in mistakes.MISTAKES] if args.mistakes is None else args.mistakes
    jobs = [{"kind": "single", "mistake": "none", "replica": k} for k in range(args.pool)]
    jobs += [{"kind": "ddp", "mistake": "none", "replica": k} for k in range(args.nulls)]
    jobs += [{"kind": "ddp", "mistake": m, "replica": k} for m in names for k in range(args.per_mistake)]
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="stat-showcase-") as tmp:
        data = Path(tmp) / "data" / "showcase_char"
        subprocess.run(
            [sys.executable, str(HERE / "prepare.py"), "--out", str(data)], check=True, capture_output=True
        )
        meta = {
            "device": args.device,
            "backend": args.backend,
            "trainer": "examples/nanogpt/train.py (showcase)",
        }
        meta.update(workers=args.workers, host_cpus=os.cpu_count())
        pool = ThreadPoolExecutor(args.workers)
        futures = [pool.submit(one, j, Path(tmp), args) for j in jobs]
        out: list[dict[str, Any]] = []
        try:
            for f in as_completed(futures, timeout=args.deadline or None):
                out.append(f.result())
                if len(out) % 10 == 0:
                    save(args.records, {**meta, "wall_s": time.time() - t0}, out)
        except TimeoutError:
            out.append({"error": f"stopped at the deadline: {len(jobs) - len(out)} runs not done"})
        save(args.records, {**meta, "wall_s": time.time() - t0}, out)
        errors = [r["error"] for r in out if "error" in r]
        print(
            f"{len(out) - len(errors)} records, {len(errors)} errors, {time.time() - t0:.0f} s -> {args.records}"
        )
        for e in errors[:3]:
            print("error:", e, file=sys.stderr)
        sys.stdout.flush()
        if errors and errors[-1].startswith("stopped"):
            os._exit(0)  # runs still going: leave them, the records are saved
        pool.shutdown()


if __name__ == "__main__":
    main()
