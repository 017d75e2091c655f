"""The busy-runner campaign (issue 52 item 4): README's main job, or the scaling stage alone, N times beside busy cores.

python -m pipeline.busy_scaling --runs 10 --busy 4                       # ci/main.sh, cold run cache each run
python -m pipeline.busy_scaling --runs 5 --busy 0 --fault slow_proc:1.5   # the planted slowdown: scaling + its gate

A scratch clone of this checkout's HEAD (--tree, made once, reset to HEAD at every campaign) with its
own virtualenv (XTRAIN_VENV=1: the campaign never re-points the machine's installed xtrain-gates).
Per run, with --busy spinning processes (`python3 -c "while True: pass"`, each in its own session as
another job on a shared runner would be; --sessions shared starts them in this one) beside it:
- without --fault: `git clean` (every output, DVC's cache), the default DVC remote pointed at a new
  empty folder (a cold run cache), then `ci/main.sh --report reports/campaign-gates.json`;
- with --fault F (`slow_proc:1.5`, `slow_thread`: xtrain/core/failpoints.py): the stages upstream of
  scaling once, then per run `dvc repro -s -f scaling` under XTRAIN_FAULT=F@*:0 and
  `python -m gates check --only scaling`.
Each run is logged into --out (default docs/data/busy-scaling-<date>-busy<K>[-<fault>]/): run-NN.json (load
before and after, seconds, exit code, the scaling verdict and its message: the contention it named),
run-NN-scaling.json (the record: every window and its readings), run-NN.log (the job's last lines);
campaign.json and table.md sum it up, and the table is printed. Not a test: it takes minutes per run
and its figures depend on the machine (docs/scaling.md, "Busy runners").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from contracts import outputs
from contracts.errors import report
from contracts.perf_record import others_share
from gates.campaigns.mutate import tree_env

REPO = Path(__file__).resolve().parent.parent
CLONE_MARK = ".busy-scaling-clone"  # what marks --tree as this tool's own clone (reused, reset to HEAD)
KEEP = (CLONE_MARK, ".venv", ".xtrain")  # what `git clean` leaves in the clone between runs
CAMPAIGN = outputs.Kind("busy-scaling campaign", folder=True, marker=True)
FORMAT = "xtrain-busy-scaling/2"
GATES_REPORT = "reports/campaign-gates.json"


def check_tree(tree: Path) -> None:
    """--tree: absent, empty, or this tool's earlier clone; never a folder it did not make."""
    if tree.is_symlink() or (tree.exists() and not tree.is_dir()):
        raise outputs.OutputRefused(tree, "scratch clone", "it is not a folder")
    if escape := outputs.leaves_repository(tree):
        raise outputs.OutputRefused(tree, "scratch clone", escape)
    if tree.is_dir() and any(tree.iterdir()) and not (tree / CLONE_MARK).is_file():
        raise outputs.OutputRefused(
            tree, "scratch clone", f"a folder this tool did not clone (no {CLONE_MARK})"
        )


def git(tree: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True)


def scratch_tree(tree: Path) -> str:
    """A clone of this checkout's HEAD in `tree` (made once), reset to HEAD now; returns the commit."""
    if not (tree / CLONE_MARK).exists():
        subprocess.run(["git", "clone", "-q", str(REPO), str(tree)], check=True)
        (tree / CLONE_MARK).write_text("made by python -m pipeline.busy_scaling\n")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip
    git(tree, "fetch", "-q", str(REPO), head)
    git(tree, "reset", "-q", "--hard", head)
    return head


def cold(tree: Path, remote: Path) -> None:
    """Every output and DVC's own cache gone; the default remote a new empty folder (a cold run cache)."""
    git(tree, "clean", "-q", "-xdff", *[a for k in KEEP for a in ("-e", k)])
    remote.mkdir(parents=True)
    (tree / ".dvc" / "config.local").write_text(
        f"[core]\n    remote = cold\n['remote \"cold\"']\n    url = {remote}\n"
    )


