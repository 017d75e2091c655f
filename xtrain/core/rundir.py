"""A run never destroys the previous one, nor anything it did not make (torch-free).

    runs/<launcher>/           the last complete run, untouched until a new run succeeds
    runs/.<launcher>.partial/  the run in progress; after a failure it keeps the checkpoints
                               that `--resume` continues from
    runs/.<launcher>.lock      held (flock) by the one writer of the run (our launcher, or runrecord
                               in a project's own loop: contracts/lockfile.py); names its pid

A run folder carries the marker `.xtrain-output.json` {"kind": "run"}, written at the swap (a
staging folder holds only outputs): a run replaces only an absent or empty folder or a previous
run (contracts/outputs.py); anything else is refused before anything is touched. A run's outputs are replaced as a whole; anything else in the run directory
(the git-tracked .gitignore DVC keeps there, a note) is carried over into the new one. A refused
`--resume` of an interrupted run leaves its staging folder as it was.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from contracts import lockfile, outputs
from contracts.checkpoint_dir import CheckpointDir, NothingToResume
from contracts.fileio import naming_the_file, replace_directory
from contracts.validate import ValidationError

OUTPUTS = outputs.RUN_OUTPUTS


RunBusy = lockfile.Busy  # another writer holds the run's lock: one writer per run directory


def partial_dir(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    return run_dir.parent / f".{run_dir.name}.partial"


def lock_path(run_dir: str | Path) -> Path:
    return lockfile.lock_path(run_dir)


@contextlib.contextmanager
def locked(run_dir: str | Path) -> Iterator[int]:
    """Hold the run's lock for the block (yields its fd). flock(2) on the lock file: released by the
    kernel when its holder dies, so a crash never blocks the next run (it takes the file over, naming
    the dead one); a second writer fails at once, naming the holder's pid (contracts/lockfile.py)."""
    with naming_the_file(lock_path(run_dir)):
        Path(run_dir).parent.mkdir(parents=True, exist_ok=True)
    with lockfile.held(run_dir, "python -m pipeline.train", wait_s=0) as lock:
        assert lock.fd is not None  # held() returns an acquired lock
        yield lock.fd


def has_checkpoint(run_dir: Path) -> bool:
    return CheckpointDir(run_dir / "checkpoints", keep=1).latest() is not None


def preflight(run_dir: str | Path, resume: bool) -> None:
    """Every refusal, before anything is touched: the run folder and its staging folder are absent
    or ours, and --resume has a checkpoint to continue from."""
    run_dir, staging = Path(run_dir), partial_dir(run_dir)
    outputs.check(run_dir, outputs.RUN)
    outputs.check(staging, outputs.RUN)
    if resume and not (has_checkpoint(staging) or has_checkpoint(run_dir)):
        raise NothingToResume(
            f"{run_dir}: --resume: no checkpoint to resume from (neither {run_dir}/checkpoints/latest "
            f"nor {staging}/checkpoints/latest); next: train without --resume"
        )


def resumes_partial(run_dir: str | Path, resume: bool) -> bool:
    """Whether this run continues an interrupted one's staging folder (which a failure must keep)."""
    return resume and has_checkpoint(partial_dir(run_dir))


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
    preflight(run_dir, resume)
    if resume and has_checkpoint(staging):
        return staging
    with naming_the_file(staging):
        shutil.rmtree(staging, ignore_errors=True)  # a previous interrupted run (checked: ours)
        staging.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=staging.parent, prefix=f".{run_dir.name}.", suffix=".tmp"))
        if resume and (run_dir / "checkpoints").is_dir():
            _carry(run_dir / "checkpoints", tmp / "checkpoints")
        os.replace(tmp, staging)
    return staging


def discard_unless_progressed(staging: Path, start: str | None) -> None:
    """After a failure: keep the staging directory only if the run committed a new checkpoint there
    (a resume refused at once leaves nothing behind; a crash at step 9 keeps step 6 for --resume).
    The caller never discards an interrupted run's staging folder it resumed (resumes_partial)."""
    try:
        latest = latest_name(staging)
    except ValidationError:  # a pointer that cannot be followed: keep the folder to be inspected
        return
    if latest is None or latest == start:
        shutil.rmtree(staging, ignore_errors=True)


def commit(staging: Path, run_dir: str | Path) -> None:
    """Swap the finished run in, in one rename; the old run's non-output files are carried over."""
    run_dir = Path(run_dir)
    outputs.check(run_dir, outputs.RUN)  # again: the folder may have changed while the run trained
    with naming_the_file(run_dir):
        if run_dir.is_dir():
            for entry in run_dir.iterdir():
                if entry.name not in OUTPUTS and not (staging / entry.name).exists():
                    _carry(entry, staging / entry.name)
        outputs.write_marker(staging, outputs.RUN)  # at the swap: a staging folder holds only outputs
        os.chmod(staging, 0o755)
        replace_directory(staging, run_dir)


Snapshot = dict[str, tuple[int, int]]


def snapshot(run_dir: str | Path) -> Snapshot | None:
    """Every file under the run folder with its size and mtime; None where there is no folder."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return None
    out = {}
    for p in sorted(run_dir.rglob("*")):
        st = p.lstat()
        if not p.is_dir() or p.is_symlink():
            out[p.relative_to(run_dir).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def describe(run_dir: str | Path, before: Snapshot | None) -> str:
    """What the run folder holds now, said against what it held when the launcher started (`before`):
    after a SIGINT to `dvc repro -s -f train@proc` the launcher said "runs/proc is unchanged" of a
    folder DVC had emptied before it started. Only what is on disk is said."""
    now, stage = snapshot(run_dir), os.environ.get("DVC_STAGE")
    if now is None:
        if before is not None:
            return f"{run_dir} is gone: it was removed while this launcher ran"
        said = f"{run_dir} holds no run: it was already absent when this launcher started"
        if stage:  # the run DVC recorded is in its cache
            said += (
                f" (DVC removes a stage's outputs before it runs it; `dvc checkout {stage}` restores them)"
            )
        return said + _kept(run_dir)
    if now != before:
        return f"{run_dir} changed while this launcher ran (not by it: it writes only {partial_dir(run_dir)})"
    held = "the previous run" if "metrics.json" in now else "no run"
    return f"{run_dir} is unchanged: it holds {held}, as when this launcher started" + _kept(run_dir)


def _kept(run_dir: str | Path) -> str:
    staging = partial_dir(run_dir)
    if not has_checkpoint(staging):
        return ""
    return f"; the interrupted run's checkpoints are in {staging} (--resume continues from them)"
