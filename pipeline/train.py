"""Stages `train_single`, `train@thread`, `train@proc`: train with one launcher (xtrain/core/launch.py).

python -m pipeline.train single|thread [--world N] [--set k=v] [--resume] [--run-dir DIR]
python -m pipeline.train proc      # starts torchrun itself with launchers.proc.world workers

The proc launcher's world comes from the validated params (profile and --set applied), never
from a shell command: this process starts torchrun from Python, and each worker runs this same
module under torchrun (it sees RANK in its environment). Multi-node runs it under torchrun directly:
torchrun --nnodes 2 --node-rank R --nproc-per-node 8 --rdzv-backend c10d \\
         --rdzv-endpoint HOST0:29500 --rdzv-id JOB -m pipeline.train proc

The stage then checks what it wrote (metrics.json against contracts/schemas/metrics.schema.json).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import xtrain.core.orphan_guard  # noqa: F401 -- first: a torchrun worker dies with its agent from here on
from contracts import artifact_table, outputs
from contracts.errors import XtrainError, debug, report
from contracts.validate import ValidationError
from params.cli import add_params_args
from params.config import LaunchConfig, load_params
from xtrain.core import launch_plan, proctree, rundir
from xtrain.core.launch_plan import RunSpec


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m pipeline.train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("launcher", choices=launch_plan.LAUNCHERS)
    add_params_args(ap)
    outputs.output_flag(
        ap.add_argument("--run-dir", default=None, help="default: runs/<launcher>"), outputs.RUN
    )
    ap.add_argument(
        "--world",
        type=int,
        default=None,
        help="ranks (default: launchers.<launcher>.world; under torchrun its WORLD_SIZE)",
    )
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--tokenizer", default="data/tokenizer.json")
    ap.add_argument("--resume", action="store_true", help="continue from <run-dir>/checkpoints/latest")
    return ap.parse_args(argv)


def run_dir(args: argparse.Namespace) -> str:
    return args.run_dir or f"runs/{args.launcher}"


def load(args: argparse.Namespace) -> tuple[LaunchConfig, RunSpec]:
    """params.yaml (validated) and every input, loaded before anything is touched."""
    params = load_params(args.params, args.overrides)
    spec = launch_plan.build_spec(
        params, args.launcher, run_dir(args), args.tokens, args.tokenizer, args.resume
    )
    return params.launch_config(), spec


def train_here(args: argparse.Namespace) -> int:
    """The single or thread launcher in this process; a failure is one line (contracts.errors)."""
    from xtrain.core import launch  # torch: only where ranks train (xtrain/core/launch_plan.py)

    try:
        cfg, spec = load(args)
        launch.run_local(spec, args.launcher, cfg, args.world)
    except launch.RankFailed as e:
        if debug():
            print(e.tb, file=sys.stderr, end="")
        return report(e)
    except (XtrainError, OSError) as e:
        return report(e)
    return 0


Resolve = Callable[[], tuple[LaunchConfig, RunSpec, bool | None]]


def torchrun_worker(resolve: Resolve) -> int:
    """A torchrun worker: dies with its agent (and with our launcher, xtrain/core/proctree.py); a failure
    is one line naming the rank, then a hard exit."""
    from xtrain.core import launch  # torch: only where ranks train (xtrain/core/launch_plan.py)

    launch.die_with_parent()
    rank = int(os.environ["RANK"])
    guard = proctree.guard_worker(rank)
    code = worker_body(resolve, rank)
    if code == 0:
        if guard is not None:
            guard.mark(0)
        return 0
    sys.stdout.flush()
    if guard is not None:
        guard.exit(code, "error")
    # Leave now: interpreter shutdown would wait on the broken process group's threads.
    os._exit(code)


def worker_body(resolve: Resolve, rank: int) -> int:
    from xtrain.core import launch

    try:
        cfg, spec, kept = resolve()
        launch.run_proc_rank(spec, cfg.timeout_s, cfg.grad_sync, kept=kept)
    except ValidationError as e:  # the same on every rank: rank 0 says it
        return report(e) if rank == 0 else e.exit_code
    except (XtrainError, OSError) as e:
        return report(e, prefix="" if isinstance(e, launch.RankFailed) else f"rank {rank}: ")
    except Exception:
        traceback.print_exc()
        return 1
    return 0


def worlds(params_path: str, overrides: list[str]) -> dict[str, int]:
    """Each launcher's world as the launchers will use it: the one route (docs/world-sizes.md)."""
    return load_params(params_path, overrides).worlds()


def proc_command(argv: list[str]) -> list[str]:
    """torchrun with the validated proc world, its workers running `pipeline.train` with our argv."""
    args = parse_args(argv)
    world = args.world or worlds(args.params, args.overrides)["proc"]
    return launch_plan.torchrun_cmd(world, "pipeline.train", *argv)


def start_torchrun(args: argparse.Namespace, argv: list[str]) -> int:
    """torchrun as this launcher's process tree; the finished run is committed here, while alive.
    params are resolved here, once: the workers read the resolved run from the staging directory."""
    cfg, spec = load(args)  # every input validated before anything is touched
    world = args.world or cfg.proc_world
    cmd = launch_plan.torchrun_cmd(world, "pipeline.train", *argv)
    print(f"[proc] {shlex.join(cmd)}", flush=True)
    before = rundir.snapshot(run_dir(args))  # what the folder holds now: said truly if interrupted
    launch_file = launch_plan.stage_launch(spec, cfg)
    try:
        code = proctree.supervise(cmd, world, cfg.timeout_s, {launch_plan.LAUNCH_ENV: str(launch_file)})
    except proctree.Interrupted as e:
        print(
            f"error: launcher: {e}: its torchrun agent and workers were killed; "
            f"{rundir.describe(run_dir(args), before)}",
            file=sys.stderr,
            flush=True,
        )
        return 128 + e.signum
    except proctree.TreeFailed as e:
        return report(e)
    finally:
        launch_plan.unstage_launch(launch_file)
    if code == 0:
        proctree.commit(run_dir(args))
    return code


def launch_locked(args: argparse.Namespace, argv: list[str]) -> int:
    """One writer per run directory: the launcher holds the run's lock for the whole run, and
    refuses before anything is touched (a folder it did not make, --resume with no checkpoint)."""
    rundir.preflight(run_dir(args), args.resume)  # read-only: a refusal creates not even the lock file
    with rundir.locked(run_dir(args)):  # the launcher lives as long as its tree (xtrain/core/proctree.py)
        rundir.preflight(run_dir(args), args.resume)  # again, now that no other writer can change it
        code = start_torchrun(args, argv) if args.launcher == "proc" else train_here(args)
        if code == 0:  # also on a torchrun worker's write: read it back
            artifact_table.read("metrics", Path(run_dir(args)) / "metrics.json")
    return code


def main(argv: list[str] | None = None) -> int:
    if "RANK" in os.environ and launch_plan.LAUNCH_ENV in os.environ and proctree.launcher_commits():
        # a worker of our launcher: it resolved the run once; argv and params.yaml are not read again
        return torchrun_worker(lambda: launch_plan.read_launch(os.environ[launch_plan.LAUNCH_ENV]))
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if "RANK" in os.environ and args.launcher == "proc":  # a worker of a bare torchrun (multi-node)
        return torchrun_worker(lambda: (*load(args), None))
    proctree.die_with_caller()
    try:
        return launch_locked(args, argv)
    except (XtrainError, OSError) as e:  # a refusal, a busy run, a bad metrics.json: exit 2
        return report(e)


if __name__ == "__main__":
    sys.exit(main())
