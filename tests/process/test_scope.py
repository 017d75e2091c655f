"""Issue #51 item 1: the verdict's scope is the product's, not dvc.yaml's.

Before (main 52a4e5f), each of these passed `gates check` with exit 0 after a code change: `frozen:
true` on every stage, the changed file deleted from a stage's deps in dvc.yaml, `stages: {}` in dvc.yaml
and dvc.lock; and `deps: x` in dvc.lock was a traceback (exit 1). `dvc status` is clean in the first two
(DVC skips a frozen stage; a dep deleted from dvc.yaml is no dep), so nothing DVC says can catch them:
the gates hold dvc.yaml to the stages the project declares (params `gates.scope.stages`) and to the
files each one's command imports (gates/reading/scope.py), and tell a frozen stage's changed deps.

A small real project (a package and a script, built by real `dvc repro`) judged by the real command
line; the negative controls: the same project before the edit passes, and `dvc status` says nothing
of the frozen and the deleted-dep cases.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS, REPO
from gates.__main__ import main as gates_main
from gates.reading.dvcyaml import pipeline_stages
from gates.reading.scope import Sources, declared_stages, scope_problems
from params.project import load_judging

ENV = {**os.environ, "DVC_NO_ANALYTICS": "1"}
FILES = {
    "mypkg/__init__.py": "",
    "mypkg/util.py": "SCALE = 2\n",
    "mypkg/make.py": "from mypkg.util import SCALE\n\nopen('out.txt', 'w').write(str(SCALE))\n",
    "use.py": "import mypkg.util\n\nopen('use.txt', 'w').write(open('out.txt').read() * 2)\n",
    "params.yaml": "gates:\n  scope:\n    stages: [make, use]\n",
}
DVC_YAML = {
    "stages": {
        "make": {
            "cmd": "python3 -m mypkg.make",
            "deps": ["mypkg/__init__.py", "mypkg/make.py", "mypkg/util.py"],
            "outs": ["out.txt"],
        },
        "use": {
            "cmd": "python3 use.py",
            "deps": ["use.py", "mypkg/__init__.py", "mypkg/util.py", "out.txt"],
            "outs": ["use.txt"],
        },
    }
}


def dvc(root: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True, text=True, env=ENV
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scope") / "p"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "dvc.yaml").write_text(yaml.safe_dump(DVC_YAML, sort_keys=False))
    dvc(root, "init", "--no-scm", "-q")
    dvc(root, "repro", "-q")
    return root


@pytest.fixture
def project(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "p", symlinks=True))


def check(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`gates check --only seals` on the project: exit code, the seals' message, stderr."""
    code = gates_main(
        ["--root", str(root), "--params", str(root / "params.yaml"), "check", "--only", "seals"]
    )
    err = capsys.readouterr().err
    report = root / "reports" / "gates.json"
    message = next(g["message"] for g in json.loads(report.read_text())["gates"]) if report.exists() else ""
    return code, message, err


