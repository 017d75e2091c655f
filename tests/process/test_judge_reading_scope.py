"""gates/reading/scope.py under mutation (docs/judge-mutation.md): the required scope, in-process.

What a command runs, what each file imports (every form tests/process/test_dvc_deps.py names, and its negative
controls: a string that names a package imports nothing), which files count (the project's own; the
harness's where the project lives inside it), the closure, and the verdict on dvc.yaml: an empty
pipeline, a declared stage it lacks, a dep its command imports that it does not declare. On small
source trees written here (a harness of two packages and a project beside or inside it).
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from gates.reading.dvcyaml import StageDef
from gates.reading.scope import (
    HARNESS,
    Sources,
    artifact_schema,
    children,
    commands,
    committed_stages,
    covered,
    declared_stages,
    from_module,
    imported_names,
    parents,
    required_stages,
    scope_problems,
)


def names(code: str, package: str = "") -> set[str]:  # a script's: no package
    return imported_names(ast.parse(code), package)


def call(code: str) -> ast.Call:
    node = ast.parse(code).body[0].value
    assert isinstance(node, ast.Call)
    return node


# -- what a file imports ----------------------------------------------------------------------------------


def test_every_form_of_an_import_and_an_explicit_module_run_counts() -> None:
    assert names("import xtrain.core.model, os as o\n") == {"xtrain.core.model", "os"}
    assert names("from gates.campaigns import bisect, mutate as m\n") == {
        "gates.campaigns", "gates.campaigns.bisect", "gates.campaigns.mutate",
    }  # fmt: skip
    assert names("def f():\n    if x:\n        from contracts.fileio import read\n") == {
        "contracts.fileio", "contracts.fileio.read",
    }  # fmt: skip
    assert names('cmd = [sys.executable, "-m", "pipeline.scaling", "rank"]\n') == {"pipeline.scaling"}
    assert names('cmd = ("-m", "a.b", "-m", "c")\n') == {"a.b", "c"}
    assert names('torchrun_cmd(2, "pipeline.train", "proc")\n') == {"pipeline.train"}
    assert names('importlib.import_module("xtrain.core.model")\n') == {"xtrain.core.model"}
    assert names('runpy.run_module("x.y")\n') == {"x.y"}
    assert names('SCHEMA = "metrics.schema.json"\nx = {"k": ["env.schema.json"]}\n') == {
        "metrics.schema.json", "env.schema.json",
    }  # fmt: skip
    assert names('t.write("metrics", p, m)\nread("env", p)\n') == {"metrics.schema.json", "env.schema.json"}


def test_a_string_that_names_a_package_imports_nothing() -> None:
    """The negative controls of tests/process/test_dvc_deps.py: only real imports and explicit runs count."""
    assert names('x = "gates"\nprint("xtrain.core.model", "-m")\nf("-m", "x.y")\n') == set()
    assert names('["-m", 3, "-m"]\n[x, "-m"]\n') == set()
    assert names('import_module(name)\ntorchrun_cmd("a.b")\nrun_module()\nimport_module(3)\n') == set()
    assert names('t.read("not-a-kind", p)\nother(x)("metrics")\nx.schema.json\n"a.schema.jsonx"\n') == set()
    assert names('"dir/metrics.schema.json"\n"metrics.schema.json "\n') == set()


def test_relative_imports_resolve_against_the_package() -> None:
    assert names("from .store import Registry\n", "registry") >= {"registry.store", "registry.store.Registry"}
    assert names("from . import store\n", "registry") == {"registry", "registry.store"}
    assert names("from .. import x\n", "gates.judges") == {"gates", "gates.x"}
    assert names("from ..reading.dvclock import DvcLock\n", "gates.judges") >= {"gates.reading.dvclock"}
    node = ast.parse("from . import a\n").body[0]
    assert from_module(node, "") is None  # a script's relative import names no module


def test_an_artifact_kind_names_its_schema_and_no_other() -> None:
    assert artifact_schema(call('write("metrics", p, m)')) == "metrics.schema.json"
    assert artifact_schema(call('x.artifact("env")')) == "env.schema.json"
    assert artifact_schema(call('check("nope", p)')) is None
    assert artifact_schema(call("write(kind, p)")) is None and artifact_schema(call("write()")) is None
    assert artifact_schema(call('other("metrics", p)')) is None
    assert artifact_schema(call('write(b"metrics", p)')) is None


def test_children_are_every_node_below_once() -> None:
    tree = ast.parse("f(a, b=[1, 2])\n")
    expr = tree.body[0]
    assert children(tree) == [expr] and children(expr) == [expr.value]
    got = children(expr.value)
    assert [type(n).__name__ for n in got] == ["Name", "Name", "keyword"]
    assert children(ast.Constant(1)) == []


def test_parents_and_commands() -> None:
    assert parents("a.b.c") == ["a", "a.b"] and parents("a") == []
    assert commands("python3 -m x.y&&echo 'a b' | tee f; true || python3 t.py > o.txt") == [
        ["python3", "-m", "x.y"], ["echo", "a b"], ["tee", "f"], ["true"], ["python3", "t.py", ">", "o.txt"],
    ]  # fmt: skip
    assert commands(["python3 a.py", "b"]) == [["python3", "a.py"], ["b"]]
    assert commands("echo 'unclosed") == [] and commands("") == [] and commands(3) == [["3"]]
    # the shell's env prefix is no command (a replica stage: `REPLICA=0 python3 train.py`); later words stay
    assert commands("REPLICA=0 _X9=a=b python3 t.py X=1 && A= python3 -m y") == [
        ["python3", "t.py", "X=1"],
        ["python3", "-m", "y"],
    ]
    assert commands("0X=1 python3 t.py") == [["0X=1", "python3", "t.py"]]  # not a name: no assignment
    assert commands("X=1") == [[]] and commands("-X=1 a") == [["-X=1", "a"]]


@pytest.mark.parametrize(
    ("path", "deps", "yes"),
    [("a/b.py", ["a/b.py"], True), ("a/b.py", ["a"], True), ("a/b.py", ["a/"], True), ("a/b.py", ["./a/b.py"], True),
     ("../../c/x.py", ["../../c"], True), ("a/b.py", ["a/b"], False), ("a/bc.py", ["a/b"], False),
     ("a/b.py", [], False), ("a", ["a/b.py"], False)],
)  # fmt: skip
def test_covered_by_a_dep_or_a_folder_dep(path: str, deps: list[str], yes: bool) -> None:
    assert covered(path, deps) is yes


# -- a harness and projects beside or inside it --------------------------------------------------------------


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


HARNESS_FILES = {
    "contracts/__init__.py": "",
    "contracts/io.py": "import json\nSCHEMA = 'a.schema.json'\n",
    "contracts/schemas/a.schema.json": "{}",
    "contracts/schemas/metrics.schema.json": "{}",
    "contracts/schemas/twice.schema.json": "{}",
    "params/schemas/twice.schema.json": "{}",
    "xtrain/__init__.py": "",
    "xtrain/core/__init__.py": "",
    "xtrain/core/model.py": "from contracts import io\nfrom . import optim\n",
    "xtrain/core/optim.py": "def f():\n    import contracts.io\n",
    "xtrain/core/unused.py": "",
    "pipeline/__init__.py": "",
    "pipeline/train.py": "from xtrain.core import model\nfrom contracts.artifact_table import write\nwrite('metrics', 1, 2)\n",
    "pipeline/twice.py": "X = 'twice.schema.json'\n",
    "registry/__init__.py": "",
    "registry/__main__.py": "from registry import x\n",
    "registry/x.py": "",
}


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    write(tmp_path / "h", HARNESS_FILES)
    return tmp_path / "h"


def test_the_harness_is_this_repository() -> None:
    assert (HARNESS / "gates" / "reading" / "scope.py").is_file()


def test_module_files_of_the_harness_and_the_project(harness: Path) -> None:
    write(harness / "ex", {"local.py": "", "pkg/__init__.py": ""})
    s = Sources(harness / "ex", harness)
    assert s.module_file("xtrain.core.model") == harness / "xtrain/core/model.py"
    assert s.module_file("xtrain.core") == harness / "xtrain/core/__init__.py"
    assert s.module_file("local") == (harness / "ex/local.py").resolve()
    assert s.module_file("pkg") == (harness / "ex/pkg/__init__.py").resolve()
    assert s.module_file("xtrain.core.nope") is None and s.module_file("os") is None
    assert s.module_file("a..b") is None and s.module_file("") is None
    (harness / "ex/local.py").unlink()
    assert s.module_file("local") == (harness / "ex/local.py").resolve()  # looked up once per check


def test_schema_files_by_name_and_a_name_found_twice_names_none(harness: Path) -> None:
    s = Sources(harness, harness)
    assert s.schema_file("a.schema.json") == harness / "contracts/schemas/a.schema.json"
    assert s.schema_file("twice.schema.json") is None and s.schema_file("nope.schema.json") is None


def test_package_of_a_harness_file_and_a_project_file(harness: Path) -> None:
    write(harness / "ex", {"pkg/m.py": ""})
    s = Sources(harness / "ex", harness)
    assert s.package_of(harness / "xtrain/core/model.py") == "xtrain.core"
    assert s.package_of(harness / "registry/__init__.py") == "registry"
    assert s.package_of((harness / "ex/pkg/m.py").resolve()) == "pkg"
    assert s.package_of((harness / "ex/top.py").resolve()) == ""


def test_names_parse_each_file_once(harness: Path) -> None:
    s = Sources(harness, harness)
    path = harness / "xtrain/core/model.py"
    assert s.names(path) == {"contracts", "contracts.io", "xtrain.core", "xtrain.core.optim"}
    path.write_text("")
    assert s.names(path) == {"contracts", "contracts.io", "xtrain.core", "xtrain.core.optim"}


def test_the_closure_of_a_module_command(harness: Path) -> None:
    s = Sources(harness, harness)
    assert s.required("python3 -m pipeline.train proc") == [
        "contracts/__init__.py", "contracts/io.py", "contracts/schemas/a.schema.json",
        "contracts/schemas/metrics.schema.json", "pipeline/__init__.py", "pipeline/train.py", "xtrain/__init__.py",
        "xtrain/core/__init__.py", "xtrain/core/model.py", "xtrain/core/optim.py",
    ]  # fmt: skip
    assert s.required("python3 -m registry verify") == [
        "registry/__init__.py",
        "registry/__main__.py",
        "registry/x.py",
    ]
    assert s.required("python -m pipeline.twice") == [
        "pipeline/__init__.py",
        "pipeline/twice.py",
    ]  # no schema
    assert s.required("true") is None and s.required("python3 -m nope") is None and s.required("") is None
    assert (
        s.required("python3") is None and s.required("python3 -m") is None and s.required("bash x.py") is None
    )


def test_a_project_inside_the_harness_counts_its_files(harness: Path) -> None:
    """examples/hf-trainer: its scripts, its own modules and the harness's files (../../)."""
    write(harness / "examples/ex", {"train.py": "import hfconfig\nfrom xtrain.core import optim\n",
                                    "hfconfig.py": "from contracts import io\n", "other.py": ""})  # fmt: skip
    s = Sources(harness / "examples/ex", harness)
    assert s.counts_harness
    assert s.required("python3 train.py --run-dir runs/x") == [
        "../../contracts/__init__.py", "../../contracts/io.py", "../../contracts/schemas/a.schema.json",
        "../../xtrain/__init__.py", "../../xtrain/core/__init__.py", "../../xtrain/core/optim.py",
        "hfconfig.py", "train.py",
    ]  # fmt: skip
    assert (
        s.required(["python3 other.py", "python3 -m torch.distributed.run --nproc 2 train.py"])[-1]
        == "train.py"
    )


