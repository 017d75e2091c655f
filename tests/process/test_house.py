"""The house rules of issue #10, read from the source with `ast` (docs/house.md):

- argv is parsed only at the edge: `pipeline/`, a package's `__main__.py`, or a `cli.py`; the
  library packages (xtrain, gates, registry, contracts) never import argparse or read sys.argv;
- xtrain never reads params.yaml itself (`load_params`): the entry points pass typed config down;
- imports point down: pipeline -> gates -> registry -> xtrain -> params -> contracts (contracts
  imports no project package; params only contracts; registry no gates; nothing below pipeline
  imports it); gates never imports xtrain, not even through registry (the judge does not stand on
  the trainer); params (params.yaml's one loader) never imports torch;
- inside xtrain the rooms point down too: core (the stack under test) imports neither export nor
  bench, export never bench, and every module of xtrain lives in one of the three (issue #26 item 4);
- every function reads in one screen: at most 60 lines;
- a library module that was a command says where the command went, exit 2 (never a silent 0).

Each checker is a function of a source string, and each has a negative control: a synthetic source
that breaks its rule is caught.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

LIBRARIES = ("xtrain", "gates", "registry", "params", "contracts", "runrecord")
PACKAGES = (*LIBRARIES, "pipeline")
MAX_FUNCTION_LINES = 60
# Each package and the project packages it may import (itself included): imports point down.
MAY_IMPORT = {
    "contracts": {"contracts"},
    "params": {"contracts", "params"},
    "xtrain": {"contracts", "params", "xtrain"},
    "registry": {"contracts", "params", "registry"},  # never xtrain: checkpoints via contracts/
    "gates": {"contracts", "params", "registry", "gates"},  # never xtrain: the judge reads artifacts
    "pipeline": set(PACKAGES),
    "runrecord": {
        "contracts",
        "params",
        "xtrain",
        "runrecord",
    },  # the recording API: a user's loop imports it
}


def sources(packages: tuple[str, ...]) -> list[Path]:
    return sorted(p for pkg in packages for p in (REPO / pkg).rglob("*.py"))


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), rel(path))


def at_the_edge(path: str) -> bool:
    """Where argv may be parsed: pipeline/, a package's __main__.py, a cli.py."""
    return path.startswith("pipeline/") or Path(path).name in ("__main__.py", "cli.py")


