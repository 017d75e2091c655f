"""The pipeline's required scope (issue #51 item 1): which stages the verdict needs, and every file each
one's command imports (torch-free: `ast` over the source, nothing is imported).

dvc.yaml says which stages exist and what each depends on, and it can say less: a stage deleted, a dep
deleted, `stages: {}`. The gates then judged whatever was left (exit 0). So the required scope comes
from elsewhere: the stages a project declares in its params file (`gates.scope.stages`, validated by
contracts/schemas/thresholds.schema.json; `gates init` and the examples declare theirs the same way),
and for each of them the deps its command must declare, computed from the code itself:

- starting at the module a stage's `cmd` runs (`python3 -m pkg.mod`: `pkg/mod.py`, or its
  `__main__.py`, and each parent package's `__init__.py`) or each Python script it names
  (`python3 train.py`, `python3 -m torch.distributed.run ... train.py`), follow every `import` /
  `from ... import` (also inside functions, relative ones resolved), every module a command line or an
  import call names explicitly (`[sys.executable, "-m", "x.y"]`, `torchrun_cmd(world, "pipeline.train")`,
  `importlib.import_module("x.y")`), each package's `__init__.py`, every schema named in a string
  (`"metrics.schema.json"`), and the schema of every artifact kind named in a read or write of
  contracts/artifact_table.py (`write("metrics", ...)`: metrics.schema.json, and no other kind's);
- a module is a file of this project (the DVC root's own modules) or of the harness's packages
  (PACKAGES, beside gates/); any other string is not a module: the word "gates" in a message imports
  nothing. Harness files count where the project lives inside the harness (this repository and its
  examples/); a project elsewhere (`gates init`) is held to its own files.

tests/process/test_dvc_deps.py holds dvc.yaml to the same computation (this module: one implementation).
"""

from __future__ import annotations

import ast
import itertools
import os
import posixpath
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contracts.artifact_table import TABLE
from contracts.validate import ValidationError
from contracts.yamlfile import decoded, loads

HARNESS = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "params", "xtrain", "gates", "registry", "pipeline", "runrecord")
SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]+\.schema\.json$")
# Calls that take a module name (argument index): the module is run or imported, not just named.
MODULE_ARGS = {"import_module": 0, "run_module": 0, "torchrun_cmd": 1}
# contracts/artifact_table.py's functions that take an artifact kind first: the kind's schema is read
KIND_CALLS = ("read", "write", "check", "artifact")
SHELL_OPS = frozenset({"&&", "||", ";", "|"})
ASSIGNMENT = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL
)  # `REPLICA=0 python3 ...`: the shell's env prefix
DECLARED = "gates.scope.stages"
HEAD_PARAMS = "HEAD's params file"  # names an error that is dropped


def _func_name(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _str_arg(node: ast.Call, index: int) -> str | None:
    if len(node.args) > index and isinstance(node.args[index], ast.Constant):
        value = node.args[index].value
        return value if isinstance(value, str) else None
    return None


def _call_module(node: ast.Call) -> str | None:
    name = _func_name(node)
    return _str_arg(node, MODULE_ARGS[name]) if name in MODULE_ARGS else None


def artifact_schema(node: ast.Call) -> str | None:
    """The schema of the artifact kind a call names (`artifact_table.read("env", ...)`), if any."""
    kind = _str_arg(node, 0) if _func_name(node) in KIND_CALLS else None
    return TABLE[kind].schema if kind in TABLE else None


def _dash_m(node: ast.List | ast.Tuple) -> list[str]:
    """Modules after a literal "-m" in a command line written as a list: ["python3", "-m", "x.y"]."""
    items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    return [b for a, b in itertools.pairwise(items) if a == "-m" and isinstance(b, str)]


def from_module(node: ast.ImportFrom, package: str) -> str | None:
    """The absolute module of `from X import ...`, relative ones resolved against `package`."""
    if node.level == 0:
        return node.module
    parts = package.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])]) or None


