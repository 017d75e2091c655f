"""Stages `train_single`, `train@thread`, `train@proc`: the launchers of xtrain.launch.

python -m pipeline.train single
python -m pipeline.train thread
python -m pipeline.train proc      # starts torchrun itself with launchers.proc.world workers

The proc launcher's world comes from the validated params (profile and --set applied), never
from a shell command: this process starts torchrun from Python, and each worker runs this same
module under torchrun (it sees RANK in its environment). Multi-node stays as it was:
torchrun --nnodes 2 ... -m pipeline.train proc

The stage then checks what it wrote (metrics.json against contracts/schemas/metrics.schema.json).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from contracts import artifacts
from contracts.errors import report
from contracts.validate import ValidationError
from xtrain import launch
from xtrain.config import load_params


def worlds(params_path: str, overrides: list[str]) -> dict[str, int]:
    """Each launcher's world as the launchers will use it: the one route (docs/world-sizes.md)."""
    launchers = load_params(params_path, overrides)["launchers"]
    return {name: launchers[name]["world"] for name in ("thread", "proc")}


def proc_command(argv: list[str]) -> list[str]:
    """torchrun with the validated proc world, its workers running `pipeline.train` with our argv."""
    args = launch.parse_args(argv)
    world = args.world or worlds(args.params, args.overrides)["proc"]
    return launch.torchrun_cmd(world, "pipeline.train", *argv)


def check_written(argv: list[str]) -> None:
    args = launch.parse_args(argv)
    run_dir = Path(args.run_dir or f"runs/{args.launcher}")
    artifacts.read("metrics", run_dir / "metrics.json")  # also on a torchrun worker's write: read it back


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "RANK" in os.environ:  # a torchrun worker (one node or many)
        return launch.main(argv)
    try:
        if argv[:1] == ["proc"]:
            cmd = proc_command(argv)
            print(f"[proc] {shlex.join(cmd)}", flush=True)
            code = subprocess.run(cmd, check=False).returncode
        else:
            code = launch.main(argv)
        if code == 0:
            check_written(argv)
    except ValidationError as e:
        return report(e)  # exit 2 (ValidationError.exit_code)
    return code


if __name__ == "__main__":
    sys.exit(main())