def argv_uses(tree: ast.AST) -> list[str]:
    """`line: what` for every argparse import and every read of sys.argv."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "argparse"
            ]
        elif isinstance(node, ast.ImportFrom) and node.module in ("argparse", "sys"):
            names = [a.name for a in node.names if node.module == "argparse" or a.name == "argv"]
            found += [f"{node.lineno}: from {node.module} import {n}" for n in names]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "argv"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append(f"{node.lineno}: sys.argv")
    return found


def long_functions(tree: ast.AST, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`name (N lines, line L)` for every function or method longer than `limit` lines."""
    return [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def params_reads(tree: ast.AST) -> list[str]:
    """`line: load_params` wherever the name is imported or called."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "load_params" for a in node.names):
            found.append(f"{node.lineno}: imports load_params")
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name == "load_params":
                found.append(f"{node.lineno}: calls load_params")
    return found


def project_imports(tree: ast.AST) -> set[str]:
    """The project packages a module imports (also inside functions)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names & set(PACKAGES)


# ---- the rules over the tree ---------------------------------------------------------------------


def test_argv_is_parsed_only_at_the_edge() -> None:
    bad = {
        rel(p): uses for p in sources(LIBRARIES) if not at_the_edge(rel(p)) and (uses := argv_uses(parse(p)))
    }
    assert not bad, f"argv parsed outside pipeline/, __main__.py, cli.py: {bad}"


def test_every_function_reads_in_one_screen() -> None:
    bad = {rel(p): fns for p in sources(PACKAGES) if (fns := long_functions(parse(p)))}
    assert not bad, f"functions over {MAX_FUNCTION_LINES} lines: {bad}"


def test_xtrain_never_reads_params_yaml_itself() -> None:
    bad = {rel(p): reads for p in sources(("xtrain",)) if (reads := params_reads(parse(p)))}
    assert not bad, f"xtrain reads params.yaml (load_params belongs to the entry points): {bad}"


def test_imports_point_down() -> None:
    bad = {}
    for p in sources(PACKAGES):
        pkg = rel(p).split("/")[0]
        if up := sorted(project_imports(parse(p)) - MAY_IMPORT[pkg]):
            bad[rel(p)] = up
    assert not bad, f"upward imports (allowed: {MAY_IMPORT}): {bad}"


# xtrain's rooms (issue #26 item 4) and the rooms each may import: the stack under test stands alone
XTRAIN_ROOMS = {"core": {"core"}, "export": {"core", "export"}, "bench": {"core", "bench"}}


def xtrain_rooms(tree: ast.AST) -> set[str]:
    """The xtrain sub-packages a module imports (`from xtrain.core.model import ...`, `import xtrain.bench`)."""
    rooms: set[str] = set()
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "xtrain" else [f"xtrain.{a.name}" for a in node.names]
        rooms.update(n.split(".")[1] for n in names if n.startswith("xtrain.") and n.count(".") >= 1)
    return rooms


def test_xtrain_rooms_point_down() -> None:
    bad, homeless = {}, []
    for p in sources(("xtrain",)):
        parts = p.relative_to(REPO / "xtrain").parts
        if len(parts) == 1:
            homeless += [] if parts[0] == "__init__.py" else [rel(p)]
            continue
        if up := sorted(xtrain_rooms(parse(p)) - XTRAIN_ROOMS[parts[0]]):
            bad[rel(p)] = up
    assert not homeless, f"xtrain modules outside core/, export/, bench/: {homeless}"
    assert not bad, f"xtrain rooms importing up (allowed: {XTRAIN_ROOMS}): {bad}"


def test_the_rooms_check_catches_an_upward_import() -> None:
    """Negative control: the stack under test importing the exporter or a benchmark is caught."""
    tree = ast.parse(
        "from xtrain.export.hf_folder import export\nfrom xtrain import bench\nimport xtrain.core.model\n"
    )
    assert xtrain_rooms(tree) - XTRAIN_ROOMS["core"] == {"export", "bench"}
    assert xtrain_rooms(ast.parse("from xtrain.core.train import RunSpec\n")) <= XTRAIN_ROOMS["bench"]


def test_the_rules_scan_real_code() -> None:
    """Positive control: the scans see the files they judge, the edge included."""
    scanned = {rel(p) for p in sources(PACKAGES)}
    assert {
        "xtrain/core/train.py",
        "gates/judges/perf.py",
        "registry/__main__.py",
        "pipeline/train.py",
    } <= scanned
    assert argv_uses(parse(REPO / "pipeline" / "train.py"))  # the edge does parse argv
    assert project_imports(parse(REPO / "registry" / "baselines.py")) >= {"contracts", "registry"}


def modules_of(package: str) -> list[str]:
    return sorted(".".join(p.relative_to(REPO).with_suffix("").parts) for p in (REPO / package).rglob("*.py"))


def loaded_by(modules: list[str]) -> set[str]:
    """The top-level packages in sys.modules after a fresh interpreter imports `modules`."""
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    code += "print(' '.join(sorted({n.split('.')[0] for n in sys.modules})))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def torch_imports(tree: ast.AST) -> list[str]:
    """`line: what` for every import of torch (or a torch submodule), also inside functions."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "torch"
            ]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "torch"
        ):
            found.append(f"{node.lineno}: from {node.module}")
    return found


def test_params_never_imports_torch() -> None:
    """params is the ground floor every reader stands on, torch-free: read in the source and in a
    fresh interpreter (where an indirect import would show too)."""
    bad = {rel(p): found for p in sources(("params",)) if (found := torch_imports(parse(p)))}
    assert not bad, f"params imports torch: {bad}"
    assert "torch" not in loaded_by(modules_of("params"))


def test_gates_never_imports_xtrain_not_even_through_registry() -> None:
    """Every gates module, imported in a fresh interpreter, leaves no xtrain module (nor torch) behind."""
    loaded = loaded_by(modules_of("gates"))
    assert "params" in loaded and not {"xtrain", "torch"} & loaded, sorted(loaded)


def test_the_torch_and_xtrain_probes_catch() -> None:
    """Negative controls: a torch import in the source is found, the fresh-interpreter probe sees
    xtrain when a module does pull it in (xtrain.core.rundir, torch-free), and the layer table refuses
    gates -> xtrain and params -> gates."""
    assert torch_imports(ast.parse("def f():\n    import torch.nn as nn\n")) == ["2: import torch.nn"]
    assert torch_imports(ast.parse("from torch import nn\n")) == ["1: from torch"]
    assert not torch_imports(ast.parse("import torchvision_free\nfrom .torch import x\n"))
    assert "xtrain" in loaded_by(["xtrain.core.rundir"])
    tree = ast.parse("from xtrain.config import Params\n")
    assert project_imports(tree) - MAY_IMPORT["gates"] == {"xtrain"}
    assert project_imports(ast.parse("import gates.expect\n")) - MAY_IMPORT["params"] == {"gates"}


# xtrain module that was a command -> the pipeline module that is its command now (xtrain.config
# moved out of xtrain: it is params.config, which names the same new home)
MOVED = dict(
    pair.split(":")
    for pair in [
        "core.launch:train",
        "export.hf_folder:export",
        "bench.throughput:bench",
        "export.onnx_engine:to_onnx",
        "bench.scaling:scaling",
    ]
)


@pytest.mark.parametrize("module", sorted(MOVED))
def test_a_moved_command_names_its_new_home(module: str) -> None:
    """`torchrun ... -m xtrain.core.launch proc` in an old script must fail, not exit 0 having trained nothing."""
    proc = subprocess.run(
        [sys.executable, "-m", f"xtrain.{module}", "proc", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stderr
    expected = f"moved; run python -m pipeline.{MOVED[module]} (the same arguments)"
    assert proc.stderr.strip() == f"error: python -m xtrain.{module}: {expected}"


def test_params_config_names_the_config_command() -> None:
    """xtrain.config went to the ground floor (params.config); `-m` of it still names pipeline.config."""
    proc = subprocess.run(
        [sys.executable, "-m", "params.config", "show"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stderr
    expected = "moved; run python -m pipeline.config (the same arguments)"
    assert proc.stderr.strip() == f"error: python -m params.config: {expected}"


# ---- negative controls: each checker catches a synthetic violation --------------------------------

ARGV_CASES = {
    "import argparse": "import argparse\n",
    "import argparse as ap": "import argparse as ap\n",
    "from argparse import": "from argparse import ArgumentParser\n",
    "sys.argv": "import sys\n\ndef main():\n    return sys.argv[1:]\n",
    "from sys import argv": "from sys import argv\n",
}


@pytest.mark.parametrize("case", sorted(ARGV_CASES))
def test_the_argv_check_catches(case: str) -> None:
    assert argv_uses(ast.parse(ARGV_CASES[case]))
    assert not at_the_edge("xtrain/core/launch.py") and not at_the_edge("gates/judges/perf.py")
    assert (
        at_the_edge("pipeline/train.py") and at_the_edge("gates/__main__.py") and at_the_edge("params/cli.py")
    )


def test_the_argv_check_lets_other_code_pass() -> None:
    assert not argv_uses(ast.parse("import sys\nprint(sys.executable, sys.path)\nargv = []\n"))


def test_the_length_check_catches_a_long_function() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    long_fn = f"def too_long():\n{body}"  # 61 lines
    just_fits = f"def fits():\n{body[: body.index('    x59')]}"  # 60 lines
    method = f"class C:\n    async def m(self):\n{''.join('    ' + line for line in body.splitlines(True))}"
    assert long_functions(ast.parse(long_fn)) == ["too_long (61 lines, line 1)"]
    assert long_functions(ast.parse(just_fits)) == []
    assert long_functions(ast.parse(method)) == ["m (61 lines, line 2)"]


def test_the_params_check_catches_a_read() -> None:
    assert params_reads(ast.parse("from params.config import load_params\n"))
    assert params_reads(ast.parse("import params.config as c\nc.load_params('params.yaml')\n"))
    assert not params_reads(ast.parse("from params.config import RunConfig\n"))


def test_the_layer_check_catches_an_upward_import() -> None:
    """The arrow this issue removed: registry/baselines.py imported gates.perf."""
    tree = ast.parse("def f():\n    from gates.perf import median_spread\n    import pipeline.train\n")
    assert project_imports(tree) - MAY_IMPORT["registry"] == {"gates", "pipeline"}
    assert project_imports(ast.parse("import torch\nfrom . import x\n")) == set()
