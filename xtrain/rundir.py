"""A run never destroys the previous one: it trains in a staging directory swapped in at the end.

    runs/<launcher>/           the last complete run, untouched until a new run succeeds
    runs/.<launcher>.partial/  the run in progress; after a failure it keeps the checkpoints
                               that `--resume` continues from

A run's outputs are replaced as a whole; anything else in the run directory (the git-tracked
.gitignore DVC keeps there, a note) is carried over into the new one (torch-free).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from contracts.fileio import naming_the_file, replace_directory
from xtrain.checkpoint_dir import CheckpointDir

OUTPUTS = ("checkpoints", "metrics.json", "summary.json", "loss.csv", "eval.csv")


def partial_dir(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    return run_dir.parent / f".{run_dir.name}.partial"


def has_checkpoint(run_dir: Path) -> bool:
    return CheckpointDir(run_dir / "checkpoints", keep=1).latest() is not None


def _link_or_copy(src: str, dst: str) -> None:
    """Hard links cost nothing and are safe: checkpoint files are replaced, never edited in place."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _carry(entry: Path, dest: Path) -> None:
    if entry.is_dir():
        shutil.copytree(entry, dest, copy_function=_link_or_copy, symlinks=True)
    else:
        _link_or_copy(str(entry), str(dest))


def latest_name(run_dir: Path) -> str | None:
    latest = CheckpointDir(run_dir / "checkpoints", keep=1).latest()
    return latest.name if latest is not None else None


def prepare(run_dir: str | Path, resume: bool) -> Path:
    """Create the staging directory. With resume it starts from the newest checkpoint: an
    interrupted run's (kept in the staging directory) if there is one, else the last complete run's."""
    run_dir, staging = Path(run_dir), partial_dir(run_dir)
    if resume and has_checkpoint(staging):
        return staging
    with naming_the_file(staging):
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=staging.parent, prefix=f".{run_dir.name}.", suffix=".tmp"))
        if resume and (run_dir / "checkpoints").is_dir():
            _carry(run_dir / "checkpoints", tmp / "checkpoints")
        os.replace(tmp, staging)
    return staging


def discard_unless_progressed(staging: Path, start: str | None) -> None:
    """After a failure: keep the staging directory only if the run committed a new checkpoint there
    (a resume refused at once leaves nothing behind; a crash at step 9 keeps step 6 for --resume)."""
    latest = latest_name(staging)
    if latest is None or latest == start:
        shutil.rmtree(staging, ignore_errors=True)


def commit(staging: Path, run_dir: str | Path) -> None:
    """Swap the finished run in, in one rename; the old run's non-output files are carried over."""
    run_dir = Path(run_dir)
    with naming_the_file(run_dir):
        if run_dir.is_dir():
            for entry in run_dir.iterdir():
                if entry.name not in OUTPUTS and not (staging / entry.name).exists():
                    _carry(entry, staging / entry.name)
        os.chmod(staging, 0o755)
        replace_directory(staging, run_dir)
