"""The export_gguf gate: model.gguf of each export, read back, equals its safetensors and config.json.

Its own gate (not part of closed_loop): it judges a different file with no engine run, and it covers
both exports, so the pinned GGUF is checked against its tensors as well as against its blessed md5.
"""

from __future__ import annotations

from html import escape

from gates.judges.gate import Gate, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, passed
from gates.reading.exports import GGUF_EXPORTS as EXPORTS
from gates.reading.exports import GGUF_FILE, GgufReadBack, read_export_gguf, read_export_gguf_picture
from gates.reading.exports import GGUF_READ as READ

__all__ = ["EXPORTS", "GATE", "READ", "export_gguf", "export_gguf_picture"]


def export_gguf(read_back: tuple[GgufReadBack, ...]) -> Outcome:
    problems, tensors = [], 0
    for r in read_back:
        if r.missing:
            problems.append(f"exports/{r.name}: {', '.join(r.missing)} missing (re-run `dvc repro export`)")
            continue
        if r.unreadable is not None:
            problems.append(f"exports/{r.name}: cannot be read back: {r.unreadable}")
            continue
        tensors += r.tensors
        problems += [f"exports/{r.name}/{GGUF_FILE}: {p}" for p in r.problems]
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
        f"{tensors} tensors in {len(read_back)} GGUF files equal their safetensors; metadata equals "
        f"config.json and tokenizer.json",
    )


def export_gguf_picture(read_back: tuple[GgufReadBack, ...], t: Thresholds) -> Picture:
    rows = []
    for r in read_back:
        problems = r.problems
        verdict = (
            "<span class='ok'>equal</span>"
            if not problems
            else f"<span class='bad'>{len(problems)} problems</span>"
        )
        first = escape(problems[0]) if problems else "-"
        rows.append(
            f"<tr><td>exports/{r.name}/model.gguf</td><td>{r.tensors}</td><td>{verdict}</td>"
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
    read=read_export_gguf,
    judge=lambda r, t: export_gguf(r),
    why="llama.cpp users get the GGUF, not the safetensors: it must hold the same model",
    investigate="the message names the tensor or key; xtrain/export/gguf_file.py writes them, "
    "gguf.constants MODEL_ARCH.QWEN3 names them",
    takes=(),
    picture=export_gguf_picture,
    read_for_picture=read_export_gguf_picture,
)
