"""Stage `probes`: identities of the model's feature paths (xtrain/core/probes.py), judged by gates/judges/probes.py.

python -m pipeline.probes [--set k=v] [--out runs/probes.json]

Runs on the CPU in fp32 whatever the profile: the probes check the model's arithmetic paths, not
the device; a second's work, written atomically and validated (contracts/schemas/probes.schema.json).
"""

from __future__ import annotations

import sys

from contracts import outputs
from contracts.fileio import canonical_json
from contracts.validate import load_schema, validate
from pipeline import stage
from xtrain.core.probes import run_probes

FORMAT = "xtrain-probes/1"
PROBES = outputs.json_kind("probes", FORMAT)
VOCAB = 256  # the probes never touch the embedding: any vocabulary serves


def main(argv: list[str] | None = None) -> int:
    ap = stage.parser(__doc__ or "")
    ap.prog = "python -m pipeline.probes"
    outputs.output_flag(ap.add_argument("--out", default="runs/probes.json"), PROBES)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> None:
        outputs.check(args.out, PROBES)  # before the probes run: never over a file it did not write
        params = stage.params_of(args)
        cfg = params.run_config(VOCAB).model
        record = {"format": FORMAT, "profile": params["profile"], "seed": params["seed"]}
        record |= run_probes(cfg, params["seed"])
        validate(record, load_schema("probes.schema.json"), args.out)
        outputs.write_file(args.out, canonical_json(record), PROBES)  # guarded again at the write

    return stage.run(body)


if __name__ == "__main__":
    sys.exit(main())
