"""Stage `closed_loop`: transformers and ONNX Runtime run exports/fresh and must reproduce runs/single's logits and tokens.

Records reports/closed_loop.json and exits 0 either way: the closed_loop gate decides.
"""

from __future__ import annotations

import sys
from pathlib import Path

from contracts import artifact_table, outputs
from contracts.checkpoint_dir import resolve_checkpoint
from contracts.validate import load_json
from pipeline import stage
from xtrain.core.corpus import load_split
from xtrain.export.closed_loop_run import closed_loop, print_summary


def main(argv: list[str] | None = None) -> int:
    ap = stage.parser(__doc__ or "")
    ap.add_argument("--export", default="exports/fresh")
    ap.add_argument("--run", default="runs/single")
    kind = outputs.json_kind("closed_loop", artifact_table.artifact("closed_loop").format)
    outputs.output_flag(ap.add_argument("--report", default="reports/closed_loop.json"), kind)
    args = ap.parse_args(argv)

    def body() -> None:
        outputs.check(args.report, kind)  # before the engines run: never over a file it did not write
        cl = stage.params_of(args)["closed_loop"]
        val = load_split(Path("data/corpus.txt"), load_json("data/corpus.json"), "val")
        report = closed_loop(
            Path(args.export),
            resolve_checkpoint(args.run),
            val,
            cl["prompts"],
            cl["prompt_tokens"],
            cl["new_tokens"],
            {"fp32": cl["logits_atol_fp32"], "bf16": cl["logits_atol_bf16"]},
        )
        artifact_table.write("closed_loop", args.report, report)
        print_summary(report)

    return stage.run(body)


if __name__ == "__main__":
    sys.exit(main())
