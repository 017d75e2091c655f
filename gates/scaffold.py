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

Beside an existing trainer (issue #54 item 4), `gates init --train "python3 train.py ARGS"` leaves the
trainer alone and writes only dvc.yaml (train_single: the command as given; train@proc: the same
script under `python -m torch.distributed.run --standalone --nproc-per-node 2`; `{run_dir}` in the
command becomes runs/single and runs/proc; deps: the script and every file of the folder it imports,
as gates/reading/scope.py computes them for the check) and params.yaml (`gates: scope:`). Either way
it prints its plan (every file it writes, every command it runs) before doing anything; one of its
own files already there with other content is refused, naming it, before anything is written; one
there with the same content is kept (a re-run does nothing).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from contracts.errors import XtrainError
from contracts.fileio import atomic_write_bytes, naming_the_file
from gates.reading.scope import Sources

TEMPLATE = Path(__file__).resolve().parent / "byo_template"
# the file written and its template (train.py's is not a .py here: gates/ is torch-free, and the
# house rules read every .py under it)
FILES = {"train.py": "train.py.template", "dvc.yaml": "dvc.yaml", "params.yaml": "params.yaml"}
NEXT = "dvc repro && python3 -m gates check"
EXISTING = "python3 -m gates init --train 'python3 train.py ARGS'"
OWN = ("dvc.yaml", "params.yaml")  # what init writes beside an existing trainer
WORLD = 2  # train@proc: torchrun's processes, one device each
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(WORLD))
RUN_DIR = "{run_dir}"  # in --train: where the recorder writes, runs/single or runs/proc
HEADER = (
    "# Written by python3 -m gates init --train (docs/byo-trainer.md). The stage names are the ones the\n"
    "# gates read: train_single (one device) and train@proc (torchrun); your recorder writes runs/single\n"
    "# and runs/proc. deps: your script and the files of this folder it imports; add what else it reads.\n"
)


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


def check_not_ignored(folder: Path, in_git: bool, own: tuple[str, ...] = tuple(FILES)) -> None:
    """Neither `.dvc` (DVC refuses to init it) nor its own files (they must be committed) ignored by
    git: asked of the repository they are in, or of a scratch one holding the folder's .gitignore."""
    names = (".dvc", *own)
    if in_git:
        where = _existing(folder)
        top = Path(_git(where, "rev-parse", "--show-toplevel").stdout.strip())
        _ignored(where, where, [os.path.join(os.path.relpath(folder, where), name) for name in names], top)
        return
    with tempfile.TemporaryDirectory() as scratch:
        here = Path(scratch)
        _git(here, "init")
        if (folder / ".gitignore").is_file():
            shutil.copyfile(folder / ".gitignore", here / ".gitignore")
        _ignored(folder, here, list(names), folder)


def _ignored(base: Path, asked: Path, paths: list[str], top: Path) -> None:
    """Ask repository `asked` whether git ignores `paths` (relative to it, named from `base`), and
    refuse the first it does, naming the rule (`--verbose` also lists a path a `!` rule matched: that
    rule un-ignores it) and its file (git names it from the repository's top, `top`)."""
    proc = _git(asked, "check-ignore", "-z", "--verbose", "--stdin", stdin="".join(p + "\0" for p in paths))
    fields = proc.stdout.split("\0")[:-1]  # source, line number, pattern, path; each ends in NUL
    rules = [fields[i : i + 4] for i in range(0, len(fields), 4)]
    hidden = [(source, line, pattern, path) for source, line, pattern, path in rules if pattern[:1] != "!"]
    if not hidden:
        return
    source, line, pattern, path = hidden[0]
    name = os.path.basename(path)
    why = "dvc init refuses an ignored .dvc" if name == ".dvc" else "the project's files must be committed"
    where = os.path.normpath(top / source)  # git names it from the top (or absolute: a global file)
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
            "into a new or empty folder); next: an empty folder, or beside your trainer: "
            f"{EXISTING}"
        )
    visible = (
        sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []
    )
    if visible:
        raise ScaffoldError(
            f"{folder}: holds {len(visible)} entries ({', '.join(visible[:3])}{', ...' if len(visible) > 3 else ''}): "
            "gates init writes a new project into a new or empty folder; next: name one, or beside "
            f"your trainer: {EXISTING}"
        )


@dataclass
class Plan:
    """What init will do in `folder`: the files it writes (absent now), its own files already there
    with the same content (kept), and git init / dvc init where the folder is not yet a repository."""

    folder: Path
    writes: dict[str, bytes]
    kept: list[str]
    git_init: bool
    dvc_init: bool

    def commands(self) -> list[tuple[str, ...]]:
        git = [("git", "init", "-q")] if self.git_init else []
        return git + ([(sys.executable, "-m", "dvc", "init", "-q", "--subdir")] if self.dvc_init else [])

    def lines(self) -> list[str]:
        """The plan as printed before anything is done: every file written, every command run."""
        out = [f"write {self.folder / name}" for name in self.writes]
        out += [f"keep {self.folder / name} (already this content)" for name in self.kept]
        out += [f"run {shlex.join(argv)} (in {self.folder})" for argv in self.commands()]
        return out or ["nothing to do: every file is there with this content"]


def plan(folder: Path, train: str | None = None) -> Plan:
    """Everything checked, nothing written: the template into a new or empty folder, or (`train`, the
    trainer's single-device command) dvc.yaml and params.yaml beside an existing trainer."""
    if train is None:
        git_init, dvc_init = preflight(folder)
        writes = {name: (TEMPLATE / template).read_bytes() for name, template in FILES.items()}
        return Plan(folder, writes, [], git_init, dvc_init)
    contents = beside(folder, train)
    writes, kept = own_files(folder, contents)
    check_hidden(folder)
    check_tools()
    in_git = git_state(folder)
    check_not_ignored(folder, in_git, OWN)
    return Plan(folder, writes, kept, not in_git, not (folder / ".dvc").is_dir())


