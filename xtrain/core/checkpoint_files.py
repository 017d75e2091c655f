"""A checkpoint's files, read without torch: state.json, and the safetensors a state.json vouches for.

The export stage reads a checkpoint's weights as numpy arrays through this module (its process never
imports torch: ~2.5 CPU-s per export on a 2-core Xeon); the trainer's loaders (xtrain/core/checkpoint.py)
verify the same files with the same checks before torch reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file

from contracts import outputs
from contracts.fileio import md5_file
from contracts.validate import ValidationError, load_json

FORMAT = outputs.CHECKPOINT_FORMAT  # "xtrain-checkpoint/1"
T = TypeVar("T")
NEXT_STEP = "resume from an intact checkpoint (edit checkpoints/latest) or train without --resume"


class CheckpointDamaged(ValidationError):
    """A checkpoint file does not match what its state.json recorded: refused, naming the file."""

    def __init__(self, path: Path, key: str, problem: str) -> None:
        super().__init__(str(path), key, problem, "content equal to what state.json recorded", NEXT_STEP)


def read_state(path: Path) -> dict[str, Any]:
    where = str(Path(path) / "state.json")
    try:
        state = load_json(where)
    except ValidationError as e:
        raise ValidationError(e.source, e.key, e.problem, e.rule, NEXT_STEP) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else None
        raise ValidationError(where, "format", f"is {found!r}", f"exactly {FORMAT!r}", NEXT_STEP)
    return state


def load_verified(path: Path, name: str, state: dict[str, Any], key: str, load: Callable[[str], T]) -> T:
    """The checkpoint's file `name` read by `load` (safetensors' numpy or torch reader), refused naming
    the file unless it exists, its content md5 equals the one state.json recorded and it is safetensors."""
    f = Path(path) / name
    if not f.is_file():
        raise CheckpointDamaged(f, "", "missing")
    if key in state and (actual := md5_file(f)) != state[key]:
        raise CheckpointDamaged(f, key, f"content md5 {actual} differs from the recorded {state[key]}")
    try:
        return load(str(f))
    except SafetensorError as e:
        raise CheckpointDamaged(f, "", f"not a valid safetensors file: {e}") from e


def load_weight_arrays(path: Path, state: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """model.safetensors as float32 numpy arrays (what model_tensors stores), else refused naming the file."""
    f = Path(path) / "model.safetensors"
    try:
        arrays = load_verified(path, f.name, state or {}, "model_md5", load_file)
    except TypeError as e:  # a dtype numpy cannot hold (bfloat16)
        raise CheckpointDamaged(f, "", f"not float32 weights: {e}") from e
    for name, a in arrays.items():
        if a.dtype != np.float32:
            raise CheckpointDamaged(f, name, f"is {a.dtype}, a checkpoint stores float32 weights")
    return arrays
