"""Export folders as plain records: the manifest, the md5 of every file, each GGUF read back, the
closed loop's report; and the records of the gates that judge them (export_md5, export_gguf,
closed_loop, fresh_train). Every file those gates look at is read here, once.

An export folder that disagrees with its own manifest (a file edited or added after the export) is an
ArtifactError here, as it was in the gates: nothing is judged on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.gguf_check import GGUF_FILE, check_gguf
from gates.reading import expect
from gates.reading.artifacts import ArtifactError, Artifacts
from gates.reading.registry_records import (
    GoldenChoice,
    PinnedExport,
    blessed_export,
    golden_for,
    pinned_problems,
    registry_of,
)
from params.config import Params
from registry.store import compare_files

MANIFEST = "manifest.json"
GGUF_EXPORTS = ("fresh", "pinned")  # the exports whose model.gguf export_gguf reads back
GGUF_READ = (GGUF_FILE, "model.safetensors", "config.json", "tokenizer.json")


def read_manifest(a: Artifacts, name: str) -> dict[str, Any]:
    """exports/<name>/manifest.json, schema-checked."""
    return a.json(f"exports/{name}/{MANIFEST}", "manifest.schema.json", "export")


def export_problems(rel: str, manifest: dict[str, Any], files: dict[str, str]) -> list[str]:
    """The export folder's files against its own manifest (names and md5s)."""
    listed = {name: f["md5"] for name, f in manifest["files"].items()}
    return [
        f"{rel}/{c.name}: md5 {c.actual or '(absent)'}, its manifest lists {c.expected or '(absent)'}"
        for c in compare_files(listed, files)
        if not c.ok
    ]


@dataclass(frozen=True)
class ExportFolder:
    """exports/<name>: its manifest and the md5 of every other file in it."""

    manifest: dict[str, Any]
    files: dict[str, str]  # file name -> md5, the manifest left out


def read_export(a: Artifacts, name: str) -> ExportFolder:
    return ExportFolder(read_manifest(a, name), a.folder(f"exports/{name}", "export", exclude=(MANIFEST,)))


# ---- export_md5 --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportMd5Records:
    model: str  # params.yaml export.pinned_model
    dtype: str  # params.yaml export.dtype
    pinned: PinnedExport | None  # exports/pinned against its blessed version
    registry_problem: str | None  # why the registry has no version to compare with


def read_export_md5(a: Artifacts, t: dict[str, Any]) -> ExportMd5Records:
    """exports/pinned, the pinned checkpoint against its pin.json, and the blessed version to compare.
    The checkpoint or the export edited since (or the export in another dtype than params.yaml's) is an
    ArtifactError: nothing to judge."""
    export = read_export(a, "pinned")
    reg = registry_of(a)
    model, dtype = a.params["export"]["pinned_model"], a.params["export"]["dtype"]
    problems = pinned_problems(a, reg, model) + export_problems(
        "exports/pinned", export.manifest, export.files
    )
    if export.manifest["dtype"] != dtype:
        problems.append(f"exports/pinned is {export.manifest['dtype']}, params.yaml export.dtype is {dtype}")
    if problems:
        raise ArtifactError(
            "; ".join(problems) + " (re-export with dvc repro export, or restore the registry)"
        )
    pinned, problem = blessed_export(a, reg, model, export.manifest, export.files)
    return ExportMd5Records(model, dtype, pinned, problem)


def read_export_md5_picture(a: Artifacts, t: dict[str, Any]) -> ExportMd5Records:
    """The picture's selection: the pinned model's latest version in the export's dtype, as it stands."""
    export = read_export(a, "pinned")
    model = a.params["export"]["pinned_model"]
    pinned, problem = blessed_export(a, registry_of(a), model, export.manifest, export.files)
    return ExportMd5Records(model, a.params["export"]["dtype"], pinned, problem)


# ---- export_gguf -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GgufReadBack:
    """exports/<name>/model.gguf read back (contracts/gguf_check.py) against its safetensors and config."""

    name: str  # fresh | pinned
    missing: tuple[str, ...] = ()  # files the read-back needs that the export lacks (nothing read back)
    unreadable: str | None = None  # a corrupt file: why it cannot be read back (paths relative)
    tensors: int = 0  # tensors compared
    problems: tuple[str, ...] = ()  # every difference the read-back found


