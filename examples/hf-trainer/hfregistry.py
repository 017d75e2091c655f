"""The example's registry: pinned weights and the md5s that save_pretrained of them must give.

    python3 hfregistry.py check                      # stage md5: exports/pinned vs hf_registry/md5.json
    python3 hfregistry.py bless --reason "why"      # pin runs/single's final weights, record their md5s

Fresh training is bitwise only on one machine (docs/environments.md), so the registry pins weights
and checks what the export path (Qwen3Config + save_pretrained, safetensors) makes of them: that is
machine-independent, and moves when transformers changes how it writes config.json or tensors.
Exit 0 equal, 1 a file differs, 2 no blessed version or bad input.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import hfconfig
import torch
import transformers
from safetensors.torch import load_file
from transformers import Qwen3Config, Qwen3ForCausalLM

REG = Path("hf_registry")
PINNED, MD5 = REG / "pinned.safetensors", REG / "md5.json"


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def export(weights: Path, out: Path) -> dict[str, str]:
    """save_pretrained of `weights` into `out`; every file's md5."""
    p = hfconfig.load()
    vocab = json.loads(Path("data/tokens.json").read_text())["vocab_size"]
    model = Qwen3ForCausalLM(Qwen3Config(**hfconfig.qwen3_kwargs(p, vocab)))
    model.load_state_dict(load_file(str(weights)), strict=True)
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)
    return {f.name: md5(f) for f in sorted(out.iterdir()) if f.is_file()}


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def check() -> int:
    if not MD5.is_file() or not PINNED.is_file():
        print(
            f"error: {MD5}: missing: nothing blessed (python3 hfregistry.py bless --reason '...')",
            file=sys.stderr,
        )
        return 2
    blessed = json.loads(MD5.read_text())
    got = export(PINNED, Path("exports/pinned"))
    want = blessed["files"]
    rows = [
        {"file": n, "expected": want.get(n), "actual": got.get(n)} for n in sorted(want.keys() | got.keys())
    ]
    bad = [r for r in rows if r["expected"] != r["actual"]]
    ver = f"blessed with transformers {blessed['transformers']}, now {transformers.__version__}"
    write_json(Path("reports/md5.json"), {"passed": not bad, "files": rows, "versions": ver})
    if bad:
        names = ", ".join(f"{r['file']} {r['actual']} vs blessed {r['expected']}" for r in bad)
        print(
            f"md5: exports/pinned differs from hf_registry: {names} ({ver}); bless an intended change "
            f"with python3 hfregistry.py bless --reason '...'",
            file=sys.stderr,
        )
        return 1
    print(f"md5: {len(rows)} files of exports/pinned equal hf_registry/md5.json ({ver})")
    return 0


def bless(reason: str) -> int:
    if len(reason.strip()) < 10:
        print("error: --reason: at least 10 characters: say why", file=sys.stderr)
        return 2
    run = Path("runs/single/checkpoints")
    weights = run / (run / "latest").read_text().strip() / "model.safetensors"
    old = json.loads(MD5.read_text())["files"] if MD5.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp:
        files = export(weights, Path(tmp) / "export")
    REG.mkdir(exist_ok=True)
    shutil.copyfile(weights, PINNED)
    write_json(
        MD5,
        {
            "files": files,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "reason": reason,
            "pinned_md5": md5(PINNED),
        },
    )
    for name in sorted(files.keys() | old.keys()):
        if files.get(name) != old.get(name):
            print(f"{name}: {old.get(name, '(absent)')} -> {files.get(name, '(absent)')}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check")
    b = sub.add_parser("bless")
    b.add_argument("--reason", required=True)
    a = ap.parse_args()
    try:
        return check() if a.cmd == "check" else bless(a.reason)
    except hfconfig.ParamsError as e:
        print(e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
