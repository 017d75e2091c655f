"""Stage `scaling`: tokens/s per launcher and world -> bench/scaling.json and bench/scaling.png (xtrain/bench/scaling.py).

python -m pipeline.scaling [--out bench] [--set k=v]    # worlds and launchers from params.yaml `scaling:`
python -m pipeline.scaling --profile 5 --out bench/profiled   # also where rank 0's step time goes

With --profile N every measured process runs N more steps after its windows, rank 0 under
torch.profiler (xtrain/bench/step_profile.py): OUT/profile.json and a table of host time, GPU compute,
collectives and the part of them no compute overlaps. Not part of the dvc stage.

Measured processes run this module again: `python -m pipeline.scaling rank thread --worlds 1,2 ...`
(every world in turn, one process), or `rank proc --worlds N` under a real torchrun of N workers.
bench/scaling.json is validated when written (contracts.artifact_table); a bad record is one line, exit 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from contracts import outputs
from contracts.errors import report
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


def rank_command(
    args: argparse.Namespace, launcher: str, worlds: list[int], max_rounds: int, result: Path
) -> list[str]:
    """One measured process: this module's `rank` command, with our params, overrides and data,
    taking at most `max_rounds` rounds of windows per world (a repeat takes only the rounds left)."""
    overrides = [*args.overrides, f"scaling.max_rounds={max_rounds}"]
    common = [
        "--params",
        args.params,
        *[a for o in overrides for a in ("--set", o)],
        "--tokens",
        args.tokens,
        "--tokenizer",
        args.tokenizer,
        "--result",
        str(result),
        "--profile",
        str(args.profile),
    ]
    worlds_arg = ["--worlds", ",".join(map(str, worlds))]
    if launcher == "thread":
        return [sys.executable, "-m", "pipeline.scaling", "rank", "thread", *worlds_arg, *common]
    (world,) = worlds  # torchrun starts one process per rank of one world
    return torchrun_cmd(world, "pipeline.scaling", "rank", "proc", *worlds_arg, *common)


RANK_RESULT = outputs.json_kind("measured rank's result", None)
OUT_FILES = {  # what the stage writes into --out, each replaced only over an earlier one of its kind
    "scaling.json": outputs.json_kind("scaling", "xtrain-scaling/1"),
    "scaling.png": outputs.PICTURE,
    "profile.json": outputs.json_kind("step profile", None),
}


def check_out(out: Path) -> None:
    """--out: absent, empty, or a folder of earlier scaling outputs only; each file there one of ours."""
    outputs.check(out, outputs.SCALING_FOLDER)
    for name, kind in OUT_FILES.items():
        outputs.check(out / name, kind)


def worlds_list(text: str) -> list[int]:
    try:
        worlds = [int(w) for w in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not worlds or min(worlds) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: worlds must be >= 1")
    return worlds


def rank_main(argv: list[str]) -> int:
    """`rank thread|proc`: one measured process (a thread launcher, or one torchrun worker)."""
    ap = parser("python -m pipeline.scaling rank")
    ap.add_argument("launcher", choices=["thread", "proc"])
    ap.add_argument("--worlds", type=worlds_list, default=[1], help="comma-separated; proc: its one world")
    outputs.output_flag(ap.add_argument("--result", required=True), RANK_RESULT)
    args = ap.parse_args(argv)
    try:  # before the measurement: never over a file it did not write
        outputs.check(args.result, RANK_RESULT)
    except outputs.OutputRefused as e:
        return report(e)
    params = stage.params_of(args).scaling_workload()
    spec = build_spec(params, args.launcher, None, args.tokens, args.tokenizer, False)
    measure_rank(
        spec,
        args.launcher,
        args.worlds,
        params.launch_config(),
        params.scaling_config(),
        remeasure_policy(params),
        args.result,
        args.profile,
    )
    return 0


def gate_bounds(params: Any) -> dict[str, Any]:
    """params.yaml gates.scaling of the resolved profile ({} where it has none: no re-measuring)."""
    return params["gates"].get("scaling", {}).get(params["profile"], {})


def remeasure_policy(params: Any) -> Remeasure:
    """Re-measure until the windows spread no more than the gate allows, within scaling's caps."""
    sc = params.scaling_config()
    return Remeasure(gate_bounds(params).get("max_spread", math.inf), sc.max_rounds, sc.time_cap_s)


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
            lambda *a: rank_command(args, *a),
            remeasure_policy(params),
            gate_bounds(params),
        )
        record = scaling_record(params["profile"], run, launch, sc, measured)
        write_results(record, Path(args.out))
        if args.profile:
            write_profiles(record, measured, Path(args.out) / "profile.json")

    return stage.run(body)


if __name__ == "__main__":
    sys.exit(main())
