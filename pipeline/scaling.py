"""Stage `scaling`: tokens/s per launcher and world -> bench/scaling.json and bench/scaling.png (xtrain/bench/scaling.py).

python -m pipeline.scaling [--out bench] [--set k=v]    # worlds and launchers from params.yaml `scaling:`
python -m pipeline.scaling --profile 5 --out bench/profiled   # also where rank 0's step time goes

With --profile N every measured process runs N more steps after the windows, one process at a time,
rank 0 under torch.profiler (xtrain/bench/step_profile.py): OUT/profile.json and a table of host time, GPU compute,
collectives and the part of them no compute overlaps. Not part of the dvc stage.

Measured processes run this module again, one per launcher and world, all at once: `python -m
pipeline.scaling rank thread --worlds N --baton SOCKET ...` (N rank threads), or `rank proc --worlds N`
under a real torchrun of N workers; each times its windows when the stage's conductor says so, in
turn with the others (xtrain/bench/conductor.py, docs/scaling.md).
bench/scaling.json is validated when written (contracts.artifact_table); a bad record is one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from contracts import outputs
from pipeline import stage
from xtrain.bench.remeasure import Remeasure
from xtrain.bench.scaling import measure_rank, measure_worlds, scaling_record, write_profiles, write_results
from xtrain.core.launch_plan import build_spec, torchrun_cmd
from xtrain.core.tokenizer import load_tokenizer


def parser(prog: str) -> argparse.ArgumentParser:
    ap = stage.parser(__doc__ or "")
    ap.prog, ap.formatter_class = prog, argparse.RawDescriptionHelpFormatter
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--tokenizer", default="data/tokenizer.json")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="profile N steps after the windows")
    return ap


def rank_command(args: argparse.Namespace, key: tuple[str, int], address: str) -> list[str]:
    """One measured process: this module's `rank` command for (launcher, world), with our params,
    overrides and data, answering the conductor at `address`."""
    launcher, world = key
    common = [
        "--params",
        args.params,
        *[a for o in args.overrides for a in ("--set", o)],
        "--tokens",
        args.tokens,
        "--tokenizer",
        args.tokenizer,
        "--baton",
        address,
        "--worlds",
        str(world),
    ]
    if launcher == "thread":
        return [sys.executable, "-m", "pipeline.scaling", "rank", "thread", *common]
    return torchrun_cmd(world, "pipeline.scaling", "rank", "proc", *common)


OUT_FILES = {  # what the stage writes into --out, each replaced only over an earlier one of its kind
    "scaling.json": outputs.json_kind("scaling", "xtrain-scaling/2"),
    "scaling.png": outputs.PICTURE,
    "profile.json": outputs.json_kind("step profile", None),
}


def check_out(out: Path) -> None:
    """--out: absent, empty, or a folder of earlier scaling outputs only; each file there one of ours."""
    outputs.check(out, outputs.SCALING_FOLDER)
    for name, kind in OUT_FILES.items():
        outputs.check(out / name, kind)


def rank_main(argv: list[str]) -> int:
    """`rank thread|proc`: one measured process (a thread launcher, or one torchrun worker)."""
    ap = parser("python -m pipeline.scaling rank")
    ap.add_argument("launcher", choices=["thread", "proc"])
    ap.add_argument("--worlds", type=int, required=True, help="its world (proc: torchrun's workers)")
    ap.add_argument("--baton", required=True, help="the conductor's socket")
    args = ap.parse_args(argv)
    params = stage.params_of(args).scaling_workload()
    spec = build_spec(params, args.launcher, None, args.tokens, args.tokenizer, False)
    sc, launch = params.scaling_config(), params.launch_config()
    measure_rank(spec, args.launcher, args.worlds, launch, sc, args.baton)
    return 0


def gate_bounds(params: Any) -> dict[str, Any]:
    """params.yaml gates.scaling of the resolved profile ({} where it has none: no re-measuring)."""
    return params["gates"].get("scaling", {}).get(params["profile"], {})


def remeasure_policy(params: Any) -> Remeasure:
    """Re-measure while the gate would not pass the windows, within scaling's caps."""
    sc = params.scaling_config()
    return Remeasure(sc.max_rounds, sc.time_cap_s)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["rank"]:
        return rank_main(argv[1:])
    ap = parser("python -m pipeline.scaling")
    outputs.output_flag(ap.add_argument("--out", default="bench"), outputs.SCALING_FOLDER)
    args = ap.parse_args(argv)

    def body() -> None:
        check_out(Path(args.out))  # before minutes of measuring
        params = stage.params_of(args).scaling_workload()
        run = params.run_config(load_tokenizer(args.tokenizer).get_vocab_size())
        sc, launch = params.scaling_config(), params.launch_config()
        measured = measure_worlds(
            sc,
            run.train.device,
            lambda key, address: rank_command(args, key, address),
            remeasure_policy(params),
            gate_bounds(params),
            args.profile,
        )
        record = scaling_record(params["profile"], run, launch, sc, measured)
        write_results(record, Path(args.out))
        if args.profile:
            write_profiles(record, measured, Path(args.out) / "profile.json")

    return stage.run(body)


if __name__ == "__main__":
    sys.exit(main())
