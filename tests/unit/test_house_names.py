"""House rules of issue #53 item 3, one name per idea (docs/house.md "One name per idea"):

- two modules of the project's packages that mean different things never share a file name; a
  pipeline stage (pipeline/X.py) and a judge (gates/judges/X.py) may bear the name of their subject,
  beside the one module that implements it (an explicit allow-list, a reason per entry);
- params.yaml is parsed in params/ only: every other module asks params/ (load_params,
  load_judging, set_in_file, write_with_section), except the readers listed with their reason.

Each checker has a negative control: a planted duplicate, a planted reader, are caught.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from test_house import REPO

# runrecord is the user-facing library (its own package, not in test_house.PACKAGES): a name there
# collides in a reader's head as much as one in xtrain/.
NAMED = ("contracts", "params", "xtrain", "registry", "runrecord", "gates", "pipeline")
EVERY_PACKAGE_HAS = ("__init__.py", "__main__.py")
# Rooms whose modules bear their subject's name: a stage of the pipeline, a gate's judge.
SUBJECT_ROOMS = ("pipeline/", "gates/judges/")
# basename -> (the modules that share it, why that is one idea and not two)
SHARED = {
    "closed_loop.py": (
        {"gates/judges/closed_loop.py", "pipeline/closed_loop.py"},
        "stage closed_loop and its gate (the run itself is xtrain/export/closed_loop_run.py)",
    ),
    "config.py": (
        {"params/config.py", "pipeline/config.py"},
        "params/config.py resolves params.yaml; pipeline/config.py is its command line (`config get|set`)",
    ),
    "corpus.py": ({"pipeline/corpus.py", "xtrain/core/corpus.py"}, "stage corpus and the corpus code"),
    "env.py": ({"pipeline/env.py", "xtrain/core/env.py"}, "stage env and the environment fingerprint"),
    "pilot.py": (
        {"gates/judges/pilot.py", "pipeline/pilot.py", "xtrain/core/pilot.py"},
        "stage pilot, its gate, and the pilot run",
    ),
    "probes.py": (
        {"gates/judges/probes.py", "pipeline/probes.py", "xtrain/core/probes.py"},
        "stage probes, its gate, and the probes",
    ),
    "provenance.py": (
        {"gates/judges/provenance.py", "registry/provenance.py"},
        "the provenance gate (where runs were made) and the registry's provenance record of a blessing",
    ),
    "scaling.py": (
        {"gates/judges/scaling.py", "pipeline/scaling.py", "xtrain/bench/scaling.py"},
        "stage scaling, its gate, and the benchmark",
    ),
    "tokenizer.py": (
        {"pipeline/tokenizer.py", "xtrain/core/tokenizer.py"},
        "stage tokenizer and the BPE code",
    ),
    "train.py": ({"pipeline/train.py", "xtrain/core/train.py"}, "stage train and the per-rank loop"),
}
# module:function outside params/ found parsing YAML about params.yaml, and why each may.
PARAMS_READERS = {
    "gates/reading/dvcyaml.py:context": "DVC's `${...}` context: the raw file as DVC loads it (no profile)",
    "gates/reading/scope.py:committed_stages": "git HEAD's `gates.scope.stages`, from `git show` bytes",
    "gates/campaigns/bisect.py:pipeline_inputs": "parses a commit's dvc.yaml; hashes params.yaml's blob",
    "gates/campaigns/mutate.py:drop_stages": "parses dvc.yaml and dvc.lock; params.config.narrow_scope edits params",
}


def modules(root: Path = REPO, packages: tuple[str, ...] = NAMED) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for pkg in packages for p in (root / pkg).rglob("*.py"))


def shared_names(paths: list[str]) -> dict[str, set[str]]:
    """basename -> the modules bearing it, for every basename borne by more than one module."""
    by_name: dict[str, set[str]] = defaultdict(set)
    for rel in paths:
        if Path(rel).name not in EVERY_PACKAGE_HAS:
            by_name[Path(rel).name].add(rel)
    return {name: found for name, found in by_name.items() if len(found) > 1}


def name_problems(paths: list[str], allowed: dict[str, tuple[set[str], str]]) -> list[str]:
    """A shared name not allowed (or allowed for other modules), a stale entry, or an allowed group
    with more than one module outside the subject rooms (two implementations of one name)."""
    shared = shared_names(paths)
    problems = [
        f"{name}: {sorted(found)} share a name (allowed: {sorted(allowed.get(name, (set(), ''))[0])})"
        for name, found in sorted(shared.items())
        if found != allowed.get(name, (set(), ""))[0]
    ]
    problems += [f"{name}: allowed but no longer shared" for name in sorted(set(allowed) - set(shared))]
    for name, (found, _) in sorted(allowed.items()):
        if len([p for p in found if not p.startswith(SUBJECT_ROOMS)]) > 1:
            problems.append(f"{name}: more than one module outside {SUBJECT_ROOMS}: {sorted(found)}")
    return problems


def test_no_two_modules_share_a_name() -> None:
    assert name_problems(modules(), SHARED) == []
    assert all(reason for _, reason in SHARED.values())


def test_a_planted_duplicate_is_caught() -> None:
    """Negative control: the pairs renamed in issue #53 re-planted, a third module joining an allowed
    group, two implementations under one name, and an entry left after its rename."""
    today = modules()
    assert name_problems([*today, "runrecord/checks.py"], SHARED) == [
        "checks.py: ['registry/checks.py', 'runrecord/checks.py'] share a name (allowed: [])"
    ]
    assert name_problems([*today, "runrecord/rundir.py"], SHARED) == [
        "rundir.py: ['runrecord/rundir.py', 'xtrain/core/rundir.py'] share a name (allowed: [])"
    ]
    assert name_problems([*today, "contracts/train.py"], SHARED)[0].startswith("train.py: ")
    two = {"x.py": ({"params/x.py", "registry/x.py"}, "two implementations")}
    assert name_problems(["params/x.py", "registry/x.py"], two) == [
        "x.py: more than one module outside ('pipeline/', 'gates/judges/'): ['params/x.py', 'registry/x.py']"
    ]
    assert name_problems(["pipeline/y.py"], {"y.py": ({"pipeline/y.py", "gates/judges/y.py"}, "")}) == [
        "y.py: allowed but no longer shared"
    ]


YAML_MODULES = {"yaml", "yamlfile"}  # PyYAML, contracts/yamlfile.py
YAML_CALLS = {"safe_load", "load", "load_all", "safe_load_all", "load_file", "loads", "load_pipeline"}
YAML_CALLS |= {"load_pipeline_text"}


def parses_params(source: str) -> list[str]:
    """The functions that parse YAML (PyYAML, ruamel's YAML(), contracts/yamlfile's loaders) and are
    about params.yaml: they name it in code (not a docstring) or take a `params...` argument."""
    tree = ast.parse(source)
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                if (n.module or "").endswith(("yaml", "yamlfile")) for a in n.names}  # fmt: skip
    found = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        body = fn.body[1:] if _docstring(fn) else fn.body
        defaults = [d for d in fn.args.defaults + fn.args.kw_defaults if d is not None]
        nodes = [n for part in body + defaults for n in ast.walk(part)]
        about = any(_names_params(n) for n in nodes) or any(
            a.arg.startswith("params") for a in fn.args.args + fn.args.kwonlyargs
        )
        if about and any(_parses(n, imported) for n in nodes):
            found.append(fn.name)
    return found


def _names_params(node: ast.AST) -> bool:
    """`"params.yaml"` in code, or a constant that holds it (DEFAULT_PARAMS, HARNESS_PARAMS)."""
    if isinstance(node, ast.Constant):
        return "params.yaml" in str(node.value)
    return isinstance(node, ast.Name) and node.id in {"DEFAULT_PARAMS", "HARNESS_PARAMS"}


def _docstring(fn: ast.AST) -> bool:
    first = fn.body[0]  # type: ignore[attr-defined]
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)


def _parses(node: ast.AST, imported: set[str]) -> bool:
    """A call of a YAML parser: yaml.safe_load(...), yamlfile.load_file(...), YAML().load(...), or a
    loader imported by name from a yaml module."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Name):
        return f.id in imported and f.id in YAML_CALLS
    if not isinstance(f, ast.Attribute) or f.attr not in YAML_CALLS:
        return False
    owner = f.value
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name):
        return owner.func.id == "YAML" or owner.func.id == "_round_trip"
    return isinstance(owner, ast.Name) and (owner.id in YAML_MODULES or owner.id in {"ry", "YAML"})


