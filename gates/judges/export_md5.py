"""Export gates: the pinned re-export vs the registry (one comparison with `registry verify`).

fresh_train and closed_loop have modules of their own."""

from __future__ import annotations

from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, passed
from gates.reading.exports import ExportMd5Records, read_export_md5, read_export_md5_picture


def export_md5(r: ExportMd5Records) -> Outcome:
    """exports/pinned against its blessed version (read_export_md5 refused an edited export or checkpoint)."""
    if r.pinned is None:
        return failed(None, "equal", f"{r.registry_problem}")
    p = r.pinned
    bad = [c for c in (*p.files, p.source) if not c.ok]
    measured = f"{len(p.files) - len([c for c in p.files if not c.ok])}/{len(p.files)} files equal"
    where = f"{r.model} v{p.version} ({r.dtype})"
    if not bad:
        return passed(measured, "equal", f"re-export of the pinned checkpoint reproduces {where}")
    diffs = "; ".join(
        f"{c.name}: expected {c.expected or '(absent)'}, got {c.actual or '(absent)'}" for c in bad
    )
    return failed(
        measured,
        "equal",
        f"exports/pinned differs from {where}: {diffs}. The exporter's output "
        f"changed. Next: python -m registry verify exports/pinned; if the change is intended, "
        f"python -m registry bless --reason '...'",
    )


def export_md5_picture(r: ExportMd5Records, t: Thresholds) -> Picture:
    from gates.judges.pictures import md5_table

    if r.pinned is None:  # the gate's own selection: the pinned model's latest version in this dtype
        raise NoPicture(f"{r.registry_problem}")
    where = f"{r.pinned.model} v{r.pinned.version}"
    return Picture(
        md5_table([*r.pinned.files, r.pinned.source], f"blessed md5 ({where})"),
        f"Each file of exports/pinned against the md5 blessed in {where}. Pass: every row equal.",
    )


GATE = Gate(
    id="export_md5",
    checks="the re-export of the registry's pinned checkpoint against the md5s of its blessed version",
    threshold=lambda t: "every file equal",
    read=read_export_md5,
    judge=lambda r, t: export_md5(r),
    why="the export must be byte-deterministic on any machine, even where fresh training is not bitwise",
    investigate="python -m registry verify exports/pinned lists each file's expected and actual md5; "
    "config.json changes come from xtrain/export/hf_folder.py, model.safetensors from dtype or tensor "
    "naming; bless an intended change with python -m registry bless --reason '...'",
    takes=(),
    picture=export_md5_picture,
    read_for_picture=read_export_md5_picture,
)
