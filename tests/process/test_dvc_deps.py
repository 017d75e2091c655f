"""dvc.yaml's deps are complete: each stage depends on every project file its command runs.

The source of truth is the code: starting at the module a stage's `cmd` runs, follow every
`import` / `from ... import` of a project package (also inside functions, relative ones resolved),
every module a command line or an import call names explicitly (`[sys.executable, "-m", "x.y"]`,
`torchrun_cmd(world, "pipeline.train")`, `importlib.import_module("x.y")`), each package's
__init__.py, every schema named in a string (`"metrics.schema.json"`), and the schema of every
artifact kind named in a read or write of contracts/artifact_table.py (`write("metrics", ...)`: its
schema, metrics.schema.json, and no other kind's; every such call names its kind as a literal). Any
other string is not a module: the word "gates" in a message imports nothing. A stage missing one of
them would not re-run when that file changes, and the gates would judge the old code's artifacts; a
stage depending on a project source file it never imports re-runs for nothing. A folder dep covers
its files. The computation is gates/reading/scope.py's, the one `gates check` holds a declared stage to
(params.yaml gates.scope.stages): one implementation.
Re-run after adding modules: `python3 -m pytest tests/process/test_dvc_deps.py`.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
from functools import cache
from pathlib import Path

import pytest

from conftest import REPO, scratch_repo
from gates.reading import scope
from gates.reading.scope import KIND_CALLS, PACKAGES, Sources, artifact_schema, covered

SOURCES = Sources(REPO)


def module_file(name: str) -> Path | None:
    """The file of a project module (a package means its __init__.py), or None."""
    return SOURCES.module_file(name)


def closure(module: str) -> set[str]:
    """Repository-relative paths of every project file `python -m module` may import or read as a schema."""
    required = SOURCES.required(f"python3 -m {module}")
    assert required is not None, f"{module}: not a project module"
    return set(required)


def _imported_names(tree: ast.AST, path: Path = REPO / "x.py") -> set[str]:
    return scope.imported_names(tree, SOURCES.package_of(path))


_artifact_schema = artifact_schema


def stage_module(cmd: str) -> str:
    argv = shlex.split(cmd)
    assert argv[0].startswith("python") and "-m" in argv, f"{cmd!r}: a stage runs `python3 -m MODULE`"
    return argv[argv.index("-m") + 1]


@cache
def stages() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each resolved stage (foreach expanded by DVC itself): its cmd and its file deps."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        return {
            s.addressing: (s.cmd, tuple(d.def_path for d in s.deps if not isinstance(d, ParamsDependency)))
            for s in repo.index.stages
        }


def missing_deps(cmd: str, deps: tuple[str, ...]) -> list[str]:
    return sorted(p for p in closure(stage_module(cmd)) if not covered(p, deps))


def extra_deps(cmd: str, deps: tuple[str, ...]) -> list[str]:
    """Project source files (modules, schemas) a stage depends on but never imports or reads."""
    source = [d for d in deps if d.split("/")[0] in PACKAGES and d.endswith((".py", ".schema.json"))]
    return sorted(set(source) - closure(stage_module(cmd)))


@pytest.mark.parametrize("stage", sorted(stages()))
def test_stage_depends_on_its_import_closure(stage: str) -> None:
    cmd, deps = stages()[stage]
    missing = missing_deps(cmd, deps)
    assert not missing, f"dvc.yaml stage {stage} misses deps: {missing}"


@pytest.mark.parametrize("stage", sorted(stages()))
def test_stage_depends_on_no_source_it_never_imports(stage: str) -> None:
    cmd, deps = stages()[stage]
    extra = extra_deps(cmd, deps)
    assert not extra, f"dvc.yaml stage {stage} depends on files its command never imports: {extra}"


def names(code: str, path: str = "x.py") -> set[str]:
    return _imported_names(ast.parse(code), REPO / path)


def test_only_real_imports_and_explicit_module_runs_count() -> None:
    """Negative controls: a string that happens to be a package name is not an import; every form
    of a real import, and a module run explicitly, is."""
    assert names('x = "gates"\nprint("xtrain.core.model", "-m")\n') == set()
    assert "gates/__init__.py" not in closure("pipeline.corpus")  # params/config.py says "gates"
    assert names("import xtrain.core.model\nfrom gates.campaigns import bisect\n") >= {
        "xtrain.core.model",
        "gates.campaigns",
        "gates.campaigns.bisect",
    }
    assert names("def f():\n    from contracts.fileio import atomic_write_json\n") >= {"contracts.fileio"}
    assert "registry.store" in names("from .store import Registry\n", "registry/checks.py")
    assert "registry" in names("from . import store\n", "registry/checks.py")
    assert names('cmd = [sys.executable, "-m", "pipeline.scaling", "rank"]\n') == {"pipeline.scaling"}
    assert names('torchrun_cmd(2, "pipeline.train", "proc")\n') == {"pipeline.train"}
    assert names('importlib.import_module("xtrain.core.model")\n') == {"xtrain.core.model"}
    assert names('SCHEMA = "metrics.schema.json"\n') == {"metrics.schema.json"}


def _table_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls of contracts/artifact_table.py's kind-taking functions in a file, by the names it binds:
    `from contracts import artifact_table [as x]`, `from contracts.artifact_table import write`."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "contracts":
            modules |= {a.asname or a.name for a in node.names if a.name == "artifact_table"}
        elif isinstance(node, ast.ImportFrom) and node.module == "contracts.artifact_table":
            functions |= {a.asname or a.name for a in node.names if a.name in KIND_CALLS}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "contracts.artifact_table" and a.asname}

    def is_table_call(call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Name):
            return func.id in functions
        return (
            isinstance(func, ast.Attribute)
            and func.attr in KIND_CALLS
            and (isinstance(func.value, ast.Name) and func.value.id in modules)
        )

    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and is_table_call(n)]


def unseen_kinds(path: Path) -> list[str]:
    """`file:line` of each artifact-table call whose kind is not a literal: its schema would be a dep
    the closure cannot see."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.relative_to(REPO)}:{c.lineno}" for c in _table_calls(tree) if _artifact_schema(c) is None]


