"""Export to a Hugging Face folder (Qwen3 layout, model card, GGUF, manifest): xtrain/export/hf_folder.py.

python -m pipeline.export           # stage `export`: runs/single -> exports/fresh, the registry's pinned
                                    # checkpoint -> exports/pinned (params.yaml `export:`)
python -m pipeline.export CKPT OUTDIR [--dtype fp32|bf16] [--name NAME] [--tokenizer FILE]   # one checkpoint

CKPT is a checkpoint directory, or a run directory (its `checkpoints/latest` is used). One checkpoint
needs no params.yaml: it exports anywhere, to the same md5s.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from contracts import outputs
from contracts.checkpoint_dir import CheckpointNotFound
from pipeline import stage
from registry.store import Registry
from xtrain.export.hf_folder import DTYPES, ExportError, export

ERRORS = (ExportError, CheckpointNotFound, ValueError)


def parser() -> argparse.ArgumentParser:
    ap = stage.parser(__doc__ or "")
    ap.formatter_class = argparse.RawDescriptionHelpFormatter
    ap.add_argument("checkpoint", nargs="?", help="one checkpoint (default: the stage's two exports)")
    outputs.output_flag(ap.add_argument("out_dir", nargs="?"), outputs.EXPORT)
    ap.add_argument("--run", default="runs/single", help="the stage: the fresh model's run")
    where = "the stage: where fresh/ and pinned/ go"
    outputs.output_flag(ap.add_argument("--out", default="exports", help=where), EXPORTS)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="one checkpoint (default: fp32)")
    ap.add_argument("--tokenizer", default=None, help="one checkpoint (default: the checkpoint's)")
    ap.add_argument("--name", default=None, help="one checkpoint: its name in the card and GGUF")
    return ap


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = parser()
    args = ap.parse_args(argv)
    if (args.checkpoint is None) != (args.out_dir is None):
        ap.error("one checkpoint takes both CKPT and OUTDIR")
    if args.checkpoint is None and (args.dtype or args.tokenizer or args.name):
        ap.error("--dtype, --tokenizer and --name go with CKPT OUTDIR (the stage reads params.yaml export:)")
    return args


def _exports_folder(path: Path) -> bool:
    """The stage's --out: its two exports, DVC's .gitignore and their scratch twins, nothing else."""
    return all(
        p.name in ("fresh", "pinned", ".gitignore") or SCRATCH.fullmatch(p.name) for p in path.iterdir()
    )


SCRATCH = re.compile(r"\.(fresh|pinned)\..+\.(tmp|old)")
EXPORTS = outputs.Kind("exports folder", folder=True, recognise=_exports_folder)


def name_leftovers(out: Path) -> None:
    """An export killed mid-write leaves its staging twin (`.fresh.XXXX.tmp`): named, never removed (an
    export running beside this one may own it)."""
    for left in outputs.leftovers(out):
        print(
            f"warning: {left}: left by an interrupted export; remove it once no export runs", file=sys.stderr
        )


def export_stage(args: argparse.Namespace) -> None:
    outputs.check(args.out, EXPORTS)  # before any work: never fresh/ and pinned/ inside another folder
    params = stage.params_of(args)
    dtype = params["export"]["dtype"]
    pinned = Registry().pinned_dir(params["export"]["pinned_model"])
    model = params["export"]["pinned_model"]
    # The card and GGUF name the model: the pinned one by its pin.json (the default), this run's as -fresh.
    for name, source, title in (("fresh", Path(args.run), f"{model}-fresh"), ("pinned", pinned, None)):
        name_leftovers(Path(args.out) / name)
        manifest = export(source, Path(args.out) / name, dtype, name=title)
        print(f"export {name} ({dtype}): model.safetensors {manifest['files']['model.safetensors']['md5']}")


def export_one(args: argparse.Namespace) -> None:
    name_leftovers(Path(args.out_dir))
    manifest = export(args.checkpoint, args.out_dir, args.dtype or "fp32", args.tokenizer, args.name)
    for name, f in manifest["files"].items():
        print(f"{f['md5']}  {f['bytes']:>10,}  {name}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return stage.run(lambda: export_one(args) if args.checkpoint else export_stage(args), ERRORS)


if __name__ == "__main__":
    sys.exit(main())