def imported_names(tree: ast.AST, package: str) -> set[str]:
    """Module names a file (of `package`) imports or runs explicitly, and the schema file names it
    mentions or reads through an artifact kind. Every node is visited (a stack, not ast.walk's
    generators: half the time, and the check parses ~70 files)."""
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Import:
            names.update(a.name for a in node.names)
        elif kind is ast.ImportFrom and (module := from_module(node, package)):
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names)
        elif kind is ast.Call and (module := _call_module(node) or artifact_schema(node)):
            names.add(module)  # a module run by name, or the schema of an artifact kind
        elif kind is ast.List or kind is ast.Tuple:
            names.update(_dash_m(node))
        elif kind is ast.Constant and isinstance(node.value, str) and SCHEMA_NAME.match(node.value):
            names.add(node.value)
        stack += children(node)
    return names


def children(node: ast.AST) -> list[ast.AST]:
    """The child nodes of `node` (ast.iter_child_nodes, as one list)."""
    found: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name)
        if isinstance(value, list):
            found += [v for v in value if isinstance(v, ast.AST)]
        elif isinstance(value, ast.AST):
            found.append(value)
    return found


def parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def commands(cmd: Any) -> list[list[str]]:
    """Each simple command of a stage's cmd (a string or DVC's list of strings), split as a shell
    would split its words; a cmd shlex cannot split names no command."""
    out: list[list[str]] = []
    for text in cmd if isinstance(cmd, list) else [cmd]:
        lexer = shlex.shlex(str(text), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True  # `a&&b` and `f;` split at the operator, as a shell does
        try:
            words = list(lexer)
        except ValueError:
            continue
        for is_op, group in itertools.groupby(words, lambda w: w in SHELL_OPS):
            if not is_op:
                argv = list(group)
                out.append(list(itertools.dropwhile(ASSIGNMENT.fullmatch, argv)))
    return out


def covered(path: str, deps: tuple[str, ...] | list[str]) -> bool:
    """`path` is a dep or inside a folder dep (paths as dvc.yaml writes them, normalised)."""
    for dep in deps:
        d = posixpath.normpath(dep)
        if path == d or path.startswith(d + "/"):
            return True
    return False


@dataclass
class Sources:
    """The project at `root` (a DVC root) and the harness's packages: each source file parsed once, each
    module and schema name looked up once."""

    root: Path
    harness: Path = HARNESS
    _names: dict[Path, set[str]] = field(default_factory=dict)
    _files: dict[str, Path | None] = field(default_factory=dict)
    _schemas: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        self.counts_harness = self.root == self.harness or self.harness in self.root.parents
        for pkg in PACKAGES:  # every schema file, by name (a name found twice names none)
            for path in (self.home(pkg) / pkg / "schemas").glob("*.schema.json"):
                self._schemas[path.name] = path if path.name not in self._schemas else Path()

    def home(self, top: str) -> Path:
        """Where top-level package `top` lives: the project's own copy when it has one (a checkout of
        the harness elsewhere, as `gates bisect` makes), else the harness's (a project beside it)."""
        if top in PACKAGES and not (self.root / top).is_dir():
            return self.harness
        return self.root

    def module_file(self, name: str) -> Path | None:
        """The file of a module of the harness's packages or of the project (a package: its
        __init__.py), or None: any other module is not ours to depend on."""
        if name not in self._files:
            self._files[name] = self._find(name)
        return self._files[name]

    def _find(self, name: str) -> Path | None:
        parts = name.split(".")
        if not all(parts):
            return None
        base = self.home(parts[0]) / Path(*parts)
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
        return None

    def schema_file(self, name: str) -> Path | None:
        found = self._schemas.get(name)
        return found if found and found.name else None

    def package_of(self, path: Path) -> str:
        top = self.root if self.root in path.parents else self.harness
        return ".".join(path.relative_to(top).with_suffix("").parts[:-1])

    def names(self, path: Path) -> set[str]:
        """What a file imports (parsed once); a file that is not Python is one line naming it."""
        if path not in self._names:
            try:
                tree = ast.parse(path.read_bytes())
            except SyntaxError as e:  # a NUL byte too (Python 3.11)
                raise ValidationError(str(path), f"line {e.lineno}", f"not Python: {e.msg}") from None
            self._names[path] = imported_names(tree, self.package_of(path))
        return self._names[path]

    def counts(self, path: Path) -> bool:
        return self.counts_harness or self.root in path.parents

    def closure(self, starts: list[Path]) -> set[Path]:
        """Every file of the project reachable from `starts` (modules and the schemas they name)."""
        seen: set[Path] = set()
        todo = list(starts)
        while todo:
            path = todo.pop()
            if path in seen or not self.counts(path):
                continue
            seen.add(path)
            if path.suffix != ".py":
                continue
            for name in self.names(path):
                if SCHEMA_NAME.match(name):
                    todo += [s for s in [self.schema_file(name)] if s]
                elif (target := self.module_file(name)) is not None:
                    todo.append(target)
                    todo += [p for p in map(self.module_file, parents(name)) if p]
        return seen

    def starts(self, argv: list[str]) -> list[Path]:
        """The files a command line runs: `python -m MODULE`'s module and each project script it names."""
        if not argv or not Path(argv[0]).name.startswith("python"):
            return []
        found: list[Path] = []
        if "-m" in argv[1:-1]:
            module = argv[argv.index("-m") + 1]
            start = self.module_file(f"{module}.__main__") or self.module_file(module)
            if start is not None:
                found = [start, *[p for p in map(self.module_file, parents(module)) if p]]
        found += [self.root / w for w in argv[1:] if w.endswith(".py") and (self.root / w).is_file()]
        return found

    def required(self, cmd: Any) -> list[str] | None:
        """The deps a stage's command requires, as dvc.yaml paths relative to the root; None when it
        runs no module or script of the project (nothing to follow)."""
        starts = [p for argv in commands(cmd) for p in self.starts(argv)]
        if not starts:
            return None
        return sorted(Path(os.path.relpath(p, self.root)).as_posix() for p in self.closure(starts))


def declared_stages(thresholds: dict[str, Any] | None) -> list[str] | None:
    """The stages a project declares its verdict needs (params `gates.scope.stages`), or None."""
    scope = (thresholds or {}).get("scope")
    return list(scope["stages"]) if isinstance(scope, dict) and "stages" in scope else None


def committed_stages(root: Path, params: str) -> list[str]:
    """The stages the params file at git HEAD declares ([] outside git, for a file outside the project or
    one HEAD cannot read): a declaration deleted from the working file must not turn the check off, as
    a stage deleted from the working dvc.lock does not (gates/reading/dvclock.py)."""
    rel = os.path.relpath(Path(params).resolve(), root.resolve())  # `params` as the check names it
    if rel.startswith(".."):
        return []
    try:  # read as the working params file is (contracts/yamlfile.py loads); a failed show prints nothing
        out = subprocess.run(
            ["git", "-C", str(root), "show", f"HEAD:./{Path(rel).as_posix()}"],
            capture_output=True,
            timeout=5,  # pragma: no mutate -- equivalent: only bounds a git that hangs
        )
        text = decoded(
            out.stdout,
            HEAD_PARAMS,  # pragma: no mutate -- equivalent: it names an error that is dropped
        )
        data = loads(text)
    except (OSError, subprocess.TimeoutExpired, ValidationError, yaml.YAMLError):
        return []
    gates = data.get("gates") if isinstance(data, dict) else None
    stages = declared_stages(gates if isinstance(gates, dict) else None) or []
    return [str(s) for s in stages] if all(isinstance(s, (str, int)) for s in stages) else []


def required_stages(thresholds: dict[str, Any] | None, root: Path, params: str) -> list[str] | None:
    """The working declaration with every stage git HEAD's declares (None: neither declares one)."""
    working, head = declared_stages(thresholds), committed_stages(root, params)
    if working is None and not head:
        return None
    return list(dict.fromkeys([*(working or []), *head]))


def scope_problems(definitions: dict[str, Any], declared: list[str] | None, sources: Sources) -> list[str]:
    """What dvc.yaml lacks of the required scope: an empty pipeline, a declared stage it does not
    define, a dep a declared stage's command imports that it does not declare. [] when complete."""
    if not definitions:
        return ["dvc.yaml defines no stage: the pipeline is empty and nothing would be judged"]
    problems = []
    for stage in declared or []:
        d = definitions.get(stage)
        if d is None:
            problems.append(f"stage {stage} ({DECLARED}) is not in dvc.yaml")
            continue
        need = sources.required(d.cmd)
        if need is None:
            problems.append(
                f"stage {stage}: its cmd {d.cmd!r} runs no Python module or script of this project"
            )
            continue
        missing = [p for p in need if not covered(p, d.deps)]
        if missing:
            problems.append(f"stage {stage}: dvc.yaml lacks deps its command imports: {', '.join(missing)}")
    return problems
