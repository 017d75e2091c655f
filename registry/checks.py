"""What the registry takes in is checked before anything is written (torch-free).

Names (model, env_id) match one strict pattern and every path they make stays inside the
registry; a pinned checkpoint is valid safetensors whose md5 its state.json recorded; an export
is blessed only if its files equal its manifest; `validate` reads every registry file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from contracts.fileio import md5_file
from contracts.validate import ValidationError, json_path, load_json, non_finite
from registry.store import MANIFEST, Registry, RegistryError, export_files

NAME = re.compile(r"[a-z0-9][a-z0-9._+-]{0,99}")  # fullmatch: `$` would let a trailing newline in
NAME_RULE = f"pattern {NAME.pattern}"
PINNED_FILES = ("model.safetensors", "state.json", "tokenizer.json")


def check_name(name: Any, source: str, key: str) -> str:
    """A model name or env_id that can only ever name one folder inside the registry."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValidationError(source, key, f"{name!r} is not a valid registry name", NAME_RULE)
    return name


def inside(root: Path, path: Path) -> Path:
    """`path`, refused unless it resolves to somewhere inside `root`."""
    resolved, base = Path(path).resolve(), Path(root).resolve()
    if not resolved.is_relative_to(base):
        raise RegistryError(f"{path}: resolves to {resolved}, outside the registry {base}: refused")
    return path


def check_safetensors(path: Path) -> None:
    """A complete, parseable safetensors file (plain text, truncation or a foreign format are refused)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            if not list(f.keys()):
                raise ValidationError(str(path), "", "holds no tensors", "a non-empty safetensors file")
    except (SafetensorError, OSError) as e:
        raise ValidationError(str(path), "", f"not a valid safetensors file: {e}", "safetensors") from e


def check_finite(metrics: dict[str, Any], source: str) -> dict[str, Any]:
    """A run record a golden or baseline may be blessed from: no NaN or infinity anywhere in it. The gates
    fail any non-finite number in metrics.json, and a blessed file is never taken back: a golden of a
    NaN loss would fail every later check ("golden nan") with no way out."""
    if (bad := non_finite(metrics)) is not None:
        key, value = bad
        raise ValidationError(
            source,
            json_path(key),
            f"{value} is not a finite number: the gates fail this run, and a blessing is never taken back",
            "a finite run record",
            "fix the run and re-run it (dvc repro), then bless",
        )
    return metrics


def check_checkpoint(ckpt: Path) -> dict[str, Any]:
    """A checkpoint fit to pin: its files present, its weights valid and equal to what state.json recorded."""
    for name in PINNED_FILES:
        if not (ckpt / name).is_file():
            raise ValidationError(str(ckpt / name), "", "missing", "a complete checkpoint directory")
    state = load_json(str(ckpt / "state.json"))
    if not isinstance(state, dict) or not isinstance(state.get("model_md5"), str):
        raise ValidationError(str(ckpt / "state.json"), "model_md5", "missing", "a checkpoint state.json")
    check_safetensors(ckpt / "model.safetensors")
    if (actual := md5_file(ckpt / "model.safetensors")) != state["model_md5"]:
        raise ValidationError(
            str(ckpt / "model.safetensors"),
            "model_md5",
            f"content md5 {actual} differs from the {state['model_md5']} state.json recorded",
            "an undamaged checkpoint",
        )
    return state


def check_against_manifest(export_dir: Path, manifest: dict[str, Any]) -> dict[str, str]:
    """The export's files (md5 each), refused unless they are exactly the files its manifest lists."""
    actual = export_files(export_dir)
    listed = manifest["files"]
    for name in sorted(set(actual) | set(listed)):
        where = str(export_dir / name)
        if name not in listed:
            raise ValidationError(where, "", "not listed in manifest.json", "exactly the manifest's files")
        if name not in actual:
            raise ValidationError(
                where, "", "listed in manifest.json but missing", "exactly the manifest's files"
            )
        size = (export_dir / name).stat().st_size
        if actual[name] != listed[name]["md5"] or size != listed[name]["bytes"]:
            raise ValidationError(
                where,
                f"{MANIFEST} files.{name}",
                f"md5 {actual[name]} ({size} bytes) differs from the manifest's "
                f"{listed[name]['md5']} ({listed[name]['bytes']} bytes)",
                "files unchanged since export (re-export instead of editing)",
            )
    return actual


def check_pinned(reg: Registry, model: str) -> int:
    """pin.json valid and every pinned file equal to the md5 it records; returns files checked."""
    folder = reg.pinned_dir(model)
    pin = reg.pin(model)
    for name, key in zip(
        PINNED_FILES,
        ("model_md5", "state_md5", "tokenizer_md5"),
        strict=True,  # pragma: no mutate -- equivalent: two constant tuples of three
    ):
        f = folder / name
        if not f.is_file() or md5_file(f) != pin[key]:
            raise ValidationError(str(f), key, "missing or differs from pin.json", f"md5 {pin[key]}")
    check_safetensors(folder / "model.safetensors")
    if pin["model"] != model:
        raise ValidationError(
            str(folder / "pin.json"), "model", f"{pin['model']!r} is not the folder name {model!r}"
        )
    return 1 + len(PINNED_FILES)


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def validate_everything(reg: Registry) -> int:
    """Read and check every file under models/, goldens/, baselines/ and pinned/; unknown files are errors."""
    reg.verify_index()  # first: a deleted, extra or altered file is named before anything is read
    n = 0
    for kind in ("models", "goldens", "baselines", "pinned"):
        for name in _names(reg.root / kind):
            folder = reg.root / kind / name
            check_name(name, str(folder), "folder name")
            if kind == "pinned":
                n += check_pinned(reg, name)
                expected = {"pin.json", *PINNED_FILES}
            else:  # reading checks the schema, the seal and the folder name (registry.store)
                read = {"models": reg.versions, "goldens": reg.goldens, "baselines": reg.baselines}[kind]
                entries = read(name)
                n += len(entries)
                expected = {e.path.name for e in entries}
            if strays := sorted(set(_names(folder)) - expected):
                rule = "only " + ", ".join(sorted(expected)) if expected else "no other files"
                raise ValidationError(str(folder / strays[0]), "", "unknown file in the registry", rule)
    return n
