"""ci/setup.sh picks the environment a newcomer's two commands run in (`--plan`: decide, install nothing).

The scripts run from a scratch copy, so the repository's own .xtrain/ choice stays untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import REPO


def externally_managed_python() -> str | None:
    """An interpreter carrying the PEP 668 marker (Debian's and Ubuntu's /usr/bin/python3)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.access(candidate, os.X_OK):
            continue
        stdlib = subprocess.run(
            [candidate, "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if stdlib and (Path(stdlib) / "EXTERNALLY-MANAGED").exists():
            return candidate
    return None


def scratch_checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "ci", root / "ci")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def plan(root: Path, python: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "XTRAIN_VENV")}
    environ.update(PYTHON=python, **env)
    return subprocess.run(
        ["bash", "ci/setup.sh", "--plan"], cwd=root, env=environ, capture_output=True, text=True, timeout=300
    )


def inside(root: Path, code: str) -> str:
    out = subprocess.run(
        ["bash", "ci/in-env.sh", "python3", "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_externally_managed_python_gets_a_project_venv_and_commands_run_inside_it(tmp_path: Path) -> None:
    python = externally_managed_python()
    if python is None:
        pytest.skip("no interpreter with an EXTERNALLY-MANAGED marker on this machine")
    root = scratch_checkout(tmp_path)
    out = plan(root, python)
    assert out.returncode == 0, out.stderr
    assert "externally managed, PEP 668" in out.stdout
    venv = root / ".venv"
    assert (venv / "bin" / "python").exists()
    assert (root / ".xtrain" / "python").read_text().strip() == str(venv / "bin" / "python")
    # What the README's commands run after setup is the venv's python3, not the system one.
    assert inside(root, "import sys; print(sys.prefix)") == str(venv)
    assert "torch: no GPU" in out.stdout or "torch: a GPU is present" in out.stdout
    # A second run reuses the venv instead of making another.
    marker = venv / "reused"
    marker.write_text("")
    assert plan(root, python).returncode == 0 and marker.exists()


def test_a_plain_interpreter_is_used_as_is_and_a_venv_only_on_request(tmp_path: Path) -> None:
    root = scratch_checkout(tmp_path)
    base = sys.executable
    if (Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED").exists() or sys.prefix != sys.base_prefix:
        pytest.skip("the test interpreter is itself externally managed or a virtualenv")
    out = plan(root, base)
    assert out.returncode == 0, out.stderr
    assert "not externally managed" in out.stdout and not (root / ".venv").exists()
    assert "torch: keeping" in out.stdout  # the running suite's torch is never replaced
    asked = plan(root, base, XTRAIN_VENV="1")
    assert asked.returncode == 0 and "XTRAIN_VENV=1" in asked.stdout
    assert (root / ".venv" / "bin" / "python").exists()


def test_a_missing_interpreter_is_one_line(tmp_path: Path) -> None:
    out = plan(scratch_checkout(tmp_path), "/nonexistent/python3")
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "/nonexistent/python3 not found" in out.stderr


def installed(root: Path, extras: str = "dev") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "ci/installed.py", extras], cwd=root, capture_output=True, text=True, timeout=60
    )


def test_the_fast_path_reinstalls_a_checkout_that_is_not_the_installed_one(tmp_path: Path) -> None:
    """A fresh clone beside an installed one: its requirements are met, but the editable install is
    another checkout's (the examples' stages would run that code): exit 3, --no-deps install."""
    root = scratch_checkout(tmp_path)
    out = installed(root, "")  # the base requirements: an offline GPU runner has no dev tools (ruff)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "requirements met" in out.stdout and "this checkout" in out.stdout
    assert installed(REPO, "").returncode in (0, 3)  # the positive side: whichever checkout is installed


@pytest.mark.parametrize(
    ("requirement", "said"),
    [("no-such-distribution-xtrain>=1", "no-such-distribution-xtrain missing"), ("pytest<1", "pytest ")],
)
def test_the_fast_path_sends_an_unmet_requirement_to_pip(tmp_path: Path, requirement: str, said: str) -> None:
    root = scratch_checkout(tmp_path)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('"pytest>=8.0"', f'"pytest>=8.0", "{requirement}"', 1))
    out = installed(root)
    assert out.returncode == 1 and "setup: install: " in out.stdout and said in out.stdout, out.stdout
    assert installed(root, "").returncode == 3  # without the dev extra the requirement is not asked


def test_a_requirement_for_another_interpreter_is_not_asked(tmp_path: Path) -> None:
    """A marker false here (ruamel.yaml.clib is CPython's only) leaves the fast path; the same
    requirement with a true marker is sent to pip (the control)."""
    root = scratch_checkout(tmp_path)
    text = (root / "pyproject.toml").read_text()
    for marker, code in (("sys_platform == 'no-such-os'", 3), ("sys_platform != 'no-such-os'", 1)):
        requirement = f"no-such-distribution-xtrain>=1; {marker}"
        (root / "pyproject.toml").write_text(
            text.replace('"torch>=2.5"', f'"torch>=2.5", "{requirement}"', 1)
        )
        assert installed(root, "").returncode == code, marker
