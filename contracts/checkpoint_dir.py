"""Where checkpoints live (torch-free, so the registry can find them without torch).

A run directory keeps `checkpoints/step_NNNNNN/` (the last `keep` of them) and
`checkpoints/latest`, a one-line pointer replaced atomically after the directory is complete.
The pointer names one `step_NNNNNN` folder of this `checkpoints/`: an absolute path, `..`, another
name or a symbolic link is refused (exit 2), so a pointer can never lead out of the run.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from contracts.errors import XtrainError
from contracts.fileio import atomic_write_text
from contracts.validate import ValidationError


class CheckpointNotFound(XtrainError, FileNotFoundError):
    exit_code = 2


class NothingToResume(XtrainError):
    """--resume where no checkpoint exists: an error, never a silent fresh start."""

    exit_code = 2


STEP_NAME = re.compile(r"step_[0-9]{6,}")


def pointed(root: Path, pointer: Path) -> Path:
    """The folder `latest` names, refused unless it is a step folder directly inside `root`."""
    name = pointer.read_bytes().decode(errors="replace").strip()  # UTF-8, whatever the locale
    target = root / name
    if not STEP_NAME.fullmatch(name) or target.is_symlink():
        raise ValidationError(
            str(pointer),
            "",
            f"names {name[:80]!r}, not a checkpoint folder of this run",
            "one step_NNNNNN folder inside this checkpoints/ (no path, no symbolic link)",
            "write the name of an intact step_NNNNNN folder into it, or train without --resume",
        )
    return target


class CheckpointDir:
    def __init__(self, root: Path, keep: int) -> None:
        self.root, self.keep = Path(root), keep

    def path(self, step: int) -> Path:
        return self.root / f"step_{step:06d}"

    def latest(self) -> Path | None:
        pointer = self.root / "latest"
        if not pointer.exists():
            return None
        target = pointed(self.root, pointer)
        return target if (target / "state.json").exists() else None

    def commit(self, step: int) -> None:
        atomic_write_text(self.root / "latest", self.path(step).name + "\n")
        done = sorted(p for p in self.root.glob("step_*") if p.is_dir())
        for old in done[: max(0, len(done) - self.keep)]:
            shutil.rmtree(old, ignore_errors=True)


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory from a checkpoint, a `checkpoints/` or a run directory path."""
    path = Path(path)
    if (path / "state.json").exists():
        return path
    for root in (path / "checkpoints", path):
        latest = CheckpointDir(root, keep=1).latest()  # pragma: no mutate -- equivalent: keep is for commit()
        if latest is not None:
            return latest
    raise CheckpointNotFound(f"{path}: no checkpoint here (expected state.json, or checkpoints/latest)")
