"""Where runrecord writes: a folder it made, or an earlier run record of its own, never elsewhere.

The run folder goes through the project's one output guard (contracts/outputs.py) as its own kind,
`run record`: absent, empty, or a folder that holds this kind's marker (or, written before markers,
only run files whose metrics.json runrecord wrote). So `finish(model, ".")`, xtrain's own run
folders (marker `run`), an export, or a folder holding someone's `summary.json` are refused in one
line before anything is written. The record is built in a staged folder beside the target and
swapped in at the end (contracts/outputs.py staged_folder): a reader sees the old run or the new one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from safetensors.torch import save
from torch import nn

from contracts import lockfile, outputs
from contracts.errors import FileWriteError
from contracts.fileio import atomic_write_bytes, atomic_write_text, naming_the_file
from runrecord.arguments import RunRecordError
from xtrain.core.checkpoint import model_tensors
from xtrain.core.train import write_metrics

RECORDER = "runrecord"


def _earlier_record(path: Path) -> bool:
    """A run folder runrecord wrote before it marked its folders: only run files, its metrics.json
    naming runrecord as the recorder."""
    if not set(os.listdir(path)) <= {*outputs.RUN_OUTPUTS, ".gitignore"}:
        return False
    try:
        metrics = json.loads((path / "metrics.json").read_bytes())
    except (OSError, ValueError):
        return False
    recorder = metrics.get("determinism", {}).get("recorder") if isinstance(metrics, dict) else None
    return isinstance(recorder, str) and recorder.startswith(RECORDER + " ")


RUN_RECORD = outputs.Kind("run record", folder=True, marker=True, recognise=_earlier_record)


def check_run_dir(run_dir: str | Path) -> Path:
    """`run_dir` if a run record may be written there, else OutputRefused (one line, exit 2)."""
    return outputs.check(Path(run_dir), RUN_RECORD)


def hold(run_dir: Path) -> lockfile.WriteLock:
    """The run folder's lock (`.<name>.lock` beside it, the launchers' own), taken by rank 0 when it
    learns the folder and held until finish(): a second recorder, in this process or another, is
    refused at its construction naming the holder (two processes finishing into one folder both said
    "finished" and only the last record survived). Taking it writes beside the folder, where finish()
    stages the record, and an existing folder is probed too: an unwritable place is one line now,
    not a record lost after the whole loop."""
    try:
        with naming_the_file(run_dir.parent):
            run_dir.parent.mkdir(parents=True, exist_ok=True)
        lock = lockfile.WriteLock(run_dir, "runrecord").acquire(0)
    except FileWriteError as e:
        raise _unwritable(e.path, run_dir, e.errno) from None
    try:
        if run_dir.is_dir():
            tempfile.TemporaryFile(dir=run_dir).close()
    except OSError as e:
        lock.release()
        raise _unwritable(run_dir, run_dir, e.errno) from None
    return lock


def _unwritable(where: str | Path, run_dir: Path, errno: int | None) -> RunRecordError:
    return RunRecordError(
        "RunRecorder",
        "run_dir",
        f"{where}: cannot write: {os.strerror(errno or 0)}",
        f"a folder this process can write ({run_dir}): checked before training, not at finish()",
    )


def write_record(run_dir: Path, record: dict[str, Any], model: nn.Module | None) -> None:
    """metrics.json, summary.json, loss.csv, eval.csv (as xtrain writes them) and, with `model`, the
    final checkpoint, in a staged folder swapped in whole."""
    with outputs.staged_folder(run_dir, RUN_RECORD) as tmp:
        write_metrics(tmp, record)
        if model is not None:
            write_final_checkpoint(tmp, model, record["steps"])


def write_final_checkpoint(run_dir: Path, model: nn.Module, steps: int) -> None:
    """checkpoints/step_<steps>/model.safetensors (the tensors param_digest hashes, tied ones copied
    apart: safetensors refuses shared storage) and checkpoints/latest."""
    folder = run_dir / "checkpoints" / f"step_{steps:06d}"
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.clone() for k, v in model_tensors(model).items()}
    atomic_write_bytes(folder / "model.safetensors", save(tensors))
    atomic_write_text(run_dir / "checkpoints" / "latest", folder.name + "\n")
