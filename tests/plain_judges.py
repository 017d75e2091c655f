"""Judges of plain values (docs/house.md): the house test's machinery, shared by its two tiers.

A gate reads (`Gate.read`, gates/reading/: files to plain records), then judges (`Gate.judge`: records
and thresholds in, a verdict out). Two checks hold the second half to "opens no file":
- `no_files()`: every way to reach the disk or another process (open, os.open/stat/listdir/scandir,
  pathlib.Path's disk methods, subprocess) raises FileTouched while a judge and its picture run; the
  verdict must equal the one given with the disk open (`plain_problems`).
- `static_problems(source)`: a judge module imports nothing that reaches files (pathlib, os, io,
  subprocess, shutil, glob, tempfile, yaml, the artifact tree, dvc.lock, the registry), annotates no parameter
  with such a type and calls no `open`.
tests/unit/test_house_plain_judges.py holds the rules and their negative controls;
tests/pipeline/test_house_plain_judges_tree.py judges every gate of the real gate tree under no_files().
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import os
import pathlib
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

from contracts.validate import ValidationError
from gates.judges.gate import Gate
from gates.reading.artifacts import ArtifactError, Artifacts, NonFinite, StageNotRun

# Every gate reads in gates/reading/ and judges plain values (issue #53 item 1): no module is left on
# the whole tree. A module named here would be judged by the static check only (a conversion under way).
NOT_YET_SPLIT: frozenset[str] = frozenset()


def whole_tree(a: Artifacts, t: dict[str, Any]) -> Artifacts:
    """The reader of a gate not split (planted by the negative controls): the judge gets the tree."""
    return a


# what a judge may not import: each reaches files, processes or the artifact tree
FILE_MODULES = ("pathlib", "os", "io", "subprocess", "shutil", "glob", "tempfile", "yaml")
FILE_NAMES = {
    "gates.reading.artifacts": {"Artifacts"},
    "gates.reading.dvclock": {"DvcLock"},
    "registry.store": {"Registry"},
}
FILE_TYPES = ("Artifacts", "Path", "PurePath", "DvcLock", "Registry")

PATH_METHODS = (
    "exists", "is_file", "is_dir", "is_symlink", "iterdir", "glob", "rglob", "stat", "lstat", "open",
    "read_text", "read_bytes", "write_text", "write_bytes", "touch", "mkdir", "unlink", "rmdir",
    "rename", "replace", "resolve", "samefile", "owner", "group", "readlink", "chmod",
)  # fmt: skip


class FileTouched(AssertionError):
    """A judge reached the disk or another process: `what` names how."""


def _raiser(what: str) -> Callable[..., Any]:
    def touched(*args: Any, **kwargs: Any) -> Any:
        raise FileTouched(f"{what} called while judging ({args[:1]!r})")

    return touched


def _targets() -> list[tuple[Any, str]]:
    return [
        (builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "lstat"), (os, "listdir"),
        (os, "scandir"), (os, "walk"), (subprocess, "run"), (subprocess, "Popen"),
        *((pathlib.Path, m) for m in PATH_METHODS if hasattr(pathlib.Path, m)),
    ]  # fmt: skip


@contextlib.contextmanager
def no_files() -> Iterator[None]:
    """Every way to the disk or another process raises FileTouched inside the block."""
    saved = [(owner, name, owner.__dict__[name] if name in vars(owner) else getattr(owner, name))
             for owner, name in _targets()]  # fmt: skip
    try:
        for owner, name, _ in saved:
            what = f"{getattr(owner, '__name__', owner)}.{name}"
            setattr(owner, name, _raiser(what))
        yield
    finally:
        for owner, name, old in saved:
            setattr(owner, name, old)


def outcome_of(step: Callable[[], Any]) -> tuple[Any, ...]:
    """What a judge or picture gave, comparable: its verdict, picture, or the exception it raised."""
    try:
        got = step()
    except FileTouched:
        raise
    except Exception as e:  # any: a judge may raise what it raised before, the same with files closed
        return ("raised", type(e).__name__, str(e))
    if hasattr(got, "status"):
        return ("outcome", got.status, got.measured, got.message, got.threshold)
    if hasattr(got, "html"):
        return ("picture", got.html, got.caption)
    return ("value", got)


def refused(step: Callable[[], Any]) -> tuple[Any, str | None]:
    """Records read as the check reads them (a refusal: nothing to judge, said why)."""
    try:
        return step(), None
    except (StageNotRun, NonFinite, ArtifactError, ValidationError) as e:
        return None, f"{type(e).__name__}: {e}"


def plain_problems(gate: Gate, a: Artifacts, t: dict[str, Any]) -> list[str]:
    """Each way `gate` is not a judge of plain values on tree `a`: a judge or picture that touched a
    file, or gave another verdict, picture or error with the disk closed than with it open."""
    problems = []
    judge_reads = gate.read, lambda r: gate.judge(r, t)
    picture_reads = gate.read_for_picture or gate.read, lambda r: gate.picture(r, t)
    for what, (read, use) in (("judge", judge_reads), ("picture", picture_reads)):
        records, why = refused(lambda read=read: read(a.for_gate(), t))
        if why is not None:
            continue  # nothing read, nothing judged (the check's skip, fail or error)
        if isinstance(records, Artifacts):
            problems.append(f"{gate.id}: its {what} is handed the whole tree, not records")
            continue
        open_ = outcome_of(lambda use=use, records=records: use(records))
        try:
            with no_files():
                closed = outcome_of(lambda use=use, records=records: use(records))
        except FileTouched as e:
            problems.append(f"{gate.id}: its {what} {e}")
            continue
        if closed != open_:
            problems.append(f"{gate.id}: its {what} gave {closed!r} with files closed, {open_!r} open")
    return problems


def has_own_reader(gate: Gate) -> bool:
    return gate.read is not whole_tree


def module_of(gate: Gate) -> str:
    """The module that defines the gate's judge (a lambda or a function: where its code lives)."""
    return gate.judge.__module__


