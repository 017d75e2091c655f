"""An export as an ONNX graph (input_ids [batch, seq] -> logits), through xtrain/export/onnx_engine.py.

python -m pipeline.to_onnx EXPORT OUT.onnx

The same graph the closed loop runs in ONNX Runtime (fp32 compute, dynamic batch and sequence).
EXPORT must be an export folder (its manifest.json lists its files); OUT is written only where
nothing is, or over an earlier ONNX graph (contracts/outputs.py): never over params.yaml or a source.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contracts import outputs
from contracts.errors import cli
from contracts.validate import ValidationError


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m pipeline.to_onnx",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("export_dir")
    outputs.output_flag(ap.add_argument("out", help="the .onnx file to write"), outputs.ONNX_GRAPH)
    return ap


def check_export(path: Path) -> Path:
    """An export folder (pipeline.export wrote it), refused in one line before torch builds a model."""
    if not path.is_dir():
        raise ValidationError(str(path), "", "not a folder", "an export folder (python -m pipeline.export)")
    if not outputs.EXPORT.recognise(path):
        raise ValidationError(
            str(path), "manifest.json", "not an export folder (no export manifest listing its files)",
            "an export folder such as exports/fresh (a run folder is exported first: python -m pipeline.export)",
        )  # fmt: skip
    return path


@cli
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    outputs.check(args.out, outputs.ONNX_GRAPH)  # before anything is built
    export_dir = check_export(Path(args.export_dir))
    from xtrain.export.onnx_engine import export_graph  # torch and transformers: only for a valid request

    outputs.write_file(args.out, export_graph(export_dir), outputs.ONNX_GRAPH)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