def test_a_project_elsewhere_counts_only_its_own_files(harness: Path, tmp_path: Path) -> None:
    """`gates init` anywhere: runrecord is a library it uses, not a file of its own."""
    write(tmp_path / "mine", {"train.py": "import helper\nimport runrecord\nfrom xtrain.core import model\n",
                              "helper.py": "import os\n"})  # fmt: skip
    s = Sources(tmp_path / "mine", harness)
    assert not s.counts_harness
    assert s.required("python3 -m torch.distributed.run --standalone train.py") == ["helper.py", "train.py"]
    assert s.counts((tmp_path / "mine" / "a.py").resolve()) and not s.counts(harness / "xtrain/core/model.py")


def test_the_harness_as_the_project_counts_everything(harness: Path) -> None:
    s = Sources(harness, harness)
    assert s.counts_harness and s.counts(harness / "xtrain/core/unused.py")


# -- the verdict on dvc.yaml ---------------------------------------------------------------------------------


def test_declared_stages_from_thresholds() -> None:
    assert declared_stages({"scope": {"stages": ["a", "b"]}, "x": 1}) == ["a", "b"]
    assert declared_stages({}) is None and declared_stages(None) is None
    assert declared_stages({"scope": None}) is None and declared_stages({"scope": {}}) is None