def set_stage(root: Path, stage: str, **keys: object) -> None:
    data = yaml.safe_load((root / "dvc.yaml").read_text())
    data["stages"][stage].update(keys)
    (root / "dvc.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def edit_util(root: Path) -> None:
    (root / "mypkg" / "util.py").write_text("SCALE = 3\n")


def dvc_status_is_clean(root: Path) -> bool:
    return json.loads(dvc(root, "status", "--json") or "{}") == {}


def test_the_project_as_built_passes(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, message, _ = check(project, capsys)
    assert code == 0 and message == "2 files of 2 stages equal dvc.lock", message


def test_frozen_stages_whose_deps_changed_are_an_error_with_advice_that_works(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for stage in ("make", "use"):
        set_stage(project, stage, frozen=True)
    edit_util(project)
    assert dvc_status_is_clean(project)  # DVC skips a frozen stage's deps: it says nothing
    code, message, _ = check(project, capsys)
    assert code == 2
    assert message.startswith("frozen: stage make: dep mypkg/util.py md5 "), message
    assert message.endswith(
        ": dvc repro never reruns a frozen stage, so its artifacts are older than this tree (dvc unfreeze "
        "make && dvc unfreeze use && dvc repro make use, or undo the edit)"
    ), message
    dvc(project, "unfreeze", "make")  # the advice, followed: it ends the error
    dvc(project, "unfreeze", "use")
    dvc(project, "repro", "-q", "make", "use")
    assert check(project, capsys)[0] == 0


def test_a_frozen_stage_whose_deps_did_not_change_is_said(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_stage(project, "use", frozen=True)
    code, message, _ = check(project, capsys)
    assert code == 0
    assert message == (
        "2 files of 2 stages equal dvc.lock; frozen, not rerun by dvc repro (deps and params unchanged): use"
    )


def test_a_dep_deleted_from_dvc_yaml_is_an_error_naming_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_stage(project, "make", deps=["mypkg/__init__.py", "mypkg/make.py"])
    dvc(project, "commit", "-f", "-q")  # even re-recorded: dvc.lock then agrees with the thinner dvc.yaml
    edit_util(project)
    assert "make" not in json.loads(dvc(project, "status", "--json") or "{}")  # DVC: make is fresh
    code, message, _ = check(project, capsys)
    assert code == 2
    assert message.startswith("stage make: dvc.yaml lacks deps its command imports: mypkg/util.py: "), message


def test_a_declared_stage_deleted_or_every_stage_is_an_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = yaml.safe_load((project / "dvc.yaml").read_text())
    del data["stages"]["use"]
    (project / "dvc.yaml").write_text(yaml.safe_dump(data))
    code, message, _ = check(project, capsys)
    assert code == 2 and message.startswith("stage use (gates.scope.stages) is not in dvc.yaml: "), message
    (project / "dvc.yaml").write_text("stages: {}\n")
    (project / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    code, message, _ = check(project, capsys)
    assert code == 2 and message.startswith("dvc.yaml defines no stage: the pipeline is empty"), message


def test_an_undeclared_project_is_judged_as_dvc_yaml_says_and_says_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "params.yaml").write_text("gates: {}\n")
    set_stage(project, "make", deps=["mypkg/__init__.py", "mypkg/make.py"])
    dvc(project, "commit", "-f", "-q")
    code, message, _ = check(project, capsys)
    assert code == 0
    assert message.endswith("; scope not declared (gates.scope.stages): judged the stages dvc.yaml defines")
    (project / "dvc.yaml").write_text("stages: {}\n")  # empty: an error all the same
    (project / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    assert check(project, capsys)[0] == 2


def test_a_malformed_lock_entry_is_one_line_and_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    lock["stages"]["use"]["deps"] = "x"  # issue #51: an AttributeError traceback, exit 1
    (project / "dvc.lock").write_text(yaml.safe_dump(lock))
    code, _, err = check(project, capsys)
    assert code == 2
    assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith("error: ") and "expected a list, in stages -> use -> deps" in err, err


# -- the real pipeline's scope, in-process (tests/process/test_dvc_deps.py holds dvc.yaml to it in full) ----------


def test_our_pipeline_declares_every_stage_and_dvc_yaml_has_every_dep() -> None:
    declared = declared_stages(load_judging(PARAMS).thresholds)
    definitions = pipeline_stages(REPO)
    assert set(declared) == set(definitions)  # every stage of dvc.yaml is one the verdict needs
    assert scope_problems(definitions, declared, Sources(REPO)) == []


def test_our_pipeline_without_optim_py_in_train_single_is_named() -> None:
    """The issue's case on our own dvc.yaml: xtrain/core/optim.py deleted from train_single's deps."""
    declared = declared_stages(load_judging(PARAMS).thresholds)
    definitions = pipeline_stages(REPO)
    d = definitions["train_single"]
    definitions["train_single"] = replace(d, deps=tuple(p for p in d.deps if p != "xtrain/core/optim.py"))
    assert scope_problems(definitions, declared, Sources(REPO)) == [
        "stage train_single: dvc.yaml lacks deps its command imports: xtrain/core/optim.py"
    ]
    del definitions["pilot"]
    assert "stage pilot (gates.scope.stages) is not in dvc.yaml" in scope_problems(
        definitions, declared, Sources(REPO)
    )


def test_a_declaration_deleted_from_the_working_params_is_still_held_in_git(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a stage deleted from the working dvc.lock (git HEAD's has it): the declaration cannot be edited
    away either; a reviewed commit can change it."""
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "declared"], check=True)
    (project / "params.yaml").write_text("gates: {}\n")
    set_stage(project, "make", deps=["mypkg/__init__.py", "mypkg/make.py"])
    dvc(project, "commit", "-f", "-q")
    code, message, _ = check(project, capsys)
    assert code == 2 and message.startswith(
        "stage make: dvc.yaml lacks deps its command imports: mypkg/util.py"
    )
    subprocess.run([*git, "commit", "-qam", "undeclared, reviewed"], check=True)
    code, message, _ = check(project, capsys)
    assert code == 0 and "scope not declared" in message
