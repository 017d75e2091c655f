"""An export as an ONNX graph (input_ids [batch, seq] -> logits), through xtrain/export/onnx_engine.py.

python -m pipeline.to_onnx EXPORT OUT.onnx

The same graph the closed loop runs in ONNX Runtime (fp32 compute, dynamic batch and sequence).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contracts.errors import cli
from contracts.fileio import atomic_write_bytes
from xtrain.export.onnx_engine import onnx_bytes


@cli
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pipeline.to_onnx",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("export_dir")
    ap.add_argument("out", help="the .onnx file to write")
    args = ap.parse_args(argv)
    atomic_write_bytes(args.out, onnx_bytes(Path(args.export_dir)))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