def test_scope_problems_of_an_empty_an_incomplete_and_a_complete_pipeline(harness: Path) -> None:
    s = Sources(harness, harness)
    need = s.required("python3 -m pipeline.train")
    full = {"train": StageDef("python3 -m pipeline.train", tuple(need)), "other": StageDef("true")}
    assert scope_problems(full, ["train"], s) == [] and scope_problems(full, None, s) == []
    assert (
        scope_problems({}, None, s)
        == scope_problems({}, ["train"], s)
        == ["dvc.yaml defines no stage: the pipeline is empty and nothing would be judged"]
    )
    thin = {
        "train": StageDef(
            "python3 -m pipeline.train", tuple(d for d in need if "optim" not in d and "io" not in d)
        )
    }
    assert scope_problems(thin, ["train", "gone", "other"], s) == [
        "stage train: dvc.yaml lacks deps its command imports: contracts/io.py, xtrain/core/optim.py",
        "stage gone (gates.scope.stages) is not in dvc.yaml",
        "stage other (gates.scope.stages) is not in dvc.yaml",
    ]
    folder = {"train": StageDef("python3 -m pipeline.train", ("contracts", "pipeline", "xtrain/"))}
    assert scope_problems(folder, ["train"], s) == []  # a folder dep covers its files
    shell = {"echo": StageDef("echo hi", ())}
    assert scope_problems(shell, ["echo"], s) == [
        "stage echo: its cmd 'echo hi' runs no Python module or script of this project"
    ]
    assert scope_problems(shell, [], s) == []


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)  # fmt: skip


