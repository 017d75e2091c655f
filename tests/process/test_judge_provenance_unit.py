"""A blessing's provenance (registry/provenance.py) in-process (issue #37: its mutants survived).

Real git in a scratch repository (milliseconds); the interpreter's own platform and torch's installed
version are what the defaults must read.
"""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
from datetime import datetime, timedelta, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from registry import provenance as prov

ENV = {"platform": "linux-x86_64", "python": "3.11.9", "torch": "2.13.0+cpu"}


def git(repo: Path, *args: str) -> str:
    argv = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(argv, cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with one commit (params.yaml tracked), as the working directory."""
    git(tmp_path, "init", "-q")
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    git(tmp_path, "add", "params.yaml")
    git(tmp_path, "commit", "-q", "-m", "one")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---- _git: git's stripped output, or None ---------------------------------------------------------


def test_git_returns_the_stripped_output(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert re.fullmatch("[0-9a-f]{40}", head)
    assert prov._git("rev-parse", "HEAD") == head


def test_git_failing_is_none(repo: Path) -> None:
    assert prov._git("rev-parse", "no-such-revision") is None


def test_git_runs_with_a_timeout(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], dict[str, Any]]] = []
    real = subprocess.run

    def recording(argv: list[str], **kw: Any) -> subprocess.CompletedProcess:
        seen.append((argv, kw))
        return real(argv, **kw)

    monkeypatch.setattr(prov.subprocess, "run", recording)
    assert prov._git("status", "--porcelain") == ""
    assert seen == [(["git", "status", "--porcelain"], {"capture_output": True, "text": True, "timeout": 10})]


@pytest.mark.parametrize("error", [OSError(2, "no git"), subprocess.TimeoutExpired(["git"], 10)])
def test_git_missing_or_hanging_is_none(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def raising(*_a: Any, **_k: Any) -> None:
        raise error

    monkeypatch.setattr(prov.subprocess, "run", raising)
    assert prov._git("rev-parse", "HEAD") is None


# ---- provenance: what a blessing records --------------------------------------------------------


def test_provenance_in_a_clean_repository(repo: Path) -> None:
    (repo / "untracked.txt").write_text("not a change git tracks\n")
    p = prov.provenance(dict(ENV))
    assert p["git_revision"] == git(repo, "rev-parse", "HEAD")
    assert p["git_dirty"] is False
    assert p["params_hash"] == hashlib.sha256(b"seed: 1\n").hexdigest()[:16]
    assert p["env_id"] == "linux-x86_64-python3.11.9"
    assert p["env"] == ENV and p["torch"] == "2.13.0+cpu"
    assert list(p) == ["git_revision", "git_dirty", "params_hash", "env_id", "env", "torch", "time_utc"]


def test_provenance_dirty_and_another_params_file(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    (repo / "params.yaml").write_text("seed: 2\n")
    elsewhere = tmp_path_factory.mktemp("p") / "other.yaml"
    elsewhere.write_bytes(b"x")
    p = prov.provenance(dict(ENV), elsewhere)
    assert p["git_dirty"] is True
    assert p["params_hash"] == hashlib.sha256(b"x").hexdigest()[:16] == "2d711642b726b044"
    assert prov.provenance(dict(ENV), str(elsewhere))["params_hash"] == "2d711642b726b044"


def test_provenance_outside_git_without_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    p = prov.provenance(dict(ENV))
    assert (p["git_revision"], p["git_dirty"], p["params_hash"]) == (None, None, None)


def test_provenance_defaults_to_this_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    here = {
        "platform": f"{platform.system().lower()}-{platform.machine()}",
        "python": platform.python_version(),
        "torch": metadata.version("torch"),
    }
    for given in (None, {}):
        p = prov.provenance(given)
        assert p["env"] == here and p["torch"] == here["torch"]
        assert p["env_id"] == f"{here['platform']}-python{here['python']}"


def test_provenance_without_torch_says_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(prov.metadata, "version", missing)
    assert prov.provenance()["env"]["torch"] == "absent"
    assert prov.provenance({"platform": "p", "python": "3"})["torch"] == "absent"


@pytest.mark.parametrize(
    ("env", "env_id", "torch"),
    [
        ({"env_id": "gpu-box", "platform": "p", "python": "3"}, "gpu-box", None),
        ({"python": "3.12"}, "unknown-python3.12", None),
        ({"platform": "darwin-arm64"}, "darwin-arm64-python?", None),
        ({"platform": "p", "torch": "2.9.0"}, "p-python?", "2.9.0"),
    ],
)
def test_provenance_env_id_and_torch_from_a_given_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict, env_id: str, torch: str | None
) -> None:
    monkeypatch.chdir(tmp_path)
    p = prov.provenance(env)
    assert p["env_id"] == env_id and p["env"] == env
    assert p["torch"] == (torch or metadata.version("torch"))


def test_provenance_time_is_utc_to_the_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = datetime.now(timezone.utc).replace(microsecond=0)
    stamp = prov.provenance(dict(ENV))["time_utc"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp), stamp
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before <= when <= before + timedelta(seconds=5)
