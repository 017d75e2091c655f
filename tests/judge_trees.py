"""Small torch-free artifact trees for the judge's unit tests (tests/*/test_judge_*.py).

The gate tree (tests/gate_tree.py) trains real runs and costs a minute; mutation testing runs a
test once per mutant, so the judge's own tests build the few files a gate reads by hand: an export
folder with its manifest, a registry with a pinned checkpoint and sealed versions, and the dvc.lock
entries that record them. Every md5 is computed from the bytes written, as the real writers do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.fileio import md5_file
from gates.reading.artifacts import Artifacts
from gates.reading.dvclock import DvcLock, dir_listing, dir_md5
from registry import index
from registry.sealed import seal
from registry.store import Registry, write_once

PROVENANCE = {
    "env": {"platform": "linux-x86_64", "python": "3.11.7", "torch": "2.13.0+cpu"},
    "env_id": "linux-x86_64-python3.11.7",
    "git_dirty": False,
    "git_revision": "0" * 40,
    "params_hash": "0" * 16,
    "time_utc": "2026-01-01T00:00:00Z",
    "torch": "2.13.0+cpu",
}
EXPORT_FILES = (
    "README.md",
    "config.json",
    "generation_config.json",
    "model.gguf",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
)
PINNED_FILES = ("model.safetensors", "state.json", "tokenizer.json")


def write_export(folder: Path, dtype: str = "fp32", source_md5: str = "c" * 32, salt: str = "") -> dict:
    """An export folder: the seven files (contents from their names) and a manifest listing them."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in EXPORT_FILES:
        (folder / name).write_text(f"{name} {dtype}{salt}\n")
    manifest = {
        "format": "xtrain-export-manifest/1",
        "exporter": "xtrain-export/1",
        "dtype": dtype,
        "architecture": "Qwen3ForCausalLM",
        "files": {
            n: {"md5": md5_file(folder / n), "bytes": (folder / n).stat().st_size} for n in EXPORT_FILES
        },
        "source_checkpoint": {
            "model_md5": source_md5,
            "step": 10,
            "config_hash": "h",
            "param_digest": "d" * 64,
        },
        "n_tensors": 3,
        "n_params": 100,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def write_weights(path: Path, value: float = 1.0) -> None:
    """A small valid safetensors file (numpy: torch-free)."""
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.full((2, 3), value, dtype=np.float32), "b": np.zeros(3, dtype=np.float32)}, str(path))


def make_registry(root: Path, model: str = "tiny") -> Registry:
    """A registry holding `model`'s pinned checkpoint (three small files) and its sealed, indexed pin."""
    pinned = root / "pinned" / model
    pinned.mkdir(parents=True)
    for name in PINNED_FILES:
        (pinned / name).write_text(f"pinned {name}\n")
    write_weights(pinned / "model.safetensors")
    md5 = {name: md5_file(pinned / name) for name in PINNED_FILES}
    pin = {
        "format": "xtrain-registry-pin/1",
        "model": model,
        "model_md5": md5["model.safetensors"],
        "state_md5": md5["state.json"],
        "tokenizer_md5": md5["tokenizer.json"],
        "provenance": PROVENANCE,
        "reason": "a pinned checkpoint for the judge tests",
    }
    write_once(pinned / "pin.json", seal(pin))
    index.create(root)
    return Registry(root)


def bless(reg: Registry, model: str, files: dict[str, str], dtype: str, source_md5: str) -> Path:
    """The next sealed version of `model` with these md5s, added to the index as bless does."""
    folder = reg.root / "models" / model
    path = reg.next_path(folder)
    data = {
        "format": "xtrain-registry-version/1",
        "model": model,
        "version": int(path.stem[1:]),
        "dtype": dtype,
        "exporter": "xtrain-export/1",
        "files": files,
        "source_checkpoint_md5": source_md5,
        "provenance": PROVENANCE,
        "reason": "a version for the judge tests",
    }
    write_once(path, seal(data))
    index.record(reg.root, [path])
    return path


def reindex(reg: Registry, *paths: Path) -> None:
    """Re-seal the index over files changed in place (what the index cannot stop: its own re-sealing)."""
    listed = index.read(reg.root) or {}
    rels = {p.relative_to(reg.root).as_posix() for p in paths}
    index.write(reg.root, {k: v for k, v in listed.items() if k not in rels})
    index.record(reg.root, list(paths))


@dataclass
class Tree:
    """A judged tree: files under `root`, the dvc.lock stages that recorded them, resolved params."""

    root: Path
    params: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, Any] = field(default_factory=dict)

    def record_out(self, stage: str, rel: str) -> None:
        """dvc.lock's entry for out `rel` (a file or a folder) of `stage`, from what is on disk now."""
        path = self.root / rel
        md5 = dir_md5(dir_listing(path)) if path.is_dir() else md5_file(path)
        outs = self.stages.setdefault(stage, {"outs": []})["outs"]
        outs[:] = [o for o in outs if o["path"] != rel] + [{"path": rel, "md5": md5}]

    def artifacts(self) -> Artifacts:
        return Artifacts(self.root, DvcLock(self.root, self.stages), self.params)


def make_golden(
    reg: Registry,
    env_id: str,
    config_hash: str = "cfg1",
    tier: str = "exact",
    device_type: str | None = "cpu",
    precision: str | None = "fp32",
    train: list[float] | None = None,
    val: dict[int, float] | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """The next sealed, indexed golden of `env_id` (a committed golden's shape, these values)."""
    from conftest import REPO

    template = json.loads(next((REPO / "registry" / "goldens").glob("cpu-*/v1.json")).read_text())
    train = [4.0, 3.5, 3.0, 2.5] if train is None else train
    val = {0: 4.5, 2: 3.5, 4: 2.0} if val is None else val
    env = {k: v for k, v in template["provenance"]["env"].items() if k not in ("device_type", "precision")}
    env.update({k: v for k, v in (("device_type", device_type), ("precision", precision)) if v is not None})
    folder = reg.root / "goldens" / env_id
    path = reg.next_path(folder)

    def series(values: dict[int, float]) -> dict[str, Any]:
        return {"start_step": 0, "end_step": max(values, default=0), "step_interval": 1,
                "values": {str(s): v for s, v in values.items()}}  # fmt: skip

    data = {
        **{k: v for k, v in template.items() if k != "content_sha256"},
        "env_id": env_id,
        "version": int(path.stem[1:]),
        "tier": tier,
        "config_hash": config_hash,
        "metrics": {"train_loss": series(dict(enumerate(train))), "val_loss": series(val)},
        "export": {"dtype": "fp32", "files": files or {"model.safetensors": "a" * 32}},
        "provenance": {**template["provenance"], "env_id": env_id, "env": env},
    }
    write_once(path, seal(data))
    index.record(reg.root, [path])
    return path
