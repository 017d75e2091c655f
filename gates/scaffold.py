"""`python -m gates init [FOLDER]`: a project of its own, gated, from an empty folder (issue #34).

Writes the three files of gates/byo_template/ (train.py: a plain PyTorch loop recorded by runrecord,
the README's snippet, tests/pipeline/test_scaffold.py holds them equal; dvc.yaml: the stages the gates read, train_single and train@proc under
torchrun; params.yaml: the project's own knobs and `gates:`), then `git init` and `dvc init` where
the folder is not yet a repository of either. Two more commands reach a verdict:

    python3 -m gates init && dvc repro && python3 -m gates check

It writes only into a new or empty folder (hidden entries aside): a folder holding anything else,
one of its three files, a file or a symbolic link is refused in one line before anything is written.
So is everything else that would make it stop half-way (`preflight`, issue #51): a `.git` git cannot
read, a `.dvc`, `.dvcignore` or `.gitignore` that is not what git and DVC expect there, an ignore
rule that hides `.dvc` or one of the three files, git missing, DVC missing from this interpreter
(DVC runs as `sys.executable -m dvc`, never a `dvc` found on PATH). Should a step still fail, what
this run made is removed: a re-run starts from the same folder. Torch-free: it writes files and runs
git and dvc (argv lists, no shell).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from contracts.errors import XtrainError
from contracts.fileio import atomic_write_bytes, naming_the_file

TEMPLATE = Path(__file__).resolve().parent / "byo_template"
# the file written and its template (train.py's is not a .py here: gates/ is torch-free, and the
# house rules read every .py under it)
FILES = {"train.py": "train.py.template", "dvc.yaml": "dvc.yaml", "params.yaml": "params.yaml"}
NEXT = "dvc repro && python3 -m gates check"


class ScaffoldError(XtrainError):
    exit_code = 2


def _said(text: str, default: str) -> str:
    """A tool's own error line: the first `ERROR:` (DVC) or `fatal:`/`error:` (git) line, else its
    last line (DVC ends with an advert for its support chat), else `default`."""
    lines = text.strip().splitlines()
    return ([x for x in lines if x.startswith(("ERROR:", "fatal:", "error:"))] or lines[-1:] or [default])[0]


def _run(folder: Path, *argv: str) -> None:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    try:
        proc = subprocess.run(list(argv), cwd=folder, capture_output=True, text=True, env=env)
    except OSError as e:  # the program itself could not start
        raise ScaffoldError(f"{folder}: {' '.join(argv)} failed: {e.strerror or e}") from None
    if proc.returncode != 0:
        said = _said(proc.stderr.strip() or proc.stdout, "no output")
        raise ScaffoldError(f"{folder}: {' '.join(argv)} failed: {said}")


def _git(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, input=stdin)


def _existing(folder: Path) -> Path:
    """`folder`, or its nearest ancestor that exists: where git can be asked about it."""
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def git_state(folder: Path) -> bool:
    """Whether `folder` lies in a git work tree; a repository git cannot read (a `.git` file of
    garbage, a broken parent) is refused with git's own words: `git init` would fail after the files."""
    where = _existing(folder)
    proc = _git(where, "rev-parse", "--is-inside-work-tree")
    if proc.returncode == 0 and proc.stdout.strip() == "true":
        return True
    said = _said(proc.stderr, f"inside a git directory, not a work tree ({where})")
    if "not a git repository" in said:
        return False
    raise ScaffoldError(f"{folder}: git cannot use the repository here: {said}; next: repair or remove it")


HIDDEN = {".dvc": "a folder", ".dvcignore": "a file", ".gitignore": "a file"}


def check_hidden(folder: Path) -> None:
    """The hidden entries git and DVC would use are of the kind they expect (a `.dvc` file made
    `dvc init` fail after the three files were written)."""
    for name, kind in HIDDEN.items():
        path = folder / name
        if not (path.exists() or path.is_symlink()):
            continue
        fits = path.is_dir() if kind == "a folder" else path.is_file()
        if path.is_symlink() or not fits:
            raise ScaffoldError(
                f"{path}: is not {kind}, as git and DVC expect there; next: remove it, or init elsewhere"
            )