def test_every_stage_names_the_artifact_kinds_it_reads_and_writes() -> None:
    files = {
        REPO / f for cmd, _ in stages().values() for f in closure(stage_module(cmd)) if f.endswith(".py")
    }
    unseen = sorted(u for f in files if f.name != "artifact_table.py" for u in unseen_kinds(f))
    assert not unseen, f"an artifact kind that is not a literal hides a schema dep from dvc.yaml: {unseen}"


def test_a_kind_names_its_schema_and_no_other() -> None:
    """The rule and its negative controls: a literal kind is its schema; a kind in a variable is
    reported; a read of something else that is not a kind adds nothing."""
    assert names('from contracts import artifact_table\nartifact_table.write("metrics", p, m)\n') >= {
        "metrics.schema.json"
    }
    assert not {n for n in names('artifact_table.read("not-a-kind", p)\n') if n.endswith(".schema.json")}
    hidden = ast.parse("from contracts import artifact_table as t\nfrom contracts.artifact_table import read\n"
                       "t.write(kind, p, m)\nread(k, p)\nt.read('env', p)\nother.read(k)\n")  # fmt: skip
    assert [c.lineno for c in _table_calls(hidden) if _artifact_schema(c) is None] == [3, 4]
    train = closure("pipeline.train")
    assert "contracts/schemas/metrics.schema.json" in train  # train writes metrics
    assert "contracts/schemas/gates_report.schema.json" not in train  # the gates' report is not its


