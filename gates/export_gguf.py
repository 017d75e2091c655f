"""The export_gguf gate: model.gguf of each export, read back, equals its safetensors and config.json.

Its own gate (not part of closed_loop): it judges a different file with no engine run, and it covers
both exports, so the pinned GGUF is checked against its tensors as well as against its blessed md5.
"""

from __future__ import annotations

from contracts.gguf_check import GGUF_FILE, check_gguf
from gates.artifacts import Artifacts
from gates.outcome import Outcome, failed, passed

EXPORTS = ("fresh", "pinned")
READ = (GGUF_FILE, "model.safetensors", "config.json", "tokenizer.json")


def export_gguf(a: Artifacts) -> Outcome:
    problems, tensors = [], 0
    for name in EXPORTS:
        folder = a.folder(f"exports/{name}", "export")
        missing = [f for f in READ if f not in folder]
        if missing:
            problems.append(f"exports/{name}: {', '.join(missing)} missing (re-run `dvc repro export`)")
            continue
        try:
            result = check_gguf(a.root / "exports" / name)
        except (ValueError, KeyError) as e:  # a corrupt file of the export: the export failed
            problems.append(f"exports/{name}: cannot be read back: {str(e).replace(f'{a.root}/', '')}")
            continue
        tensors += result["tensors_compared"]
        problems += [f"exports/{name}/{GGUF_FILE}: {p}" for p in result["problems"]]
    if problems:
        return failed(
            f"{len(problems)} problems",
            "every tensor bitwise, metadata equal",
            "; ".join(problems[:8]) + ". Next: xtrain/gguf_export.py (names, types, metadata) and "
            "python -c 'from contracts.gguf_check import check_gguf; ...' on the export",
        )
    return passed(
        "equal",
        "every tensor bitwise, metadata equal",
        f"{tensors} tensors in {len(EXPORTS)} GGUF files equal their safetensors; metadata equals "
        f"config.json and tokenizer.json",
    )
