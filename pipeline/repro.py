"""The main job's pipeline step: DVC's run cache shared through a remote, `dvc repro`, and what was reused.

python -m pipeline.repro [TARGET ...]   # dvc pull --run-cache, dvc repro --pull, reports/repro.json
python -m pipeline.repro push           # dvc push --run-cache (ci/main.sh: only after the gates pass)

DVC keys a stage's run by its command, deps and params; a stage seen before, here or by anyone who
pushed to the same remote, is restored instead of run. runs/env.json keeps that to one environment;
train_single's outputs are never cached, so fresh_train always judges a run trained on this machine
(docs/run-cache.md). reports/repro.json says per stage whether it ran here, was restored from the run
cache or was already up to date, with the md5 of the dvc.lock it left, sealed (`content_sha256`, as
registry files are); the gates report it and cross-check it (gates/judges/provenance.py).
Without a default remote (`dvc remote default`), nothing is pulled or pushed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from contracts import outputs
from contracts.artifact_table import write
from contracts.errors import one_line, report
from contracts.fileio import md5_file
from contracts.yamlfile import load_pipeline
from params.config import load_params
from pipeline.run_cache import (
    cache_dirs,
    corrupt_restored,
    drop_corrupt,
    lock_outs,
    to_remake,
    unwritable_cache,
)
from pipeline.schedule import Plan, print_line, run_plan
from registry.sealed import seal

OUT = "reports/repro.json"
FORMAT = "xtrain-repro/1"
RECORD = outputs.json_kind("repro record", FORMAT)
# DVC's own words for what it did with a stage (dvc/stage/run.py, stage/cache.py, stage/__init__.py)
HOW = (
    (re.compile(r"^Running stage '([^']+)':$"), "ran"),
    (re.compile(r"^Stage '([^']+)' is cached - skipping run, checking out outputs$"), "restored"),
    (re.compile(r"^Stage '([^']+)' didn't change, skipping$"), "unchanged"),
)


def dvc(*args: str) -> list[str]:
    return [sys.executable, "-m", "dvc", *args]


def default_remote() -> str | None:
    """The default remote's URL, or None when the checkout has none (read in this process: two `dvc remote`
    processes cost ~1.6 CPU-s of DVC start-up on a 2-core Xeon)."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(".") as repo:
            name = repo.config["core"].get("remote")
            return repo.config["remote"].get(name, {}).get("url", name) if name else None
    except DvcException:
        return None


def stage_of(line: str) -> tuple[str, str] | None:
    """(stage, how) when the line is DVC saying what it did with a stage."""
    for pattern, how in HOW:
        m = pattern.match(line.strip())
        if m:
            return m.group(1), how
    return None


def repro_parallel(
    targets: list[str],
    jobs: int,
    timed: tuple[set[str], set[str] | None],
    pull: bool = True,
    here: frozenset[str] = frozenset(),
    extra: tuple[str, ...] = (),
) -> tuple[int, dict[str, str], dict]:
    """Each stage its own `dvc repro -s`, independent ones side by side up to `jobs` (pipeline/schedule.py);
    the stages of `here` without --pull (see uncached_missing); `extra`: more `dvc repro` options."""
    stages: dict[str, str] = {}

    def start(stage: str) -> subprocess.Popen[str]:
        pulls = pull and stage not in here
        cmd = dvc("--wait-for-lock", "repro", *(["--pull"] if pulls else []), *extra, "-s", stage)
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def on_line(stage: str, line: str) -> None:
        print_line(stage, line)
        seen = stage_of(line)
        if seen:
            stages[seen[0]] = seen[1]

    plan = Plan(upstream_graph(targets), jobs, *timed)
    done = run_plan(plan, start, on_line)
    code = next((d["exit_code"] for d in done.values() if d["exit_code"]), 0)
    if len(done) < len(plan.upstream) and not code:
        code = 1
    times = {s: {"start_s": d["start_s"], "wall_s": d["wall_s"]} for s, d in done.items()}
    return code, stages, times


