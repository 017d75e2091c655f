"""`python -m gates init [FOLDER]`: a project of its own, gated, from an empty folder (issue #34).

Writes the three files of gates/byo_template/ (train.py: a plain PyTorch loop recorded by runrecord,
the README's snippet, tests/test_scaffold.py holds them equal; dvc.yaml: the stages the gates read, train_single and train@proc under
torchrun; params.yaml: the project's own knobs and `gates:`), then `git init` and `dvc init` where
the folder is not yet a repository of either. Two more commands reach a verdict:

    python3 -m gates init && dvc repro && python3 -m gates check

It writes only into a new or empty folder (hidden entries aside): a folder holding anything else,
one of its three files, a file or a symbolic link is refused in one line before anything is written. Torch-free: it writes files and runs git and dvc (argv lists, no shell).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from contracts.errors import XtrainError
from contracts.fileio import atomic_write_bytes

TEMPLATE = Path(__file__).resolve().parent / "byo_template"
# the file written and its template (train.py's is not a .py here: gates/ is torch-free, and the
# house rules read every .py under it)
FILES = {"train.py": "train.py.template", "dvc.yaml": "dvc.yaml", "params.yaml": "params.yaml"}
NEXT = "dvc repro && python3 -m gates check"


class ScaffoldError(XtrainError):
    exit_code = 2


def _run(folder: Path, *argv: str) -> None:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run(list(argv), cwd=folder, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise ScaffoldError(f"{folder}: {' '.join(argv)} failed: {last[0]}")


def _inside_git(folder: Path) -> bool:
    proc = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=folder, capture_output=True, text=True
    )
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def refuse(folder: Path) -> None:
    """A new project goes into a new or empty folder (hidden entries such as .git or .venv aside): never
    beside someone's files, never over one of its own names, never through a symbolic link."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ScaffoldError(
            f"{folder}: is {'a symbolic link' if folder.is_symlink() else 'a file'}, not a folder"
        )
    there = [name for name in FILES if (folder / name).exists() or (folder / name).is_symlink()]
    if there:
        raise ScaffoldError(
            f"{folder / there[0]}: exists: refusing to replace it (gates init writes {', '.join(FILES)} "
            "into a new or empty folder); next: an empty folder, or copy gates/byo_template/ by hand"
        )
    visible = (
        sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []
    )
    if visible:
        raise ScaffoldError(
            f"{folder}: holds {len(visible)} entries ({', '.join(visible[:3])}{', ...' if len(visible) > 3 else ''}): "
            "gates init writes a new project into a new or empty folder; next: name one"
        )


def init(folder: Path) -> list[str]:
    """Write the template into `folder` (made if absent); returns what was done, in order."""
    refuse(folder)
    folder.mkdir(parents=True, exist_ok=True)
    done = []
    for name, template in FILES.items():
        atomic_write_bytes(folder / name, (TEMPLATE / template).read_bytes())
        done.append(f"wrote {name}")
    if not _inside_git(folder):
        _run(folder, "git", "init", "-q")
        done.append("git init")
    if not (folder / ".dvc").is_dir():
        _run(folder, "dvc", "init", "-q", "--subdir")
        done.append("dvc init")
    return done