def without_reader(gates: list[Gate]) -> list[str]:
    """Each gate of a module not in NOT_YET_SPLIT whose judge still gets the whole tree."""
    return [g.id for g in gates if module_of(g) not in NOT_YET_SPLIT and not has_own_reader(g)]


def static_problems(source: str, where: str) -> list[str]:
    """What in a judge module's source reaches files: an import, a parameter of a file type, open()."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            problems += [
                f"{where}: imports {n.name}" for n in node.names if n.name.split(".")[0] in FILE_MODULES
            ]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if mod.split(".")[0] in FILE_MODULES:
                problems.append(f"{where}: imports from {mod}")
            problems += [
                f"{where}: imports {mod}.{n.name}" for n in node.names if n.name in FILE_NAMES.get(mod, ())
            ]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                note = ast.unparse(arg.annotation) if arg.annotation is not None else ""
                if any(name in note for name in FILE_TYPES):
                    problems.append(f"{where}: {getattr(node, 'name', 'lambda')}({arg.arg}: {note})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            problems.append(f"{where}: line {node.lineno} calls open()")
    return problems


def main(argv: list[str]) -> int:
    """`PYTHONPATH=. python3 tests/plain_judges.py ROOT`: every gate of ROOT's tree judged with files closed, one line
    each (the house test's check on any tree, e.g. /work/main's); exit 1 if a split gate touched one."""
    from pathlib import Path

    from gates.judges import catalogue
    from gates.reading.dvclock import DvcLock
    from params.project import load_judging

    root = Path(argv[0] if argv else ".")
    params = load_judging(root / "params.yaml")
    a = Artifacts(root, DvcLock.read(root), params, None)
    bad = 0
    for g in catalogue.GATES:
        problems = plain_problems(g, a, params.thresholds)
        split = module_of(g) not in NOT_YET_SPLIT
        bad += bool(split and problems)
        print(f"{g.id:20} {'split' if split else 'whole_tree':10} {problems[0] if problems else 'plain'}")
    return 1 if bad else 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
