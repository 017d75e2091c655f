"""The export_gguf gate: model.gguf of each export, read back, equals its safetensors and config.json.

Its own gate (not part of closed_loop): it judges a different file with no engine run, and it covers
both exports, so the pinned GGUF is checked against its tensors as well as against its blessed md5.
"""

from __future__ import annotations

from html import escape

from contracts.gguf_check import GGUF_FILE, check_gguf
from gates.judges.gate import Gate, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, passed
from gates.reading.artifacts import Artifacts

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
            "; ".join(problems[:8]) + ". Next: xtrain/export/gguf_file.py (names, types, metadata) and "
            "python -c 'from contracts.gguf_check import check_gguf; ...' on the export",
        )
    return passed(
        "equal",
        "every tensor bitwise, metadata equal",
        f"{tensors} tensors in {len(EXPORTS)} GGUF files equal their safetensors; metadata equals "
        f"config.json and tokenizer.json",
    )


def export_gguf_picture(a: Artifacts, t: Thresholds) -> Picture:
    rows = []
    for name in EXPORTS:
        result = check_gguf(a.root / "exports" / name)
        problems = result["problems"]
        verdict = (
            "<span class='ok'>equal</span>"
            if not problems
            else f"<span class='bad'>{len(problems)} problems</span>"
        )
        first = escape(problems[0]) if problems else "-"
        rows.append(
            f"<tr><td>exports/{name}/model.gguf</td><td>{result['tensors_compared']}</td><td>{verdict}</td>"
            f"<td>{first}</td></tr>"
        )
    table = (
        "<table class='files'><tr><th>file</th><th>tensors compared</th><th>vs safetensors and config.json"
        f"</th><th>first problem</th></tr>{''.join(rows)}</table>"
    )
    return Picture(
        table,
        "Each export's model.gguf read back with GGUFReader: every tensor against model.safetensors (bitwise "
        "for f32), the metadata against config.json and tokenizer.json. Pass: both rows equal.",
    )


GATE = Gate(
    id="export_gguf",
    checks="model.gguf of exports/fresh and exports/pinned, read back with GGUFReader: every tensor "
    "equals model.safetensors (float32 bit patterns), metadata equals config.json and tokenizer.json",
    threshold=lambda t: "every tensor bitwise, metadata equal",
    judge=lambda a, t: export_gguf(a),
    why="llama.cpp users get the GGUF, not the safetensors: it must hold the same model",
    investigate="the message names the tensor or key; xtrain/export/gguf_file.py writes them, "
    "gguf.constants MODEL_ARCH.QWEN3 names them",
    takes=(),
    picture=export_gguf_picture,
)