def params_readers(root: Path = REPO) -> set[str]:
    outside = [p for p in modules(root) if not p.startswith("params/")]
    return {f"{p}:{fn}" for p in outside for fn in parses_params((root / p).read_text(encoding="utf-8"))}


def test_params_yaml_is_parsed_in_params_only() -> None:
    """Every reader outside params/ is one listed with its reason; the checker sees params/'s own loader."""
    assert params_readers() == set(PARAMS_READERS)
    assert all(PARAMS_READERS.values())
    assert parses_params((REPO / "params/config.py").read_text(encoding="utf-8")) == ["load_params"]


OLD_NARROW_SCOPE = """
import io
from pathlib import Path


def narrow_scope(params: Path, skip: list[str]) -> None:
    \"\"\"params.yaml's `gates.scope.stages` without the skipped stages.\"\"\"
    from ruamel.yaml import YAML

    ry = YAML()
    doc = ry.load(params.read_text(encoding="utf-8"))
    doc["gates"]["scope"]["stages"] = [s for s in doc["gates"]["scope"]["stages"] if s not in skip]
    buf = io.StringIO()
    ry.dump(doc, buf)
    params.write_text(buf.getvalue())
"""


def test_a_planted_params_reader_is_caught(tmp_path: Path) -> None:
    """Negative control: gates/campaigns/mutate.py's narrow_scope as it was (ruamel over params.yaml)
    planted in a tree is caught, and a PyYAML reader; a function that names the file only in its
    docstring, or only asks params/, is not one."""
    (tmp_path / "gates" / "campaigns").mkdir(parents=True)
    (tmp_path / "gates" / "campaigns" / "mutate.py").write_text(OLD_NARROW_SCOPE, encoding="utf-8")
    assert params_readers(tmp_path) == {"gates/campaigns/mutate.py:narrow_scope"}
    assert parses_params("import yaml\ndef f():\n    return yaml.safe_load(open('params.yaml'))\n") == ["f"]
    assert parses_params(
        "from contracts.yamlfile import load_file\ndef f(params_path):\n    return load_file(params_path)\n"
    ) == ["f"]
    assert (
        parses_params(
            'import yaml\ndef f():\n    """Reads params.yaml."""\n    return yaml.safe_load("a: 1")\n'
        )
        == []
    )
    assert (
        parses_params(
            "from params.config import load_params\ndef f():\n    return load_params('params.yaml')\n"
        )
        == []
    )
