"""Sealed registry files (torch-free): every file carries `content_sha256`, the sha256 of its canonical
JSON without that field, written when it is blessed and checked on every read.

The ground floor of the registry: store.py (the entries) and index.py (the index of all files) both
stand on it, and it imports neither.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from contracts.fileio import canonical_json, sha256_text
from contracts.validate import ValidationError, load_json, load_schema

VERSION_FILE = re.compile(r"v([1-9][0-9]*)\.json")  # use fullmatch: no trailing newline
CONTENT_HASH = "content_sha256"


def content_hash(obj: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of `obj` without its own hash field."""
    return sha256_text(canonical_json({k: v for k, v in obj.items() if k != CONTENT_HASH}))


def seal(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` with its content hash (what bless and pin write)."""
    return {**obj, CONTENT_HASH: content_hash(obj)}


def load_sealed(path: Path, schema: str) -> dict[str, Any]:
    """Read a registry file, validate it, and refuse it if its content hash does not match."""
    data = load_json(str(path), load_schema(schema))
    if data[CONTENT_HASH] != content_hash(data):
        raise ValidationError(
            str(path),
            CONTENT_HASH,
            "does not match the file's content: the file was edited by hand",
            "registry files change only through python -m registry bless / pin",
        )
    return data
