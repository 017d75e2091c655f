"""House rules of issue #35 item 3, read from the source with `ast` (docs/house.md):

- no import circle: the modules of the project's packages import each other in one direction
  only (registry/index.py <-> registry/store.py was one; both now stand on registry/sealed.py);
- registry imports nothing from xtrain, in the source and in a fresh interpreter: finding a
  run's checkpoint is contracts/checkpoint_dir.py's (torch-free, on the ground floor).

Each checker has a negative control: a synthetic source that breaks its rule is caught.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from test_house import MAY_IMPORT, PACKAGES, REPO, loaded_by, modules_of, project_imports


def module_name(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """module -> the project modules it imports, also inside functions (`from pkg import sub` is pkg.sub)."""
    graph: dict[str, set[str]] = {}
    for name, source in sources.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{a.name}" for a in node.names}
                found.update(s for s in subs if s in sources)
                if subs - set(sources):
                    found.add(node.module)
        graph[name] = {m for m in found if m in sources and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, round and round (strongly connected, size > 1)."""
    reach = {m: _reachable(graph, m) for m in graph}
    groups = {tuple(sorted(m2 for m2 in reach[m] if m in reach[m2])) for m in graph if m in reach[m]}
    return sorted(list(g) for g in groups)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    return seen


def project_sources() -> dict[str, str]:
    paths = sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))
    return {module_name(str(p.relative_to(REPO))): p.read_text(encoding="utf-8") for p in paths}


def test_no_module_imports_its_way_back_to_itself() -> None:
    graph = module_graph(project_sources())
    assert "registry.store" in graph and "registry.sealed" in graph["registry.index"]  # it scans the tree
    assert not circles(graph), circles(graph)


def test_the_circle_check_catches_a_circle() -> None:
    """Negative control: registry/index.py and store.py as they were (store imported index inside a
    method, index imported store at the top), and a longer loop; a package importing its own
    submodule (`from runrecord import arguments`) is no circle."""
    old = {
        "registry": "",
        "registry.index": "from registry.store import VERSION_FILE, load_sealed, seal\n",
        "registry.store": "class Registry:\n    def verify_index(self):\n        from registry import index\n",
        "a": "import b\n",
        "b": "from c import x\n",
        "c": "def f():\n    import a\n",
        "runrecord": "from runrecord.recorder import RunRecorder\n",
        "runrecord.recorder": "from runrecord import arguments\n",
        "runrecord.arguments": "",
    }
    assert circles(module_graph(old)) == [["a", "b", "c"], ["registry.index", "registry.store"]]


def test_registry_imports_no_xtrain() -> None:
    """In the source (the layer table) and in a fresh interpreter that imports every registry module
    (__main__ included): neither xtrain nor torch is loaded."""
    assert "xtrain" not in MAY_IMPORT["registry"]
    loaded = loaded_by(modules_of("registry"))
    assert "contracts" in loaded and not {"xtrain", "torch"} & loaded, sorted(loaded)


def test_the_registry_check_catches_an_xtrain_import() -> None:
    """Negative control: registry/__main__.py's old import (the fresh-interpreter probe's own control,
    xtrain seen where a module pulls it in, is tests/process/test_house.py's)."""
    old = ast.parse("from xtrain.core.checkpoint_dir import resolve_checkpoint\n")
    assert project_imports(old) - MAY_IMPORT["registry"] == {"xtrain"}


# Processes that only validate and start others: torch's import (2.5 CPU-s on a 2-core Xeon) is the
# ranks' (docs/performance.md); the tokenizer stage writes its ids with numpy.
TORCH_FREE = [
    "pipeline.train",
    "pipeline.tokenizer",
    "pipeline.scaling",
    "pipeline.export",
    "xtrain.core.launch_plan",
]


def test_launchers_and_the_tokenizer_and_export_stages_load_no_torch() -> None:
    loaded = loaded_by(TORCH_FREE)
    assert "xtrain" in loaded and "torch" not in loaded, sorted(loaded)


def test_a_cpu_scaling_parent_loads_no_torch() -> None:
    """The scaling stage's parent counts the CPU's devices and names it without torch (its ranks,
    `pipeline.scaling rank ...`, import it)."""
    code = (
        "import sys\nfrom xtrain.bench.scaling import devices_available\n"
        "assert devices_available('cpu') >= 1\nprint('torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr


def test_the_torch_probe_sees_the_trainer() -> None:
    """Negative control: the module that trains (imported by pipeline.train only inside the functions
    that train) does load torch in the same probe."""
    assert "torch" in loaded_by([*TORCH_FREE, "xtrain.core.launch"])