def init(folder: Path, train: str | None = None) -> list[str]:
    """Write the template into `folder` (made if absent), or dvc.yaml and params.yaml beside the trainer
    `train` runs; returns what was done, in order. Checked whole first (`plan`); if a step still
    fails, what this run made is removed."""
    return apply(plan(folder, train))


def apply(p: Plan) -> list[str]:
    made = Made(p.folder, (*p.writes, ".git", ".dvc", ".dvcignore"))
    try:
        return _apply(p)
    except BaseException:
        made.undo()
        raise


def _apply(p: Plan) -> list[str]:
    with naming_the_file(p.folder):  # pragma: no mutate -- equivalent: mkdir's error names the folder
        p.folder.mkdir(parents=True, exist_ok=True)
    done = []
    for name, data in p.writes.items():
        atomic_write_bytes(p.folder / name, data)
        done.append(f"wrote {name}")
    for argv in p.commands():
        _run(p.folder, *argv)
        done.append("git init" if argv[0] == "git" else "dvc init")
    return done


# ---- beside an existing trainer (issue #54 item 4) ----------------------------------------------


def trainer_argv(folder: Path, train: str) -> list[str]:
    """The single-device command, split as a shell would: a Python interpreter, then a script of
    `folder` (a relative path inside it), then its arguments."""
    try:
        argv = shlex.split(train)
    except ValueError as e:
        raise ScaffoldError(f"--train: {train!r}: {e}; next: quote it as a shell would") from None
    if len(argv) < 2 or not Path(argv[0]).name.startswith("python") or not argv[1].endswith(".py"):
        raise ScaffoldError(
            f"--train: {train!r}: not `python3 SCRIPT.py ARGS` (an interpreter, then your script); "
            f"next: {EXISTING}"
        )
    if "${" in train:
        raise ScaffoldError(
            f"--train: {train!r}: DVC would read ${{...}} in a stage's command as its own variable; "
            "next: pass the value itself"
        )
    script = Path(argv[1])
    if script.is_absolute() or ".." in script.parts or not (folder / script).is_file():
        raise ScaffoldError(
            f"{folder / script}: --train names no script inside {folder}; next: the script's path from there"
        )
    return argv


def commands(argv: list[str]) -> tuple[str, str]:
    """train_single's cmd (the trainer's command) and train@proc's (the same under torchrun), with
    `{run_dir}` made runs/single and runs/${item} (DVC's foreach item: proc)."""
    single = [word.replace(RUN_DIR, "runs/single") for word in argv]
    proc = [argv[0], *TORCHRUN, *(word.replace(RUN_DIR, "runs/${item}") for word in argv[1:])]
    return shlex.join(single), shlex.join(proc)


def dvc_yaml(folder: Path, argv: list[str]) -> bytes:
    """dvc.yaml for the trainer: its two stages, each with the deps the gates require of its command
    (gates/reading/scope.py: the script and every file of the folder it imports)."""
    single, proc = commands(argv)
    sources = Sources(folder)
    stages = {
        "train_single": {"cmd": single, "deps": sources.required(single), "outs": ["runs/single"]},
        "train": {
            "foreach": ["proc"],
            "do": {"cmd": proc, "deps": sources.required(proc), "outs": ["runs/${item}"]},
        },
    }
    # the stages in the order written, no line folded: sort_keys None is False, width 1001 folds no
    # shorter command, and DVC reads a mapping in any order (the bytes are tested, the meaning alike)
    dump = {"sort_keys": False, "width": 1000}  # pragma: no mutate -- equivalent: see the lines above
    return (HEADER + yaml.safe_dump({"stages": stages}, **dump)).encode()


def beside(folder: Path, train: str) -> dict[str, bytes]:
    """The contents of init's own files beside the trainer `train` runs in the existing `folder`."""
    if folder.is_symlink() or not folder.is_dir():
        raise ScaffoldError(
            f"{folder}: is {'a symbolic link' if folder.is_symlink() else 'not a folder'}: --train "
            "names a trainer in an existing folder; next: the folder holding it"
        )
    argv = trainer_argv(folder, train)
    return {"dvc.yaml": dvc_yaml(folder, argv), "params.yaml": (TEMPLATE / FILES["params.yaml"]).read_bytes()}


def own_files(folder: Path, contents: dict[str, bytes]) -> tuple[dict[str, bytes], list[str]]:
    """The files to write (absent) and those kept (there with this content); one there with other
    content, or a link, or not a file, is refused before anything is written."""
    writes, kept = {}, []
    for name, data in contents.items():
        path = folder / name
        if not (path.exists() or path.is_symlink()):
            writes[name] = data
        elif not path.is_symlink() and path.is_file() and path.read_bytes() == data:
            kept.append(name)
        else:
            raise ScaffoldError(
                f"{path}: exists with other content: refusing to replace it (gates init writes "
                f"{', '.join(contents)} beside your trainer; nothing was written); next: move it aside, "
                "re-run, then merge yours into it by hand"
            )
    return writes, kept


class Made:
    """What a run of init makes, to take back after a failure: the names it writes into the folder
    that were not there (its three files, `.git`, `.dvc`, `.dvcignore`) and the folders it makes,
    removed only while empty. Never a tree of anyone else's: nothing but those names, inside the
    folder, is ever removed whole."""

    NAMES = (*FILES, ".git", ".dvc", ".dvcignore")

    def __init__(self, folder: Path, names: tuple[str, ...] = NAMES) -> None:
        self.folder = folder
        self.new = [n for n in names if not (folder / n).exists() and not (folder / n).is_symlink()]
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
