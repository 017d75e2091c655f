"""ci/suite_census.py, the suite's CPU census: its loggers record what they see, its tables add up.

The loggers are real: a Python process with ci/census/ on PYTHONPATH logs itself at exit, and an
inner pytest with the plugin logs each test with the CPU of the child it waited for. The negative
controls: without the census variables nothing is written; a test that starts no child shows none.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

CENSUS = REPO / "ci" / "census"


def suite_census():
    spec = importlib.util.spec_from_file_location("suite_census", REPO / "ci" / "suite_census.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def census_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XTRAIN_CENSUS_", "PYTEST_"))}
    return {**env, "PYTHONPATH": os.pathsep.join([str(CENSUS), env.get("PYTHONPATH", "")]), **extra}


def test_a_process_logs_its_own_cpu_and_what_it_imported(tmp_path: Path) -> None:
    log = tmp_path / "procs.jsonl"
    code = "import sys; sys.modules['torch'] = sys; sum(range(3_000_000))"  # 'torch' is all the flag reads
    subprocess.run([sys.executable, "-c", code], env=census_env(XTRAIN_CENSUS_PROCS=str(log)), check=True)
    (line,) = log.read_text().splitlines()
    record = json.loads(line)
    assert record["argv"] == ["-c"] and record["torch"] is True and record["dynamo"] is False
    assert record["user"] + record["sys"] > 0 and record["test"] == ""
    # negative control: without the variable the same process writes nothing
    subprocess.run([sys.executable, "-c", "pass"], env=census_env(), check=True)
    assert len(log.read_text().splitlines()) == 1


def test_a_process_that_cannot_write_the_log_prints_nothing_of_it(tmp_path: Path) -> None:
    """A process whose file size is limited (RLIMIT_FSIZE, as a test of failing writes sets it) below
    the log's size: the logger stays silent, the process's stderr and exit are its own."""
    import resource

    log = tmp_path / "procs.jsonl"
    log.write_text("x" * 30_000 + "\n")

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    env = census_env(XTRAIN_CENSUS_PROCS=str(log))
    proc = subprocess.run(
        [sys.executable, "-c", "pass"], env=env, capture_output=True, text=True, preexec_fn=limit
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert len(log.read_text().splitlines()) == 1  # nothing appended
    # control: without the limit, the same process appends its line
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    assert len(log.read_text().splitlines()) == 2


def test_the_plugin_logs_each_test_with_the_cpu_of_its_children(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(
        "import subprocess, sys\n"
        "def test_burns_a_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(20_000_000))'], check=True)\n"
        "def test_starts_nothing():\n"
        "    pass\n"
    )
    log = tmp_path / "tests.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "census_plugin",
        "-p",
        "no:cacheprovider",
        "test_inner.py",
    ]
    env = census_env(XTRAIN_CENSUS_TESTS=str(log))
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    rows = {r["id"]: r for r in map(json.loads, log.read_text().splitlines())}
    assert set(rows) == {"test_inner.py::test_burns_a_child", "test_inner.py::test_starts_nothing"}
    assert rows["test_inner.py::test_burns_a_child"]["children"] > 0.1
    assert rows["test_inner.py::test_starts_nothing"]["children"] == 0


@pytest.mark.parametrize(
    ("argv", "worker", "test", "kind"),
    [
        (["/v/lib/torch/distributed/run.py", "--standalone"], "", "t", "torchrun agent"),
        (["/r/pipeline/train.py", "proc", "--params"], "", "t", "pipeline/train proc"),
        (["/v/bin/dvc", "repro"], "", "t", "dvc repro"),
        (["/v/lib/dvc/__main__.py", "repro", "-q"], "", "t", "dvc repro"),
        (["/r/gates/__main__.py", "--root", "/x"], "", "t", "gates"),
        (["-c"], "gw0", "", "pytest-xdist worker"),
        (["-c"], "gw0", "tests/x.py::t (call)", "python -c"),  # a helper a test started
        (["-"], "", "", "python -"),
        (["train.py", "--params"], "", "t", "train"),  # a script run by a relative path
    ],
)
def test_a_process_is_named_by_what_it_ran(argv: list[str], worker: str, test: str, kind: str) -> None:
    assert suite_census().process_kind({"argv": argv, "xdist_worker": worker, "test": test}) == kind


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("tests/x.py::test_a[grad_sum@*:0-4-first step]@ddp", "ddp"),
        ("tests/x.py::test_a[grad_sum@*:0-4]", "(no group)"),
        ("tests/x.py::test_b@tree", "tree"),
        ("tests/x.py::test_b", "(no group)"),
    ],
)
def test_the_xdist_group_is_read_after_the_parameters(nodeid: str, group: str) -> None:
    assert suite_census().xdist_group(nodeid) == group


def test_the_tables_add_up() -> None:
    def proc(argv: list[str], cpu: float, torch: bool) -> dict:
        return {"argv": argv, "user": cpu, "sys": 0.5, "torch": torch, "dynamo": False, "test": "t"}

    procs = [proc(["/r/pipeline/train.py", "single"], 4.0, True), proc(["/r/pipeline/train.py", "single"], 3.0, True),
             proc(["/v/bin/dvc", "repro"], 2.0, False)]  # fmt: skip
    tests = [{"id": "tests/a.py::t1@ddp", "own": 1.0, "children": 7.0, "wall": 5.0},
             {"id": "tests/a.py::t2", "own": 0.5, "children": 0.0, "wall": 1.0},
             {"id": "tests/b.py::t3@ddp", "own": 0.0, "children": 2.5, "wall": 2.0}]  # fmt: skip
    s = suite_census().summarise(procs, tests)
    assert (s["processes"], s["process_cpu_s"], s["torch_processes"], s["torch_process_cpu_s"]) == (
        3,
        10.5,
        2,
        8.0,
    )
    assert s["kinds"]["pipeline/train single"] == {"count": 2, "cpu_s": 8.0, "torch": 2}
    assert s["files"]["tests/a.py"] == {"count": 2, "cpu_s": 8.5, "wall_s": 6.0}
    assert s["groups"] == {"ddp": 7.0, "(no group)": 1.0} and s["test_cpu_s"] == 11.0


def test_the_tables_of_a_folder_without_a_census_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"procs\.jsonl: missing: not a census folder"):
        suite_census().main(["--tables", str(tmp_path)])