def test_a_missing_import_and_a_needless_dep_are_reported() -> None:
    cmd, deps = stages()["corpus"]
    assert "xtrain/core/corpus.py" in deps and not missing_deps(cmd, deps) and not extra_deps(cmd, deps)
    without = tuple(d for d in deps if d != "xtrain/core/corpus.py")
    assert missing_deps(cmd, without) == ["xtrain/core/corpus.py"]
    assert extra_deps(cmd, (*deps, "gates/__init__.py", "xtrain/core/model.py")) == [
        "gates/__init__.py",
        "xtrain/core/model.py",
    ]


def test_no_params_value_reaches_a_shell_command() -> None:
    raw = (REPO / "dvc.yaml").read_text()
    assert not re.search(r"cmd:.*\$\{(?!item\.|key)", raw), "dvc.yaml interpolates a params value into a cmd"
    for cmd, _ in stages().values():
        assert "${" not in cmd and ";" not in cmd and "--nproc-per-node" not in cmd, cmd


def test_the_closure_finds_what_a_stage_misses() -> None:
    """Negative control: the old dvc.yaml's train deps (before issue #11) miss env.py, faults.py, schemas."""
    modules = ("checkpoint", "comm", "config", "data", "determinism", "launch", "model", "optim", "train")
    old_train_deps = ("pipeline/train.py", *(f"xtrain/{m}.py" for m in modules))
    missing = missing_deps("python3 -m pipeline.train proc", old_train_deps)
    assert {"xtrain/core/env.py", "xtrain/__init__.py", "contracts/schemas/metrics.schema.json"} <= set(
        missing
    )
    assert "contracts/schemas/params.schema.json" in missing  # config.py loads it
    assert not covered("xtrain/core/env.py", ("xtrain/e",)) and covered("xtrain/core/env.py", ("xtrain/",))


def dvc_status(root: Path) -> dict:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    out = subprocess.run(
        ["dvc", "status", "--json"], cwd=root, capture_output=True, text=True, check=True, env=env
    )
    return json.loads(out.stdout or "{}")


def changed_deps(status: dict, stage: str) -> dict:
    return {
        k: v
        for entry in status.get(stage, [])
        if isinstance(entry, dict)
        for k, v in entry.get("changed deps", {}).items()
    }


def test_editing_an_imported_module_makes_its_stages_changed(tmp_path: Path) -> None:
    """Real DVC: after an edit of xtrain/core/env.py (imported only through the launchers) and of
    contracts/fileio.py (imported by every stage), `dvc status` names them for exactly those stages."""
    root = scratch_repo(tmp_path)
    before = dvc_status(root)
    for rel in ("xtrain/core/env.py", "contracts/fileio.py"):
        with open(root / rel, "a") as f:
            f.write("\n# edited\n")
    after = dvc_status(root)
    for stage, (cmd, _) in stages().items():
        imported = closure(stage_module(cmd))
        for rel in ("xtrain/core/env.py", "contracts/fileio.py"):
            if rel in imported:
                assert rel not in changed_deps(before, stage), (
                    f"dvc.lock is stale for {stage} ({rel}): run `dvc repro` and commit dvc.lock"
                )
                assert changed_deps(after, stage).get(rel) == "modified", (stage, rel, after.get(stage))
            else:
                assert rel not in changed_deps(after, stage), (stage, rel)  # the control: others stay
    assert any("xtrain/core/env.py" not in closure(stage_module(c)) for c, _ in stages().values())


def test_every_source_dep_exists() -> None:
    """A dep that no stage writes must be in the repository: a moved file would otherwise fail
    `dvc repro` only when the stage runs (seen: registry/schemas after the schemas moved)."""
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        outs = {o.def_path for s in repo.index.stages for o in s.outs}
    deps = {d for _, ds in stages().values() for d in ds}
    gone = sorted(d for d in deps if not (REPO / d).exists() and not covered(d, tuple(outs)))
    assert not gone, f"dvc.yaml names deps that do not exist: {gone}"
