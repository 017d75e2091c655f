"""Stage `export`: the fresh model (runs/single) -> exports/fresh; the registry's pinned checkpoint -> exports/pinned."""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline import stage
from registry.store import Registry
from xtrain.checkpoint_dir import CheckpointNotFound
from xtrain.export import ExportError, export


def main(argv: list[str] | None = None) -> int:
    ap = stage.parser(__doc__ or "")
    ap.add_argument("--run", default="runs/single")
    ap.add_argument("--out", default="exports")
    args = ap.parse_args(argv)

    def body() -> None:
        params = stage.params_of(args)
        dtype = params["export"]["dtype"]
        pinned = Registry().pinned_dir(params["export"]["pinned_model"])
        model = params["export"]["pinned_model"]
        # The card and GGUF name the model: the pinned one by its pin.json (the default), this run's as -fresh.
        for name, source, title in (("fresh", Path(args.run), f"{model}-fresh"), ("pinned", pinned, None)):
            manifest = export(source, Path(args.out) / name, dtype, name=title)
            print(
                f"export {name} ({dtype}): model.safetensors {manifest['files']['model.safetensors']['md5']}"
            )

    return stage.run(body, (ExportError, CheckpointNotFound))


if __name__ == "__main__":
    sys.exit(main())
