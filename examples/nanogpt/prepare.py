"""Character-level data for the showcase, from a text on disk: data/showcase_char/{train,val}.bin, meta.pkl.

nanoGPT's data/shakespeare_char/prepare.py downloads tinyshakespeare; this makes the same three files
(uint16 character ids, 90 % train / 10 % validation, meta.pkl with vocab_size, itos, stoi) from a local
UTF-8 text, so the example runs offline. The default text is the vendored model.py, configurator.py and
LICENSE (files this example never edits: the data does not move when train.py does).

    python3 prepare.py [--input FILE] [--out data/showcase_char]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_TEXT = ("model.py", "configurator.py", "LICENSE")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, help="a UTF-8 text (default: the vendored sources)")
    ap.add_argument("--out", type=Path, default=HERE / "data" / "showcase_char")
    args = ap.parse_args(argv)
    paths = [args.input] if args.input else [HERE / name for name in DEFAULT_TEXT]
    try:
        text = "".join(p.read_text(encoding="utf-8") for p in paths)
    except (OSError, UnicodeDecodeError) as e:
        print(f"error: {e}; next: give --input a readable UTF-8 text", file=sys.stderr)
        return 2
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    cut = int(len(ids) * 0.9)
    args.out.mkdir(parents=True, exist_ok=True)
    ids[:cut].tofile(args.out / "train.bin")
    ids[cut:].tofile(args.out / "val.bin")
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}
    with open(args.out / "meta.pkl", "wb") as f:
        pickle.dump(meta, f)
    print(f"{len(text):,} characters, vocab {len(chars)}: train {cut:,}, val {len(ids) - cut:,} -> {args.out.relative_to(HERE) if args.out.is_relative_to(HERE) else args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