def repro_serial(targets: list[str], extra: tuple[str, ...] = ()) -> tuple[int, dict[str, str], dict]:
    """One `dvc repro` for every stage in turn (--jobs 1, nothing pulled): a DVC process per stage pays DVC's
    start-up a dozen times (~1 CPU-s each on a 2-core Xeon). A stage's time runs from DVC's first line
    about it to its last (DVC's "Updating lock file" once it has run)."""
    stages: dict[str, str] = {}
    times: dict[str, dict] = {}
    t0, current = time.monotonic(), "repro"
    proc = subprocess.Popen(
        dvc("repro", *extra, *targets), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        seen = stage_of(line)
        if seen:
            current, now = seen[0], round(time.monotonic() - t0, 2)
            stages[current] = seen[1]
            times[current] = {"start_s": now, "wall_s": 0.0}
        print_line(current, line)
        if current in times:
            times[current]["wall_s"] = max(0.0, round(time.monotonic() - t0 - times[current]["start_s"], 2))
    return proc.wait(), stages, times


def upstream_graph(targets: list[str]) -> dict[str, set[str]]:
    """Each stage (of `targets` and everything they need; all stages without targets) -> the stages
    whose outputs it reads, from DVC's own graph of dvc.yaml."""
    from dvc.repo import Repo

    with Repo(".") as repo:
        graph = repo.index.graph
        ups = {s.addressing: {d.addressing for d in graph.successors(s)} for s in graph.nodes}
    if not targets:
        return ups
    wanted, todo = set(), [t for t in targets if t in ups] or list(ups)
    while todo:
        stage = todo.pop()
        if stage not in wanted:
            wanted.add(stage)
            todo += ups[stage]
    return {s: ups[s] for s in wanted}


TRAININGS = {"train_single", "train@thread", "train@proc"}
GPU_STAGES = {*TRAININGS, "scaling", "pilot", "env"}  # the rest run on the CPU whatever the profile


def timed_stages(params_path: str) -> tuple[set[str], set[str] | None]:
    """The stages that measure time, and what must not run beside them: on the CPU the scaling
    benchmark alone among all stages; on CUDA also the trainings (perf.throughput judges their
    windows), alone among the stages that use the GPU."""
    if load_params(params_path)["train"]["device"] != "cuda":
        return {"scaling"}, None
    return {"scaling", *TRAININGS}, GPU_STAGES


def missing_outs(lock: Path = Path("dvc.lock")) -> set[str]:
    """Stages of dvc.lock with an out absent from the checkout: what a pull may restore."""
    if not lock.is_file():
        return set()
    stages = (load_pipeline(lock, aliases=False) or {}).get("stages") or {}
    return {
        name
        for name, body in stages.items()
        if any(not Path(o["path"]).exists() for o in (body or {}).get("outs") or [] if isinstance(o, dict))
    }


def uncached_missing(dvc_yaml: Path = Path("dvc.yaml")) -> list[str]:
    """Stages with a `cache: false` out absent here (train_single: fresh_train's run trains here). DVC
    3's `repro --pull` "pulls" such a stage's missing outs, which no remote holds, and skips it (found
    by tests/pipeline/test_e2e.py's two-clone test, 2026-12-02). So such a stage's `dvc repro -s` goes without
    --pull; its upstream is pulled as usual."""
    if not dvc_yaml.is_file():
        return []
    stages = (load_pipeline(dvc_yaml, aliases=True) or {}).get("stages") or {}
    found = []
    for name, body in stages.items():
        outs = [
            o for k in ("outs", "metrics", "plots") for o in (body or {}).get(k) or [] if isinstance(o, dict)
        ]
        uncached = [path for o in outs for path, opts in o.items() if (opts or {}).get("cache") is False]
        if "foreach" not in (body or {}) and any(not Path(p).exists() for p in uncached):
            found.append(name)
    return found


def restored_by_pull(stages: dict[str, str], missing: set[str]) -> dict[str, str]:
    """A stage DVC found up to date whose outs the pull brought: restored from the run cache, not unchanged."""
    return {s: "restored" if how == "unchanged" and s in missing else how for s, how in stages.items()}


def remake_corrupt(stages: dict[str, str], targets: list[str], extra: tuple[str, ...]) -> int:
    """Hash every out of a restored stage against dvc.lock (DVC trusts a read-only cache object unhashed:
    pipeline/run_cache.py); a corrupt one's cache objects are removed and the stage, and every stage that
    ran downstream of it, runs here (`dvc repro -f -s` never restores). `stages` is updated."""
    from gates.reading.dvclock import DvcLock, LockError

    try:
        bad = corrupt_restored(stages)
        lock = DvcLock.read(Path(".")) if bad else None
    except LockError as e:
        print(f"repro: warning: restored outputs not verified: {one_line(e)}")
        return 0
    objects = cache_dirs()[0] if bad else Path()
    for stage, diffs in bad.items():
        dropped = drop_corrupt(objects, lock_outs(lock, stage))
        print(f"repro: {stage} was restored from a corrupt cache ({'; '.join(diffs)}); "
              f"{len(dropped)} cache object(s) removed: running it here", flush=True)  # fmt: skip
    for stage in to_remake(set(bad), stages, upstream_graph(targets) if bad else {}):
        stages[stage] = "ran"
        code = subprocess.run(dvc("repro", "-f", *extra, "-s", stage)).returncode
        if code:
            return code
    return 0


def run(targets: list[str], pull: bool, out: Path, jobs: int) -> int:
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.monotonic()
    remote = default_remote()
    pulled = False
    missing = missing_outs()
    warning = unwritable_cache()  # DVC would fail each stage after its command ran, and the pull
    extra = ("--no-commit",) if warning else ()
    if warning:
        print(warning, flush=True)
    elif pull and remote:
        print(f"repro: pulling the run cache from {remote}", flush=True)
        pulled = subprocess.run(dvc("pull", "--run-cache", "--allow-missing", "-q")).returncode == 0
        if not pulled:
            print(f"repro: warning: dvc pull --run-cache from {remote} failed: every stage runs here")
    # --pull only where a pull brought something to fetch, and never for a stage with missing uncached
    # outs (uncached_missing): each stage is its own `dvc repro -s`, so that one goes without it
    if jobs == 1 and not pulled:
        code, stages, times = repro_serial(targets, extra)
    else:
        here = frozenset(uncached_missing() if pulled else ())
        code, stages, times = repro_parallel(targets, jobs, timed_stages("params.yaml"), pulled, here, extra)
    if pulled:  # dvc pull checked the cached outs out: DVC then calls their stages unchanged
        stages = restored_by_pull(stages, missing)
    if not code:
        code = remake_corrupt(stages, targets, extra)
    record: dict[str, Any] = {
        "format": FORMAT,
        "started_at": started,
        "wall_s": round(time.monotonic() - t0, 3),
        "remote": remote,
        "pulled": pulled,
        "targets": targets,
        "jobs": jobs,
        "exit_code": code,
        "stages": stages,
        "timings": times,
        "dvc_lock_md5": md5_file("dvc.lock") if Path("dvc.lock").is_file() else None,
    }
    write("repro", out, seal(record))  # sealed: provenance refuses a record edited by hand
    counts = {how: sum(v == how for v in stages.values()) for _, how in HOW}
    print(
        f"repro: {counts['ran']} ran here, {counts['restored']} restored from the run cache, "
        f"{counts['unchanged']} up to date in {record['wall_s']:.1f} s; {out}"
    )
    return code


def push() -> int:
    remote = default_remote()
    if not remote:
        print("repro push: no default DVC remote: nothing shared (docs/run-cache.md)")
        return 0
    print(f"repro push: dvc push --run-cache to {remote}", flush=True)
    return subprocess.run(dvc("push", "--run-cache", "-q")).returncode


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["push"]:
        return push()
    ap = argparse.ArgumentParser(
        prog="python -m pipeline.repro",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("targets", nargs="*", help="dvc repro targets (default: the whole pipeline)")
    ap.add_argument("--no-pull", action="store_true", help="do not pull the run cache first")
    outputs.output_flag(
        ap.add_argument("--out", default=OUT, help=f"the record of what was reused (default {OUT})"), RECORD
    )
    ap.add_argument("--jobs", type=int, default=1, help="stages side by side (1: one at a time)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs {args.jobs}: must be >= 1")
    try:  # before minutes of dvc repro: never over a file it did not write
        outputs.check(args.out, RECORD)
    except outputs.OutputRefused as e:
        return report(e)
    return run(args.targets, not args.no_pull, Path(args.out), args.jobs)


if __name__ == "__main__":
    sys.exit(main())