def spin(busy: int, shared: bool) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=not shared)
            for _ in range(busy)]  # fmt: skip


def stop(spinners: list[subprocess.Popen[bytes]]) -> None:
    for p in spinners:
        p.kill()
        p.wait()


def job(tree: Path, fault: str | None, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The measured job: ci/main.sh (no fault), or the scaling stage and its gate under the fault."""
    if not fault:
        return subprocess.run(["ci/main.sh", "--report", GATES_REPORT], cwd=tree, env=env, capture_output=True,
                              text=True)  # fmt: skip
    stage = subprocess.run(["ci/in-env.sh", "dvc", "repro", "-s", "-f", "scaling"], cwd=tree, env=env,
                           capture_output=True, text=True)  # fmt: skip
    if stage.returncode != 0:
        return stage
    gate = ["ci/in-env.sh", "python3", "-m", "gates", "check", "--only", "scaling", "--report", GATES_REPORT]
    done = subprocess.run(gate, cwd=tree, env=env, capture_output=True, text=True)
    return subprocess.CompletedProcess(
        done.args, done.returncode, stage.stdout + done.stdout, stage.stderr + done.stderr
    )


def scaling_verdict(tree: Path) -> dict[str, Any]:
    """The scaling gate's entry of the run's report, and the judged figures of bench/scaling.json."""
    out: dict[str, Any] = {"status": "no report", "message": "", "rounds": None, "rates": {}, "others": None}
    report_path = tree / GATES_REPORT
    if report_path.is_file():
        gates = json.loads(report_path.read_text())["gates"]
        entry = next((g for g in gates if g["id"] == "scaling"), None)
        if entry is not None:
            out.update(status=entry["status"], message=entry["message"])
    record = tree / "bench" / "scaling.json"
    if record.is_file():
        s = json.loads(record.read_text())
        rows = [
            (f"{la} {w}", r)
            for la, by_world in sorted(s["results"].items())
            for w, r in sorted(by_world.items())
        ]
        shares = [others_share(x, s["cpus"]) for _, r in rows for x in r.get("readings", [])]
        out.update(rounds=max(r["rounds"] for _, r in rows), rates={k: r["tokens_per_s"] for k, r in rows},
                   others=statistics.median(shares) if shares else None)  # fmt: skip
    return out


def one_run(tree: Path, i: int, args: argparse.Namespace, out: Path, remotes: Path) -> dict[str, Any]:
    """One job beside the spinners; its record, the scaling record and the log's tail kept in `out`."""
    env = {**tree_env(tree), "XTRAIN_VENV": "1"}
    env.pop("XTRAIN_FAULT", None)
    if args.fault:
        env["XTRAIN_FAULT"] = f"{args.fault}@*:0"
        (tree / GATES_REPORT).unlink(missing_ok=True)
    else:
        cold(tree, remotes / f"remote-{i:02d}")
    spinners = spin(args.busy, args.sessions == "shared")
    try:
        load, t0 = os.getloadavg(), time.monotonic()
        done = job(tree, args.fault, env)
        wall, load_after = time.monotonic() - t0, os.getloadavg()
    finally:
        stop(spinners)
    run = {"run": i, "busy": args.busy, "fault": args.fault, "load": load, "load_after": load_after,
           "wall_s": wall, "exit": done.returncode, **scaling_verdict(tree)}  # fmt: skip
    (out / f"run-{i:02d}.json").write_text(json.dumps(run, indent=1) + "\n")
    if (tree / "bench" / "scaling.json").is_file():
        shutil.copyfile(tree / "bench" / "scaling.json", out / f"run-{i:02d}-scaling.json")
    lines = (done.stdout + done.stderr).splitlines()
    (out / f"run-{i:02d}.log").write_text("\n".join(lines[-200:]) + "\n")
    return run


HEADER = f"{'run':>3} {'load 1 m':>8} {'s':>6} {'exit':>4} {'scaling':>12} {'rounds':>6} {'others':>6}  judged tok/s p1 p2 t1 t2; message"


def row(r: dict[str, Any]) -> str:
    rates = " ".join(f"{v / 1e3:.1f}k" for v in r["rates"].values())
    others = "-" if r["others"] is None else f"{100 * r['others']:.0f}%"
    return (f"{r['run']:>3} {r['load'][0]:>8.1f} {r['wall_s']:>6.0f} {r['exit']:>4} {r['status']:>12} "
            f"{r['rounds'] or '-':>6} {others:>6}  {rates}; {r['message'][:300]}")  # fmt: skip


def summary(runs: list[dict[str, Any]], fault: str | None) -> str:
    exits = {code: sum(r["exit"] == code for r in runs) for code in sorted({r["exit"] for r in runs})}
    verdicts = {v: sum(r["status"] == v for r in runs) for v in sorted({r["status"] for r in runs})}
    want = "fail" if fault else "pass"
    return (f"{len(runs)} runs: exit codes {exits}; scaling {verdicts}; {verdicts.get(want, 0)} of {len(runs)} "
            f"{want}")  # fmt: skip


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m pipeline.busy_scaling", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--busy", type=int, default=4, help="spinning processes beside the job")
    ap.add_argument("--sessions", choices=["own", "shared"], default="own",
                    help="each spinner in its own session (another job's), or all in this one")  # fmt: skip
    ap.add_argument(
        "--fault", default=None, help="slow_proc[:F] or slow_thread[:F]: the scaling stage alone, slowed"
    )
    clone = outputs.Kind("scratch clone", folder=True)  # checked by check_tree (a git clone's root)
    outputs.output_flag(
        ap.add_argument("--tree", default="/tmp/xtrain-busy-scaling", help="scratch clone (made once)"), clone
    )
    outputs.output_flag(
        ap.add_argument("--out", default=None, help="the campaign's folder of records"), CAMPAIGN
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.fault:
        from xtrain.core import failpoints

        try:
            failpoints.parse(f"{args.fault}@*:0")
        except ValueError as e:
            ap.error(f"--fault {args.fault}: {e}")
    tag = f"busy{args.busy}" + (f"-{args.fault.replace(':', 'x')}" if args.fault else "")
    out = Path(args.out or REPO / "docs" / "data" / f"busy-scaling-{datetime.date.today()}-{tag}")
    tree = Path(args.tree)
    try:  # before minutes of runs: neither output over something this tool did not make
        outputs.check(out, CAMPAIGN)
        check_tree(tree)
    except outputs.OutputRefused as e:
        return report(e)
    out.mkdir(parents=True, exist_ok=True)
    outputs.write_marker(out, CAMPAIGN)
    head = scratch_tree(tree)
    print(f"busy_scaling: {args.runs} runs, {args.busy} busy ({args.sessions} sessions), fault {args.fault}, "
          f"tree {tree} at {head[:10]}, records {out}", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="xtrain-cold-remotes-") as remotes:
        if args.fault:  # the stage's inputs once, quietly: every run then measures only scaling
            cold(tree, Path(remotes) / "setup")
            env = {**tree_env(tree), "XTRAIN_VENV": "1"}
            subprocess.run(["ci/setup.sh"], cwd=tree, env=env, check=True, capture_output=True)
            subprocess.run(
                ["ci/in-env.sh", "dvc", "repro", "scaling"],
                cwd=tree,
                env=env,
                check=True,
                capture_output=True,
            )
        print(HEADER, flush=True)
        runs = []
        for i in range(1, args.runs + 1):
            runs.append(one_run(tree, i, args, out, Path(remotes)))
            print(row(runs[-1]), flush=True)
    text = summary(runs, args.fault)
    print(text)
    record = {"format": FORMAT, "busy": args.busy, "sessions": args.sessions, "fault": args.fault, "head": head,
              "summary": text, "runs": runs}  # fmt: skip
    (out / "campaign.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "table.md").write_text("```\n" + "\n".join([HEADER, *map(row, runs), text]) + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