def test_the_committed_declaration_outside_git_of_a_file_elsewhere_or_unreadable(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write(root, {"params.yaml": "gates:\n  scope:\n    stages: [a, b]\n"})
    assert committed_stages(root, str(root / "params.yaml")) == []  # outside git
    git(root, "init", "-q")
    assert committed_stages(root, str(root / "params.yaml")) == []  # no HEAD
    git(root, "add", "-A")
    git(root, "commit", "-qm", "x")
    assert committed_stages(root, str(root / "params.yaml")) == ["a", "b"]
    assert committed_stages(root, str(tmp_path / "elsewhere.yaml")) == []
    for text in ("gates: [\n", "- 1\n", "gates: 3\n", "gates: {scope: 3}\n", "gates:\n  scope:\n    stages: [[1]]\n",
                 "x: 1\n", "gates:\n  scope:\n    stages: [a, 7]\n"):  # fmt: skip
        (root / "params.yaml").write_text(text)
        git(root, "commit", "-qam", text)
        assert committed_stages(root, str(root / "params.yaml")) == (["a", "7"] if "7" in text else []), text


def test_required_stages_are_the_working_and_the_committed_declarations(tmp_path: Path, monkeypatch) -> None:
    from gates.reading import scope

    monkeypatch.setattr(scope, "committed_stages", lambda root, params: [])
    assert required_stages({}, tmp_path, "p") is None
    assert required_stages({"scope": {"stages": ["a"]}}, tmp_path, "p") == ["a"]
    monkeypatch.setattr(scope, "committed_stages", lambda root, params: ["b", "a"])
    assert required_stages({}, tmp_path, "p") == ["b", "a"]
    assert required_stages({"scope": {"stages": ["a", "c"]}}, tmp_path, "p") == ["a", "c", "b"]


def test_a_relative_import_in_a_script_resolves_against_no_package() -> None:
    assert names("from .a import b\n") == {".a", ".a.b"}  # names no project module: followed nowhere


def test_words_a_shell_keeps_whole_and_commands_after_one_it_cannot_split() -> None:
    assert commands("python3 train.py --run-dir runs/x@proc key=v a,b") == [
        ["python3", "train.py", "--run-dir", "runs/x@proc", "key=v", "a,b"]
    ]
    assert commands(["echo 'unclosed", "python3 a.py"]) == [["python3", "a.py"]]


def test_only_python_runs_python_files_and_only_py_files_are_scripts(harness: Path, tmp_path: Path) -> None:
    write(tmp_path / "mine", {"train.py": "import helper\n", "helper.py": "", "data.txt": "x\n"})
    s = Sources(tmp_path / "mine", harness)
    assert s.required("bash train.py") is None and s.required("echo train.py") is None
    assert s.required("python3 train.py data.txt helper") == ["helper.py", "train.py"]
    assert s.required("python3 -m helper train.py") == ["helper.py", "train.py"]


def test_a_file_that_is_not_python_is_one_line_naming_it(harness: Path) -> None:
    from contracts.validate import ValidationError

    (harness / "xtrain/core/optim.py").write_text("def f(:\n")
    with pytest.raises(ValidationError) as e:
        Sources(harness, harness).required("python3 -m pipeline.train")
    assert str(e.value).startswith(f"{harness / 'xtrain/core/optim.py'}: line 1: not Python: ")
    (harness / "xtrain/core/optim.py").write_bytes(b"x = 1\x00\n")
    with pytest.raises(ValidationError, match=r"optim\.py: line .*: not Python: "):
        Sources(harness, harness).required("python3 -m pipeline.train")


def test_the_committed_declaration_of_a_params_file_above_the_project_is_not_its(tmp_path: Path) -> None:
    write(tmp_path, {"params.yaml": "gates:\n  scope:\n    stages: [a]\n", "sub/dvc.yaml": "stages: {}\n"})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "x")
    assert committed_stages(tmp_path, str(tmp_path / "params.yaml")) == ["a"]
    assert committed_stages(tmp_path / "sub", str(tmp_path / "params.yaml")) == []  # ../params.yaml


def test_the_committed_declaration_is_read_as_the_working_file_is(tmp_path: Path) -> None:
    write(tmp_path, {"params.yaml": "base: &s [a, b]\ngates:\n  scope:\n    stages: *s\n"})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "x")
    assert (
        committed_stages(tmp_path, str(tmp_path / "params.yaml")) == []
    )  # aliases refused, as load_file does
    (tmp_path / "params.yaml").write_text("gates:\n  scope:\n    stages: [a, b]\n")
    git(tmp_path, "commit", "-qam", "plain")
    assert committed_stages(tmp_path, str(tmp_path / "params.yaml")) == ["a", "b"]


def test_every_stage_is_judged_after_one_that_runs_no_python(harness: Path) -> None:
    s = Sources(harness, harness)
    defs = {"echo": StageDef("echo hi"), "train": StageDef("python3 -m pipeline.train")}
    assert scope_problems(defs, ["echo", "train"], s) == [
        "stage echo: its cmd 'echo hi' runs no Python module or script of this project",
        "stage train: dvc.yaml lacks deps its command imports: "
        + ", ".join(s.required("python3 -m pipeline.train")),
    ]
