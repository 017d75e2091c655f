"""The statistical tier's campaign: alpha calibrated on correct DDP runs, each classic DDP mistake's
catch rate, the tier's cost; nanoGPT's model with dropout inside SDPA (docs/statistical-tier.md).

    python3 examples/nanogpt/stat_campaign.py run --device cpu --pairs 1 --singles 1 --pool 24 \
        --nulls 100 --per-mistake 20 --records OUT/records-cpu.json
    python3 examples/nanogpt/stat_campaign.py judge OUT/records-cpu.json --k 2 3 4 --out OUT/summary-cpu.json

`run` trains: `--pool` single-device replicas (k = 0..pool-1), `--nulls` correct DDP runs at world 2
and `--per-mistake` DDP runs of each mistake, on `--singles` one-process workers and `--pairs` two-rank
groups (gloo on CPU; on CUDA the backend named, both ranks on the one GPU). `judge` judges every DDP
run with gates/judges/replicas.py against K replicas drawn from the pool (a seeded draw per run), and
the leave-one-out nulls (each replica judged as the run against K others), and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(HERE)]

KEEP = [
    "launcher",
    "world",
    "device",
    "precision",
    "config_hash",
    "steps",
    "train_loss",
    "grad_norm",
    "lr",
    "eval",
    "samples",
    "dropout",
    "replica",
    "cross_rank",
    "train_time_s",
    "wall_s",
]


def slim(record: dict[str, Any], job: dict[str, Any], wall: float) -> dict[str, Any]:
    out = {k: record[k] for k in KEEP}
    out["job"] = {k: job[k] for k in ("kind", "mistake", "replica")}
    out["job"]["run_wall_s"] = wall
    return out


def _quiet() -> None:
    import torch

    torch.set_num_threads(1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- nanoGPT's model prints its size


def _one(job: dict[str, Any], tmp: str) -> dict[str, Any] | None:
    import stat_loop

    t0 = time.perf_counter()
    job = {**job, "run_dir": f"{tmp}/{job['kind']}-{job['mistake']}-{job['replica']}"}
    record = stat_loop.train(job)
    return None if record is None else slim(record, job, time.perf_counter() - t0)


def single_worker(jobs: Any, results: Any, tmp: str) -> None:
    _quiet()
    while (job := jobs.get()) is not None:
        try:
            results.put(_one(job, tmp))
        except Exception as e:  # a broken run is a result too: the campaign says so
            results.put({"error": f"{job}: {e}"})


def pair_worker(rank: int, port: int, backend: str, jobs: Any, results: Any, tmp: str) -> None:
    import torch
    import torch.distributed as dist

    _quiet()
    if torch.cuda.is_available():
        torch.cuda.set_device(0)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    while True:
        box = [jobs.get() if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        if box[0] is None:
            break
        try:
            out = _one(box[0], tmp)
        except Exception as e:
            out = {"error": f"{box[0]}: rank {rank}: {e}"}
        if rank == 0 or (out and "error" in out):
            results.put(out)
    dist.destroy_process_group()


def save(path: str, meta: dict[str, Any], out: list[Any]) -> None:
    """The records so far (rewritten every few runs: a campaign cut short by its time limit keeps them)."""
    errors = [r["error"] for r in out if r and "error" in r]
    data = {
        "meta": {**meta, "errors": errors[:5], "n_errors": len(errors)},
        "records": [r for r in out if r and "error" not in r],
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path + ".tmp").write_text(json.dumps(data))
    os.replace(path + ".tmp", path)


def _collect(results: Any, n: int, args: argparse.Namespace, meta: dict[str, Any]) -> list[Any]:
    import queue

    out: list[Any] = []
    deadline = time.time() + args.deadline if args.deadline else None
    for _ in range(n):
        wait = args.result_timeout if deadline is None else min(args.result_timeout, deadline - time.time())
        try:
            out.append(results.get(timeout=max(wait, 0.1)))
        except queue.Empty:
            out.append({"error": f"stopped: no result within {wait:.0f} s ({n - len(out)} runs not done)"})
            break
        if len(out) % 10 == 0:
            save(args.records, meta, out)
    return out


def jobs_of(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from stat_loop import MISTAKES

    base = {"seed": args.seed, "dropout": args.dropout, "device": args.device}
    if args.steps:
        base["train"] = {"steps": args.steps, "eval_every": max(1, args.steps // 4)}
    singles = [{**base, "kind": "single", "mistake": "none", "replica": k} for k in range(args.pool)]
    ddp = [{**base, "kind": "ddp", "mistake": "none", "replica": k} for k in range(args.nulls)]
    for m in MISTAKES[1:] if args.mistakes is None else args.mistakes:
        ddp += [{**base, "kind": "ddp", "mistake": m, "replica": k} for k in range(args.per_mistake)]
    return singles, ddp


def run(args: argparse.Namespace) -> None:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    singles, ddp = jobs_of(args)
    sq, dq, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    for j in singles:
        sq.put(j)
    for j in ddp:
        dq.put(j)
    procs = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="stat-campaign-") as tmp:
        for _ in range(args.singles):
            sq.put(None)
            procs.append(ctx.Process(target=single_worker, args=(sq, results, tmp)))
        for p in range(args.pairs):
            dq.put(None)
            for rank in (0, 1):
                procs.append(
                    ctx.Process(
                        target=pair_worker, args=(rank, args.port + p, args.backend, dq, results, tmp)
                    )
                )
        for p in procs:
            p.start()
        meta = {"device": args.device, "backend": args.backend, "singles": args.singles, "pairs": args.pairs}
        meta["host_cpus"] = os.cpu_count()
        out = _collect(results, len(singles) + len(ddp), args, meta)
        stopped = any(r and r.get("error", "").startswith("stopped") for r in out)
        for p in procs:
            p.join(timeout=1 if stopped else 10)
            if p.is_alive():
                p.terminate()  # a rank stuck in a collective after its peer failed
    meta["wall_s"] = time.time() - t0
    save(args.records, meta, out)
    data = json.loads(Path(args.records).read_text())
    errors = [r["error"] for r in out if r and "error" in r]
    print(f"{len(data['records'])} records, {len(errors)} errors, {meta['wall_s']:.0f} s -> {args.records}")
    for e in errors[:3]:
        print("error:", e, file=sys.stderr)


def _name(r: dict[str, Any]) -> str:
    j = r["job"]
    return (
        f"runs/single-r{j['replica']}"
        if j["kind"] == "single"
        else f"runs/proc ({j['mistake']} #{j['replica']})"
    )


def first_step_rtol(device: str) -> float:
    """val@0's bound: params.yaml gates.loss_match.<device>.first_step_rtol, as the exact tier's."""
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    return float(params["gates"]["loss_match"][device]["first_step_rtol"])


def judge_all(records: list[dict[str, Any]], k: int, seed: int, alpha: float, perms: int) -> dict[str, Any]:
    """Every DDP run against a seeded draw of K replicas from the pool; `perms` replica-label
    permutations (K + 1 replicas drawn, one judged as the run against the other K)."""
    from gates.judges.replicas import StatTier, judge_replicas

    pool = [r for r in records if r["job"]["kind"] == "single"]
    tier = StatTier(alpha=alpha, min_replicas=2, first_step_rtol=first_step_rtol(pool[0]["device"]))
    rng = random.Random(seed * 7919 + k)
    trials = [
        (f"ddp: {r['job']['mistake']}", r, rng.sample(pool, k)) for r in records if r["job"]["kind"] == "ddp"
    ]
    for _ in range(perms if len(pool) > k else 0):
        drawn = rng.sample(pool, k + 1)
        trials.append(("null: replica permutation", drawn[0], drawn[1:]))
    rows: dict[str, list[str]] = {}
    by: dict[str, dict[str, int]] = {}
    examples: dict[str, str] = {}
    for case, run, chosen in sorted(trials, key=lambda t: t[0] != "ddp: none"):
        o = judge_replicas([(_name(x), x) for x in chosen], (_name(run), run), tier)
        rows.setdefault(case, []).append(o.status)
        if o.status == "fail":
            for what in caught_by(o.message):
                by.setdefault(case, {}).setdefault(what, 0)
                by[case][what] += 1
        if o.status != "pass" or case not in examples:
            examples[case] = o.message
    return {"k": k, "alpha": alpha, "statuses": rows, "caught_by": by, "examples": examples}


EXACT = ("replicas:", "samples:", "lr:", "val@0:", "cross-rank:", "non-finite:")
TESTS = ("train_loss level", "train_loss roughness", "grad_norm level", "grad_norm roughness", "eval level")


def caught_by(message: str) -> list[str]:
    """The checks a failing verdict names: exact ones before the distributions' part, then the tests."""
    head, _, tail = message.partition("outside the replicas' spread:")
    return [e.rstrip(":") for e in EXACT if e in head] + [t for t in TESTS if t in tail]