def read_gguf(a: Artifacts, name: str) -> GgufReadBack:
    folder = a.folder(f"exports/{name}", "export")
    missing = tuple(f for f in GGUF_READ if f not in folder)
    if missing:
        return GgufReadBack(name, missing)
    try:
        result = check_gguf(a.root / "exports" / name)
    except (ValueError, KeyError) as e:  # a corrupt file of the export: the export failed
        return GgufReadBack(name, unreadable=str(e).replace(f"{a.root}/", ""))
    return GgufReadBack(name, tensors=result["tensors_compared"], problems=tuple(result["problems"]))


def read_export_gguf(a: Artifacts, t: dict[str, Any]) -> tuple[GgufReadBack, ...]:
    return tuple(read_gguf(a, name) for name in GGUF_EXPORTS)


def read_export_gguf_picture(a: Artifacts, t: dict[str, Any]) -> tuple[GgufReadBack, ...]:
    """Each GGUF read back as it stands (the picture shows what is there, edited or not)."""
    out = []
    for name in GGUF_EXPORTS:
        result = check_gguf(a.root / "exports" / name)
        out.append(GgufReadBack(name, tensors=result["tensors_compared"], problems=tuple(result["problems"])))
    return tuple(out)


# ---- closed_loop -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClosedLoopRecords:
    report: dict[str, Any]  # reports/closed_loop.json
    export: ExportFolder  # exports/fresh
    params: dict[str, Any] | None  # the resolved params' closed_loop section (None: no params.yaml)


def read_closed_loop(a: Artifacts, t: dict[str, Any]) -> ClosedLoopRecords:
    report = a.json("reports/closed_loop.json", "closed_loop.schema.json", "closed_loop")
    export = read_export(a, "fresh")
    # the resolved params the check was given (--params), like every gate
    return ClosedLoopRecords(report, export, None if a.params is None else a.params["closed_loop"])


def read_closed_loop_picture(a: Artifacts, t: dict[str, Any]) -> ClosedLoopRecords:
    """The report alone (the picture draws it; the export is the verdict's)."""
    report = a.json("reports/closed_loop.json", "closed_loop.schema.json", "closed_loop")
    return ClosedLoopRecords(
        report,
        ExportFolder({}, {}),  # pragma: no mutate -- equivalent: the picture draws no export
        None if a.params is None else a.params["closed_loop"],
    )


# ---- fresh_train -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FreshTrainRecords:
    """runs/single, its record's contradictions, exports/fresh's md5s and the golden chosen for it."""

    run: dict[str, Any]  # runs/single/metrics.json
    refused: tuple[str, ...]  # the record against itself and params.yaml (gates/reading/expect.py)
    describes_runs: bool  # params.yaml describes the runs (our pipeline); else the records are the truth
    files: dict[str, str] | None = None  # exports/fresh's md5s; None: the pipeline has no export stage
    own_project: bool = False  # a project of its own leaving gates.fresh_train to the harness
    choice: GoldenChoice | None = None  # None: refused before the registry was read


def export_files(a: Artifacts) -> dict[str, str] | None:
    """exports/fresh's files (md5 each), checked against its manifest; None for a project whose
    pipeline has no export stage (a trainer of its own: its golden is the run alone)."""
    if not a.lock.in_pipeline("export"):
        return None
    export = read_export(a, "fresh")
    edited = export_problems("exports/fresh", export.manifest, export.files)
    if edited:
        raise ArtifactError("; ".join(edited) + " (re-export with dvc repro export)")
    return export.files


def own_project(params: Params | None) -> bool:
    """A project of its own (params.yaml not describing runs) that leaves gates.fresh_train to the
    harness's defaults: not held to our pipeline's 'fail' without a golden before it has blessed any."""
    return params is not None and not params.describes_runs and "fresh_train" in params.defaults


def read_fresh_train(a: Artifacts, t: dict[str, Any], refuse: bool = True) -> FreshTrainRecords:
    """Everything fresh_train judges, in the order it used to look: a refused run stops the reading
    (`refuse=False`: the picture's, which draws a refused run too)."""
    m = a.json("runs/single/metrics.json", "metrics.schema.json", "train_single")
    params = a.params
    describes = params is not None and params.describes_runs
    refused = tuple(expect.run_problems(params, "single", m))
    if refused and refuse:
        return FreshTrainRecords(m, refused, describes)
    files = export_files(a)
    return FreshTrainRecords(m, refused, describes, files, own_project(params), golden_for(a, m))


def read_fresh_train_picture(a: Artifacts, t: dict[str, Any]) -> FreshTrainRecords:
    return read_fresh_train(a, t, refuse=False)  # pragma: no mutate -- equivalent: t unused, None is False
