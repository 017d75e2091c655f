"""Export gates: pinned re-export vs the registry (one comparison with `registry verify`), the closed loop."""

from __future__ import annotations

from typing import Any

from gates.artifacts import ArtifactError, Artifacts
from gates.outcome import Outcome, failed, fmt, passed
from registry.store import Entry, Registry, RegistryError, check_export, compare_files

MANIFEST = "manifest.json"


def _manifest(a: Artifacts, name: str) -> dict[str, Any]:
    return a.json(f"exports/{name}/{MANIFEST}", "manifest.schema.json", "export")


def _registry(a: Artifacts) -> Registry:
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
    manifest = _manifest(a, "pinned")
    actual = a.folder("exports/pinned", "export", exclude=(MANIFEST,))
    reg = _registry(a)
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


def closed_loop(a: Artifacts) -> Outcome:
    r = a.json("reports/closed_loop.json", "closed_loop.schema.json", "closed_loop")
    files = a.folder("exports/fresh", "export", exclude=(MANIFEST,))
    c, n = r["check"], r["negative_control"]
    changed = [name for name, md5 in r["export_files"].items() if files.get(name) != md5]
    if changed:
        return failed(
            c["logits_max_abs_diff"],
            c["logits_atol"],
            f"exports/fresh changed since the closed loop "
            f"verified it ({', '.join(changed)}): re-run `dvc repro closed_loop`, or find what "
            f"rewrote the export",
        )
    if n["passed"]:
        return failed(
            c["logits_max_abs_diff"],
            c["logits_atol"],
            f"the negative control passed: perturbing "
            f"{n['perturbed_tensor']} went unnoticed, so the check cannot fail",
        )
    if not (r["passed"] and c["passed"]):
        return failed(
            c["logits_max_abs_diff"],
            c["logits_atol"],
            "; ".join(r["failures"]) + ". Next: "
            "reports/closed_loop.json samples (first_mismatch), and config.json vs the model config",
        )
    return passed(
        c["logits_max_abs_diff"],
        f"< {c['logits_atol']:g}, tokens equal",
        f"transformers {r['transformers_version']} reproduces "
        f"logits (max abs diff {fmt(c['logits_max_abs_diff'])}) and {c['tokens_compared']} greedy tokens; "
        f"negative control caught (diff {fmt(n['logits_max_abs_diff'])})",
    )
