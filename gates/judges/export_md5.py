"""Export gates: the pinned re-export vs the registry (one comparison with `registry verify`).

fresh_train and closed_loop have modules of their own."""

from __future__ import annotations

from typing import Any

from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, passed
from gates.reading.artifacts import ArtifactError, Artifacts
from registry.store import Entry, Registry, RegistryError, check_export, compare_files

MANIFEST = "manifest.json"


def read_manifest(a: Artifacts, name: str) -> dict[str, Any]:
    """exports/<name>/manifest.json, schema-checked."""
    return a.json(f"exports/{name}/{MANIFEST}", "manifest.schema.json", "export")


def registry_of(a: Artifacts) -> Registry:
    """The registry the gates judge against: registry/ of the judged tree."""
    return Registry(a.root / "registry")


def _record(a: Artifacts, entry: Entry) -> None:
    a.record(str(entry.path.relative_to(a.root)), entry.path)


def export_problems(rel: str, manifest: dict[str, Any], files: dict[str, str]) -> list[str]:
    """The export folder's files against its own manifest (names and md5s)."""
    listed = {name: f["md5"] for name, f in manifest["files"].items()}
    return [
        f"{rel}/{c.name}: md5 {c.actual or '(absent)'}, its manifest lists {c.expected or '(absent)'}"
        for c in compare_files(listed, files)
        if not c.ok
    ]


def pinned_problems(a: Artifacts, reg: Registry, model: str) -> list[str]:
    """The pinned checkpoint's files against the md5s its (sealed) pin.json recorded."""
    pin = reg.pin(model)
    out = []
    for name, key in (
        ("model.safetensors", "model_md5"),
        ("state.json", "state_md5"),
        ("tokenizer.json", "tokenizer_md5"),
    ):
        path = reg.pinned_dir(model) / name
        actual = a.record(str(path.relative_to(a.root)), path) if path.exists() else None
        if actual != pin[key]:
            out.append(
                f"registry/pinned/{model}/{name}: md5 {actual or '(absent)'}, pin.json recorded {pin[key]}"
            )
    return out


def export_md5(a: Artifacts) -> Outcome:
    manifest = read_manifest(a, "pinned")
    actual = a.folder("exports/pinned", "export", exclude=(MANIFEST,))
    reg = registry_of(a)
    model, dtype = a.params["export"]["pinned_model"], a.params["export"]["dtype"]
    problems = pinned_problems(a, reg, model) + export_problems("exports/pinned", manifest, actual)
    if manifest["dtype"] != dtype:
        problems.append(f"exports/pinned is {manifest['dtype']}, params.yaml export.dtype is {dtype}")
    if problems:
        raise ArtifactError(
            "; ".join(problems) + " (re-export with dvc repro export, or restore the registry)"
        )
    try:
        result = check_export(reg, model, manifest, actual)
    except RegistryError as e:
        return failed(None, "equal", f"{e}")
    _record(a, result.entry)
    checks = [*result.files, result.source]
    bad = [c for c in checks if not c.ok]
    measured = (
        f"{len(result.files) - len([c for c in result.files if not c.ok])}/{len(result.files)} files equal"
    )
    where = f"{model} v{result.entry.version} ({dtype})"
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


def export_md5_picture(a: Artifacts, t: Thresholds) -> Picture:
    from gates.judges.pictures import md5_table

    manifest = read_manifest(a, "pinned")
    actual = a.folder("exports/pinned", "export", exclude=(MANIFEST,))
    try:  # the gate's own selection: the pinned model's latest version in this dtype
        result = check_export(registry_of(a), a.params["export"]["pinned_model"], manifest, actual)
    except RegistryError as e:
        raise NoPicture(str(e)) from None
    checks, entry = [*result.files, result.source], result.entry
    where = f"{entry.data['model']} v{entry.version}"
    return Picture(
        md5_table(checks, f"blessed md5 ({where})"),
        f"Each file of exports/pinned against the md5 blessed in {where}. Pass: every row equal.",
    )


GATE = Gate(
    id="export_md5",
    checks="the re-export of the registry's pinned checkpoint against the md5s of its blessed version",
    threshold=lambda t: "every file equal",
    judge=lambda a, t: export_md5(a),
    why="the export must be byte-deterministic on any machine, even where fresh training is not bitwise",
    investigate="python -m registry verify exports/pinned lists each file's expected and actual md5; "
    "config.json changes come from xtrain/export/hf_folder.py, model.safetensors from dtype or tensor "
    "naming; bless an intended change with python -m registry bless --reason '...'",
    takes=(),
    picture=export_md5_picture,
)