def check_tools() -> None:
    """git on PATH and DVC importable by this interpreter (`dvc` missing from PATH gave a traceback)."""
    if shutil.which("git") is None:
        raise ScaffoldError("git: not found on PATH; next: install git, then re-run gates init")
    if importlib.util.find_spec("dvc") is None:
        raise ScaffoldError(
            f"dvc: not installed for {sys.executable}; next: {sys.executable} -m pip install dvc, then re-run"
        )


def check_not_ignored(folder: Path, in_git: bool) -> None:
    """Neither `.dvc` (DVC refuses to init it) nor the three files (they must be committed) ignored by
    git: asked of the repository they are in, or of a scratch one holding the folder's .gitignore."""
    names = (".dvc", *FILES)
    if in_git:
        where = _existing(folder)
        _ignored(where, where, [os.path.join(os.path.relpath(folder, where), name) for name in names])
        return
    with tempfile.TemporaryDirectory() as scratch:
        here = Path(scratch)
        _git(here, "init")
        if (folder / ".gitignore").is_file():
            shutil.copyfile(folder / ".gitignore", here / ".gitignore")
        _ignored(folder, here, list(names))


def _ignored(base: Path, asked: Path, paths: list[str]) -> None:
    """Ask repository `asked` whether git ignores `paths` (relative to it, named from `base`), and
    refuse the first it does, naming the rule (`--verbose` also lists a path a `!` rule matched: that
    rule un-ignores it)."""
    proc = _git(asked, "check-ignore", "-z", "--verbose", "--stdin", stdin="".join(p + "\0" for p in paths))
    fields = proc.stdout.split("\0")[:-1]  # source, line number, pattern, path; each ends in NUL
    rules = [fields[i : i + 4] for i in range(0, len(fields), 4)]
    hidden = [(source, line, pattern, path) for source, line, pattern, path in rules if pattern[:1] != "!"]
    if not hidden:
        return
    source, line, pattern, path = hidden[0]
    name = os.path.basename(path)
    why = "dvc init refuses an ignored .dvc" if name == ".dvc" else "the project's files must be committed"
    where = os.path.normpath(base / source)  # git names it from its cwd (or absolute: a global file)
    raise ScaffoldError(
        f"{os.path.normpath(base / path)}: ignored by git ({where} line {line}: {pattern!r}): {why}; "
        f"next: un-ignore it (add '!{name}' below that line)"
    )


def preflight(folder: Path) -> tuple[bool, bool]:
    """Everything gates init needs, checked before anything is written; (git init?, dvc init?)."""
    refuse(folder)
    check_hidden(folder)
    check_tools()
    in_git = git_state(folder)
    check_not_ignored(folder, in_git)
    return not in_git, not (folder / ".dvc").is_dir()


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
    """Write the template into `folder` (made if absent); returns what was done, in order. Checked
    whole first (preflight); if a step still fails, what this run made is removed."""
    git_init, dvc_init = preflight(folder)
    made = Made(folder)
    try:
        return _apply(folder, git_init, dvc_init)
    except BaseException:
        made.undo()
        raise


def _apply(folder: Path, git_init: bool, dvc_init: bool) -> list[str]:
    with naming_the_file(folder):  # pragma: no mutate -- equivalent: mkdir's error names the folder
        folder.mkdir(parents=True, exist_ok=True)
    done = []
    for name, template in FILES.items():
        atomic_write_bytes(folder / name, (TEMPLATE / template).read_bytes())
        done.append(f"wrote {name}")
    if git_init:
        _run(folder, "git", "init", "-q")
        done.append("git init")
    if dvc_init:
        _run(folder, sys.executable, "-m", "dvc", "init", "-q", "--subdir")
        done.append("dvc init")
    return done


class Made:
    """What a run of init makes, to take back after a failure: the names it writes into the folder
    that were not there (its three files, `.git`, `.dvc`, `.dvcignore`) and the folders it makes,
    removed only while empty. Never a tree of anyone else's: nothing but those names, inside the
    folder, is ever removed whole."""

    NAMES = (*FILES, ".git", ".dvc", ".dvcignore")

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.new = [n for n in self.NAMES if not (folder / n).exists() and not (folder / n).is_symlink()]
        self.folders = []  # the folder and its missing parents, deepest first
        missing = folder
        while not missing.exists() and missing != missing.parent:
            self.folders.append(missing)
            missing = missing.parent

    def undo(self) -> None:
        """Quietly: the failure being undone is the one to report."""
        for name in self.new:
            path = self.folder / name
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only an empty one: what this run made
