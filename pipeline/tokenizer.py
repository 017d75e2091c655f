"""Stage `tokenizer`: BPE trained on the train split -> data/tokenizer.json, data/tokens.safetensors."""

from __future__ import annotations

import sys
from pathlib import Path

from contracts import outputs
from contracts.fileio import atomic_write_json, md5_file
from contracts.validate import load_json
from params.project import load_sections
from pipeline import stage
from xtrain.core.corpus import load_split
from xtrain.core.tokenizer import encode_text, save_tokenizer, save_tokens, train_tokenizer


def main(argv: list[str] | None = None) -> int:
    ap = stage.parser(__doc__ or "")
    outputs.output_flag(ap.add_argument("--data", default="data"), outputs.DATA_FOLDER)
    args = ap.parse_args(argv)

    def body() -> None:
        outputs.check(args.data, outputs.DATA_FOLDER)  # it writes tokenizer.json and tokens there
        params = load_sections(args.params, args.overrides, ("tokenizer",))  # a project file: this only
        data = Path(args.data)
        meta = load_json(str(data / "corpus.json"))
        tp = params["tokenizer"]
        train_text = load_split(data / "corpus.txt", meta, "train")
        tok = train_tokenizer(train_text, tp["vocab_size"], tp["min_frequency"])
        save_tokenizer(tok, data / "tokenizer.json")
        train = encode_text(tok, train_text)
        val = encode_text(tok, load_split(data / "corpus.txt", meta, "val"))
        save_tokens(data / "tokens.safetensors", train, val)
        summary = {
            "vocab_size": tok.get_vocab_size(),
            "train_tokens": train.size,
            "val_tokens": val.size,
            "chars_per_token": meta["split"]["train"]["characters"] / max(1, train.size),
            "tokenizer_md5": md5_file(data / "tokenizer.json"),
        }
        atomic_write_json(data / "tokens.json", summary)
        print(
            f"tokenizer: vocab {summary['vocab_size']}, train {summary['train_tokens']:,} tokens, "
            f"val {summary['val_tokens']:,} tokens, {summary['chars_per_token']:.2f} chars/token"
        )

    return stage.run(body)


if __name__ == "__main__":
    sys.exit(main())
