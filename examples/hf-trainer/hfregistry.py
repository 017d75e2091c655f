"""The example's registry: pinned weights and the md5s that save_pretrained of them must give.

    python3 hfregistry.py check                      # stage md5: exports/pinned vs hf_registry/md5.json
    python3 hfregistry.py bless --reason "why"      # pin runs/single's final weights, record their md5s

Fresh training is bitwise only on one machine (docs/environments.md), so the registry pins weights
and checks what the export path (Qwen3Config + save_pretrained, safetensors) makes of them: that is
machine-independent, and moves when transformers changes how it writes config.json or tensors. The
`transformers_version` that save_pretrained writes into config.json and generation_config.json is set
aside (hfblessing.py): a new transformers release alone moves no verdict; any other byte still does.
Exit 0 equal, 1 a file differs, 2 no blessed version or bad input.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import hfblessing
import hfconfig
import torch
import transformers
from safetensors.torch import load_file
from transformers import Qwen3Config, Qwen3ForCausalLM

from contracts.fileio import atomic_write_json, md5_file

REG = Path("hf_registry")
PINNED, MD5 = REG / "pinned.safetensors", REG / "md5.json"


def export(weights: Path, out: Path) -> None:
    """save_pretrained of `weights` into `out`."""
    p = hfconfig.load()
    vocab = json.loads(Path("data/tokens.json").read_text())["vocab_size"]
    model = Qwen3ForCausalLM(Qwen3Config(**hfconfig.qwen3_kwargs(p, vocab)))
    model.load_state_dict(load_file(str(weights)), strict=True)
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)


def check() -> int:
    if not MD5.is_file() or not PINNED.is_file():
        print(
            f"error: {MD5}: missing: nothing blessed (python3 hfregistry.py bless --reason '...')",
            file=sys.stderr,
        )
        return 2
    blessed = json.loads(MD5.read_text())
    hfblessing.entries(blessed)  # a blessing that cannot be read fails before the export
    export(PINNED, Path("exports/pinned"))
    rows = hfblessing.compare(blessed, Path("exports/pinned"))
    passed = all(r.ok for r in rows)
    ver = f"blessed with transformers {blessed.get('transformers')}, now {transformers.__version__}"
    Path("reports").mkdir(exist_ok=True)
    atomic_write_json(
        "reports/md5.json", {"passed": passed, "files": [asdict(r) for r in rows], "versions": ver}
    )
    print(hfblessing.verdict_line(rows, "exports/pinned", ver), file=sys.stdout if passed else sys.stderr)
    return 0 if passed else 1


def bless(reason: str) -> int:
    if len(reason.strip()) < 10:
        print("error: --reason: at least 10 characters: say why", file=sys.stderr)
        return 2
    run = Path("runs/single/checkpoints")
    weights = run / (run / "latest").read_text().strip() / "model.safetensors"
    old = hfblessing.entries(json.loads(MD5.read_text())) if MD5.is_file() else {}
    with tempfile.TemporaryDirectory() as tmp:
        export(weights, Path(tmp) / "export")
        files = {
            f.name: hfblessing.describe(f) for f in sorted((Path(tmp) / "export").iterdir()) if f.is_file()
        }
    REG.mkdir(exist_ok=True)
    shutil.copyfile(weights, PINNED)
    atomic_write_json(
        MD5,
        {
            "format": hfblessing.FORMAT,
            "files": files,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "reason": reason,
            "pinned_md5": md5_file(PINNED),
        },
    )
    for name in sorted(files.keys() | old.keys()):
        a, b = old.get(name, {}).get("md5", "(absent)"), files.get(name, {}).get("md5", "(absent)")
        if a != b:
            print(f"{name}: {a} -> {b}")
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
    except (hfconfig.ParamsError, hfblessing.BlessingError) as e:
        print(e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
