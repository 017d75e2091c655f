"""Stage `env`: this machine's environment facts -> runs/env.json (xtrain/core/env.py machine_record).

python -m pipeline.env [--set k=v] [--out runs/env.json]

The stage is `always_changed` in dvc.yaml: it runs on every `dvc repro` and rewrites the file only
when the machine differs. Every stage whose bits depend on the machine (the trainings, the probes,
the pilot, the closed loop, the scaling benchmark) depends on runs/env.json, so a run restored from a shared run cache
always comes from this environment (docs/run-cache.md).
"""

from __future__ import annotations

import sys

import torch

from contracts import outputs
from contracts.artifact_table import write
from pipeline import stage
from xtrain.core.determinism import configure, threads_per_rank
from xtrain.core.env import machine_record

ENV = outputs.json_kind("env", "xtrain-env/1")


def main(argv: list[str] | None = None) -> int:
    ap = stage.parser(__doc__ or "")
    ap.prog = "python -m pipeline.env"
    outputs.output_flag(ap.add_argument("--out", default="runs/env.json"), ENV)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> None:
        outputs.check(args.out, ENV)  # before torch starts: never over a file it did not write
        t = stage.params_of(args)["train"]
        device = torch.device("cuda:0" if t["device"] == "cuda" else "cpu")
        configure(t["deterministic"], device.type)  # as a run's process does: it sets dispatch variables
        record = machine_record(device, threads_per_rank(t["cpu_threads"], 1), t["precision"])
        write("env", args.out, record)

    return stage.run(body)


if __name__ == "__main__":
    sys.exit(main())
