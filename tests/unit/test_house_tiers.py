"""The tests sit in tiers a newcomer can see (issue #53 item 2, docs/house.md "Where a new test goes").

What a test starts decides its folder: tests/unit (in-process only), tests/process (real processes:
CLIs, torchrun, git, DVC commands on small trees), tests/pipeline (the gate tree, the project's own
`dvc repro`, mutation and bisect campaigns), tests/gpu (needs CUDA). Here: every test file sits in one
of the four, basenames are unique (pytest's prepend import mode imports them by basename), the folder
gives the marker, and no unit-tier file imports a way to start a process. The negative controls plant
each kind of misplaced file in a copy of the layout and see it named.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO, TIERS, tier_of

TESTS = REPO / "tests"
# Modules whose import starts (or is there to start) processes; the tests' own helpers that do.
SPAWNING_MODULES = {
    "subprocess",
    "multiprocessing",
    "pty",
    "torch.multiprocessing",
    "torch.distributed.run",
    "torch.distributed.launcher",
    "proc_runs",
    "cuda_runs",
    "proctree_cases",
    "byo_example_runs",
    "cache_faults",
    "seals_cost",
    "dvc_import_cost",
    "existing_repo",
    "init_existing_cost",
}
SPAWNING_OS = {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"}
SPAWNING_OS_PREFIXES = ("exec", "spawn")
# Helpers of tests/gate_tree.py and tests/conftest.py that start processes (CLIs, real DVC, git).
SPAWNING_NAMES = {"run_cli", "lock_with_dvc", "build_tree", "scratch_repo"}
# Fixtures that are built by processes (the gate tree: real runs and `dvc commit`; torchrun runs).
SPAWNING_FIXTURES = {"gate_tree", "proc_runs", "cuda_runs"}


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("test_*.py") if "__pycache__" not in p.parts)


def placement_problems(root: Path) -> list[str]:
    """Test files outside the four tier folders (directly under them), and basenames used twice."""
    files = files_of(root)
    out = [
        f"{p.relative_to(root.parent).as_posix()}: not in a tier folder (tests/{{{','.join(TIERS)}}}/)"
        for p in files
        if not (p.parent.parent == root and p.parent.name in TIERS)
    ]
    twice = sorted(name for name, n in Counter(p.name for p in files).items() if n > 1)
    return out + [f"{name}: the same basename in two folders" for name in twice]


def starts_processes(source: str) -> list[str]:
    """What in a module's source starts (or imports a way to start) a process."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name in SPAWNING_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in SPAWNING_MODULES or (node.module == "os" and node.names):
                names = [a.name for a in node.names]
                if node.module != "os" or any(
                    n in SPAWNING_OS or n.startswith(SPAWNING_OS_PREFIXES) for n in names
                ):
                    found.append(f"from {node.module} import {', '.join(names)}")
            found += [f"from {node.module} import {a.name}" for a in node.names if a.name in SPAWNING_NAMES]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in SPAWNING_OS or node.attr.startswith(SPAWNING_OS_PREFIXES):
                found.append(f"os.{node.attr}")
        elif isinstance(node, ast.arg) and node.arg in SPAWNING_FIXTURES:
            found.append(f"fixture {node.arg}")
    return found


def unit_problems(root: Path) -> list[str]:
    return [
        f"{p.relative_to(root.parent).as_posix()}: {what} (a unit test starts no process: tests/process/)"
        for p in files_of(root / "unit")
        for what in starts_processes(p.read_text())
    ]


def test_every_test_file_sits_in_one_of_the_four_tier_folders() -> None:
    assert len(files_of(TESTS)) > 150  # the suite itself, not an empty glob
    assert placement_problems(TESTS) == []


def test_no_unit_test_starts_a_process() -> None:
    assert len(files_of(TESTS / "unit")) > 50
    assert unit_problems(TESTS) == []


def test_the_folder_gives_the_marker_and_the_markers_are_registered(pytestconfig: pytest.Config) -> None:
    assert [tier_of(TESTS / tier / "test_x.py") for tier in TIERS] == list(TIERS)
    for outside in (
        TESTS / "test_x.py",
        TESTS / "unit" / "deeper" / "test_x.py",
        REPO / "unit" / "test_x.py",
    ):
        assert tier_of(outside) is None  # control: only a file directly in a tier folder has a tier
    assert {m.partition(":")[0] for m in pytestconfig.getini("markers")} >= set(TIERS)  # pyproject.toml


def test_this_test_carries_its_folders_marker(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    assert all(request.node.get_closest_marker(t) is None for t in TIERS if t != "unit")


PLANTED = {
    "import subprocess\n": ["import subprocess"],
    "from subprocess import run\n": ["from subprocess import run"],
    "import multiprocessing as mp\n": ["import multiprocessing"],
    "import os\nos.system('true')\n": ["os.system"],
    "import os\nos.execvp('x', ['x'])\n": ["os.execvp"],
    "from os import fork\n": ["from os import fork"],
    "from gate_tree import run_cli\n": ["from gate_tree import run_cli"],
    "from conftest import scratch_repo\n": ["from conftest import scratch_repo"],
    "from proc_runs import ProcRuns\n": ["from proc_runs import ProcRuns"],
    "def test_a(gate_tree):\n    pass\n": ["fixture gate_tree"],
    # controls the other way: in-process code passes
    "import os\nfrom os import environ\nos.environ.get('X')\nimport json\n": [],
    "from gate_tree import seal, copy_tree\n": [],
}


@pytest.mark.parametrize("source", PLANTED)
def test_each_way_to_start_a_process_is_named(source: str) -> None:
    assert starts_processes(source) == PLANTED[source]


def test_a_planted_misplaced_file_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "tests"
    for tier in TIERS:
        (root / tier).mkdir(parents=True)
    (root / "unit" / "test_fine.py").write_text("import json\n")
    (root / "process" / "test_spawns.py").write_text("import subprocess\n")  # allowed in process/
    assert placement_problems(root) == [] and unit_problems(root) == []
    (root / "test_stray.py").write_text("")
    (root / "unit" / "deeper").mkdir()
    (root / "unit" / "deeper" / "test_nested.py").write_text("")
    (root / "gpu" / "test_fine.py").write_text("")
    (root / "unit" / "test_planted.py").write_text("import subprocess\n")
    assert placement_problems(root) == [
        "tests/test_stray.py: not in a tier folder (tests/{unit,process,pipeline,gpu}/)",
        "tests/unit/deeper/test_nested.py: not in a tier folder (tests/{unit,process,pipeline,gpu}/)",
        "test_fine.py: the same basename in two folders",
    ]
    assert unit_problems(root) == [
        "tests/unit/test_planted.py: import subprocess (a unit test starts no process: tests/process/)"
    ]