def cost(records: list[dict[str, Any]]) -> dict[str, float]:
    def med(kind: str) -> float:
        walls = [
            r["job"]["run_wall_s"]
            for r in records
            if r["job"]["kind"] == kind and r["job"]["mistake"] == "none"
        ]
        return statistics.median(walls) if walls else float("nan")

    return {"single_s": med("single"), "ddp_s": med("ddp")}


def judge(args: argparse.Namespace) -> None:
    data = json.loads(Path(args.records).read_text())
    records, meta = data["records"], data["meta"]
    quiet = json.loads(Path(args.cost).read_text())["records"] if args.cost else records
    c = cost(quiet)
    results = [judge_all(records, k, args.seed, args.alpha, args.perms) for k in args.k]
    header = f"{'case':34} {'runs':>4} " + " ".join(f"{'K=' + str(r['k']):>16}" for r in results)
    print(
        f"statistical tier campaign, {meta['device']} ({meta['backend']}), alpha {args.alpha:g}, host cpus {meta['host_cpus']}"
    )
    print(header)
    for case in results[0]["statuses"]:
        n = len(results[0]["statuses"][case])
        cells = []
        for r in results:
            st = r["statuses"][case]
            bad = sum(s != "pass" for s in st)
            cells.append(
                f"{bad:>3}/{n} {'alarm' if case.startswith('null') or case.endswith('none') else 'caught'}"
            )
        print(f"{case:34} {n:>4} " + " ".join(f"{x:>16}" for x in cells))
    for r in results:
        for case, counts in r["caught_by"].items():
            print(f"  K={r['k']} {case}: " + ", ".join(f"{w} {n}" for w, n in sorted(counts.items())))
    exact = c["single_s"] + c["ddp_s"]
    print(
        f"cost: single run {c['single_s']:.2f} s, DDP run {c['ddp_s']:.2f} s (median wall); exact tier {exact:.2f} s"
    )
    for r in results:
        tier = r["k"] * c["single_s"] + c["ddp_s"]
        print(f"  K={r['k']}: {tier:.2f} s = {tier / exact:.2f} x the exact tier")
    out = {"meta": meta, "cost": c, "alpha": args.alpha, "results": results}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--device", default="cpu")
    r.add_argument("--backend", default="gloo")
    r.add_argument("--pool", type=int, default=24)
    r.add_argument("--nulls", type=int, default=100)
    r.add_argument("--per-mistake", type=int, default=20)
    r.add_argument("--singles", type=int, default=1)
    r.add_argument("--pairs", type=int, default=1)
    r.add_argument("--port", type=int, default=29611)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--dropout", type=float, default=0.1)
    r.add_argument("--steps", type=int, default=0, help="train.steps (0: stat_loop's 40)")
    r.add_argument("--mistakes", nargs="*", help="the mistakes to plant (default: all)")
    r.add_argument("--result-timeout", type=float, default=180.0)
    r.add_argument("--deadline", type=float, default=0.0, help="stop collecting after this many seconds")
    r.add_argument("--records", required=True)
    j = sub.add_parser("judge")
    j.add_argument("records")
    j.add_argument("--k", type=int, nargs="+", default=[2, 3, 4])
    j.add_argument("--alpha", type=float, default=0.01)
    j.add_argument("--seed", type=int, default=0)
    j.add_argument("--perms", type=int, default=1000, help="replica-label permutations (null draws)")
    j.add_argument("--cost", help="records of a quiet run (one single, one DDP at a time) for the cost")
    j.add_argument("--out")
    args = ap.parse_args()
    run(args) if args.cmd == "run" else judge(args)


if __name__ == "__main__":
    main()
