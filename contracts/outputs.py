"""Never destroy what you did not make: the one check every whole-output writer goes through (torch-free).

A writer names the KIND of output it makes (a run folder, an export folder, a report file, ...).
Before it touches anything, and again just before it swaps its staged output in, the target must be
- absent, an empty folder (folder kinds) or an empty file (file kinds); or
- a previous output of the same kind:
    a folder holding the marker `.xtrain-output.json` {"kind": KIND} (written by kinds with a marker),
    or recognised by its content (exports: manifest.json lists every file in the folder; a run
    written before markers existed holds only run outputs and DVC's .gitignore);
    a file recognised by its content (its `format` tag, or the first line a report starts with).
Anything else is refused in one line, exit 2, naming the path, and nothing is touched: a file where a
folder goes or a folder where a file goes, a symbolic link, a folder without the marker or with
another kind's, a git repository's root, the working directory or any folder above it, an empty
file git tracks (an `__init__.py`: a source file, not a placeholder such as $GITHUB_STEP_SUMMARY),
and a path whose folder leads through a symbolic link out of the repository it is named in.
A command names each output flag's kind with `output_flag` (tests/process/test_output_guard.py finds every
one in the argparse parsers and points it at params.yaml, a source file and an unrelated folder).

Writers stage beside the target (a fresh `.NAME.XXXX.tmp`) and swap in one rename (contracts.fileio).
docs/hostile-input.md ("never destroy") says why exports carry no marker.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import XtrainError
from contracts.fileio import atomic_write_bytes, canonical_json, naming_the_file, replace_directory

MARKER = ".xtrain-output.json"
RUN_OUTPUTS = ("checkpoints", "metrics.json", "summary.json", "loss.csv", "eval.csv")
# The proc launcher's resolved run, in the staging folder while its workers live (xtrain/core/launch.py).
LAUNCH_FILE = ".launch.json"
EXPORT_MANIFEST_FORMAT = "xtrain-export-manifest/1"
CHECKPOINT_FORMAT = "xtrain-checkpoint/1"
MAX_RECOGNISED_BYTES = 64 << 20  # a report or manifest larger than this is not one of ours


class OutputRefused(XtrainError):
    """The target holds something this command did not make: refused, nothing touched."""

    exit_code = 2

    def __init__(self, path: object, kind: str, problem: str) -> None:
        self.path = str(path)
        super().__init__(
            f"{path}: refusing to write the {kind} here: {problem}; "
            "next: name a new path, or move that one away yourself"
        )


@dataclass(frozen=True)
class Kind:
    name: str
    folder: bool
    marker: bool = False  # a folder kind that writes MARKER into its output
    recognise: Callable[[Path], bool] = lambda _p: False  # a previous output, known by its content


def _json(path: Path) -> object:
    if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_RECOGNISED_BYTES:
        return None
    try:
        return json.loads(path.read_bytes())
    except (ValueError, OSError):
        return None


def _family(tag: object) -> str | None:
    """`xtrain-gates-report/1` -> `xtrain-gates-report`: any version of a format is the same kind."""
    return tag.split("/")[0] if isinstance(tag, str) and tag.startswith("xtrain-") else None


def json_format(tag: str) -> Callable[[Path], bool]:
    def recognise(path: Path) -> bool:
        data = _json(path)
        return isinstance(data, dict) and _family(data.get("format")) == _family(tag)

    return recognise


def starts_with(prefix: bytes) -> Callable[[Path], bool]:
    def recognise(path: Path) -> bool:
        with open(path, "rb") as f:
            return f.read(len(prefix)) == prefix

    return recognise


def _export_folder(path: Path) -> bool:
    """An export: manifest.json of the export format, listing every other file in the folder."""
    manifest = _json(path / "manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_MANIFEST_FORMAT:
        return False
    files = manifest.get("files")
    return isinstance(files, dict) and set(os.listdir(path)) <= {*files, "manifest.json"}


def _run_folder(path: Path) -> bool:
    """A run written before markers: only run outputs and the .gitignore DVC keeps there (and the launch
    file of a staging folder whose launcher was killed)."""
    return set(os.listdir(path)) <= {*RUN_OUTPUTS, ".gitignore", LAUNCH_FILE}


def _checkpoint_folder(path: Path) -> bool:
    state = _json(path / "state.json")
    return isinstance(state, dict) and state.get("format") == CHECKPOINT_FORMAT


RUN = Kind("run", folder=True, marker=True, recognise=_run_folder)
EXPORT = Kind("export", folder=True, recognise=_export_folder)
CHECKPOINT = Kind("checkpoint", folder=True, recognise=_checkpoint_folder)
PINNED = Kind("pinned checkpoint", folder=True)  # never replaced: absent or empty only
HTML_REPORT = Kind("gates page", folder=False, recognise=starts_with(b"<!DOCTYPE html>\n<html lang='en'>"))
JUNIT_REPORT = Kind(
    "JUnit report",
    folder=False,
    recognise=starts_with(b'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="xtrain-gates"'),
)
MARKDOWN_REPORT = Kind("Markdown report", folder=False, recognise=starts_with(b"## xtrain-gates: "))
PICTURE = Kind("PNG picture", folder=False, recognise=starts_with(b"\x89PNG\r\n\x1a\n"))
# torch.onnx's ModelProto: field 1 (ir_version) first, and the producer it names
ONNX_GRAPH = Kind(
    "ONNX graph", folder=False, recognise=lambda p: starts_with(b"\x08")(p) and _names(p, b"pytorch")
)


def _names(path: Path, word: bytes) -> bool:
    with open(path, "rb") as f:
        return word in f.read(4096)


def files_folder(name: str, files: tuple[str, ...]) -> Kind:
    """A folder that stages write known files into (data/, bench/): it may hold only those files, DVC's
    .gitignore and folders of the same kind (bench/profiled); each file is replaced on its own."""

    def recognise(path: Path) -> bool:
        for entry in os.scandir(path):
            if entry.is_symlink():
                return False
            if entry.is_dir():
                if not recognise(Path(entry.path)):
                    return False
            elif entry.name not in (*files, ".gitignore"):
                return False
        return True

    return Kind(name, folder=True, recognise=recognise)


DATA_FOLDER = files_folder(
    "data folder", ("corpus.txt", "corpus.json", "tokenizer.json", "tokens.safetensors", "tokens.json")
)
SCALING_FOLDER = files_folder("scaling output", ("scaling.json", "scaling.png", "profile.json"))


def json_kind(name: str, tag: str | None) -> Kind:
    """A JSON artifact file: replaced only where the file there carries the same format family (an
    artifact without a format tag, summary.json inside a run's staging folder: any JSON object)."""
    if tag is None:
        return Kind(name, folder=False, recognise=lambda p: isinstance(_json(p), dict))
    return Kind(name, folder=False, recognise=json_format(tag))


def _marker_kind(path: Path) -> str:
    data = _json(path / MARKER)
    return data.get("kind") if isinstance(data, dict) and isinstance(data.get("kind"), str) else "?"


def _place_problem(path: Path) -> str | None:
    """Folders no writer may ever replace, whatever they hold."""
    resolved, cwd = path.resolve(), Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        return "it is the working directory or a folder above it"
    if (resolved / ".git").exists():
        return "it is the root of a git repository"
    return None


def _folder_problem(path: Path, kind: Kind) -> str | None:
    if not path.is_dir():
        return "it is a file, not a folder"
    if problem := _place_problem(path):
        return problem
    entries = os.listdir(path)
    if not entries:
        return None
    if MARKER in entries:
        found = _marker_kind(path)
        return None if found == kind.name else f"its {MARKER} says a {found!r} output is there"
    if kind.recognise(path):
        return None
    return f"a folder of {len(entries)} entries that is not a previous {kind.name} (no {MARKER})"


def _tracked(path: Path) -> bool:
    """git tracks `path` (False outside git, or without git)."""
    try:
        found = subprocess.run(
            ["git", "-C", str(path.parent), "ls-files", "--error-unmatch", "--", path.name],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0


def _file_problem(path: Path, kind: Kind) -> str | None:
    if path.is_dir():
        return "it is a folder, not a file"
    if not path.is_file():
        return "it is not a regular file"
    if path.stat().st_size == 0:
        return "it is an empty file git tracks (a source file, not a placeholder)" if _tracked(path) else None
    if kind.recognise(path):
        return None
    return f"the file there is not a previous {kind.name}"


def _repository(folder: Path) -> Path | None:
    """The top of the git repository `folder` lies in, found without resolving links; None outside one."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def leaves_repository(path: Path) -> str | None:
    """A path named inside a repository whose folder leads through a symbolic link out of it."""
    folder = Path(os.path.abspath(path)).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    real, top = folder.resolve(), _repository(folder)
    if top is None or real == folder or real.is_relative_to(top.resolve()):
        return None
    return f"its folder leads through a symbolic link to {real}, outside the repository {top}"


def check(path: str | Path, kind: Kind) -> Path:
    """`path`, if `kind` may be written there; else OutputRefused (exit 2), nothing touched."""
    path = Path(path)
    if path.is_symlink():
        problem: str | None = f"it is a symbolic link (to {os.readlink(path)})"
    elif escape := leaves_repository(path):
        problem = escape
    elif not path.exists():
        return path
    else:
        problem = (_folder_problem if kind.folder else _file_problem)(path, kind)
    if problem:
        raise OutputRefused(path, kind.name, problem)
    return path


def write_marker(folder: Path, kind: Kind) -> None:
    (folder / MARKER).write_bytes(canonical_json({"kind": kind.name}).encode())  # UTF-8


@contextlib.contextmanager
def staged_folder(path: str | Path, kind: Kind) -> Iterator[Path]:
    """A fresh folder beside `path` that replaces it if the block completes and `kind` may go there.

    The check runs before anything is created and again right before the swap (the target may
    have changed during a long write); readers see the old folder or the complete new one.
    """
    path = check(path, kind)
    with naming_the_file(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        with naming_the_file(path, scratch=tmp):
            yield tmp
            if kind.marker:
                write_marker(tmp, kind)
            os.chmod(tmp, 0o755)
            check(path, kind)
            replace_directory(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_file(path: str | Path, data: bytes | str, kind: Kind) -> None:
    """Write one output file atomically, only where `kind` may go."""
    check(path, kind)
    atomic_write_bytes(path, data.encode() if isinstance(data, str) else data)  # str: as UTF-8


def output_flag(action: Any, kind: Kind) -> Any:
    """Mark an argparse action as naming an output of `kind` (tests/process/test_output_guard.py finds them all);
    returns the action. Library code never imports argparse: the action is any object."""
    action.xtrain_output = kind
    return action


def leftovers(path: str | Path) -> list[Path]:
    """The scratch twins an interrupted writer of `path` left beside it (`.NAME.*.tmp`, `.NAME.*.old`)."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    return sorted(p for pattern in (".*.tmp", ".*.old") for p in path.parent.glob(f".{path.name}{pattern}"))
