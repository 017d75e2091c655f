"""What a blessing in hf_registry/md5.json records of each exported file, and how a new export is compared.

transformers writes its own release into config.json and generation_config.json (`transformers_version`)
on every save_pretrained, so those bytes move with every release while the model is the same. A file
that carries a writer's version (a JSON object with a key of WRITER_KEYS) is compared with those keys set
aside and the rest exact: the blessing records its md5, the md5 of its canonical JSON without them
(`without_writer`, with that JSON, so a difference can be named key by key) and the writer's version
(for information). Every other file (weights, tokenizer) is compared md5-exact. Torch-free.

md5.json formats (docs/environment-lock.md, "Blessings know what made them"):
  1 (no `format` key): files: {name: md5}, transformers: the version that wrote them. Still read: a file
    whose md5 differs is re-rendered with the writer keys set back to the blessed version (transformers
    writes canonical JSON: sorted keys, indent 2, one newline), and equal then means only the version moved.
  2 (`format`: FORMAT): files: {name: {md5, [without_writer: {md5, json}, writer: {key: version}]}}.
  `hfregistry.py bless` writes format 2.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import clip
from contracts.fileio import canonical_json, md5_file

FORMAT = "xtrain-hf-registry/2"
WRITER_KEYS = ("transformers_version",)
REBLESS = "python3 hfregistry.py bless --reason '...'"


class BlessingError(Exception):
    """hf_registry/md5.json cannot be read as a blessing (one line: the file, the key, the problem)."""


@dataclass(frozen=True)
class Row:
    file: str
    expected: str | None  # the blessed md5
    actual: str | None
    status: str  # "equal" | "writer" (only a writer's version differs) | "differs"
    what: str  # "" when equal; else one phrase: what differs

    @property
    def ok(self) -> bool:
        return self.status != "differs"


def md5_text(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def writer_json(path: Path) -> dict[str, Any] | None:
    """The file's JSON object when it carries a writer's version, else None (weights, tokenizer, ...)."""
    if path.suffix != ".json":
        return None
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and any(k in data for k in WRITER_KEYS) else None


def describe(path: Path) -> dict[str, Any]:
    """A file's entry in a format-2 blessing."""
    entry: dict[str, Any] = {"md5": md5_file(path)}
    data = writer_json(path)
    if data is not None:
        body = {k: v for k, v in data.items() if k not in WRITER_KEYS}
        entry["without_writer"] = {"md5": md5_text(canonical_json(body)), "json": body}
        entry["writer"] = {k: data[k] for k in WRITER_KEYS if k in data}
    return entry


def entries(blessed: dict[str, Any], source: str = "hf_registry/md5.json") -> dict[str, dict[str, Any]]:
    """Every file's entry, format 1 read as format 2 without the per-key record."""
    files = blessed.get("files")
    if not isinstance(files, dict) or not files:
        raise BlessingError(f"error: {source}: files: missing or empty; next: {REBLESS}")
    fmt = blessed.get("format")
    if fmt is None:  # format 1: name -> md5, the writer's version beside
        if bad := [n for n, m in files.items() if not isinstance(m, str)]:
            raise BlessingError(f"error: {source}: files.{bad[0]}: not an md5 (format 1); next: {REBLESS}")
        old = {WRITER_KEYS[0]: blessed.get("transformers")}
        return {n: {"md5": m, "writer": old} for n, m in files.items()}
    if fmt != FORMAT:
        raise BlessingError(f"error: {source}: format: {fmt!r} is not {FORMAT} (a newer example?)")
    for name, entry in files.items():
        body = entry.get("without_writer") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(entry.get("md5"), str):
            raise BlessingError(f"error: {source}: files.{name}: no md5; next: {REBLESS}")
        if body is not None and md5_text(canonical_json(body.get("json"))) != body.get("md5"):
            raise BlessingError(
                f"error: {source}: files.{name}.without_writer: its json does not give its md5 (edited by hand?); "
                f"next: {REBLESS}"
            )
    return files


def _shown(data: dict[str, Any], key: str) -> str:
    return clip(json.dumps(data[key]), 30) if key in data else "(absent)"


def _keys_differ(blessed: dict[str, Any], body: dict[str, Any]) -> str:
    keys = [
        k
        for k in sorted(blessed.keys() | body.keys())
        if (k in blessed, blessed.get(k)) != (k in body, body.get(k))
    ]
    parts = [f"{k} {_shown(blessed, k)} -> {_shown(body, k)}" for k in keys]
    return ", ".join(parts[:4]) + (f" (+{len(parts) - 4} more keys)" if len(parts) > 4 else "")


def _writer_moved(entry: dict[str, Any], data: dict[str, Any]) -> str:
    then = ", ".join(f"{v}" for v in (entry.get("writer") or {}).values()) or "?"
    now = ", ".join(f"{data[k]}" for k in WRITER_KEYS if k in data)
    return f"only {'/'.join(WRITER_KEYS)} differs (written by {now}, blessed with {then}): set aside"


def compare_file(name: str, entry: dict[str, Any] | None, path: Path) -> Row:
    """One file of the new export against its blessed entry."""
    actual = md5_file(path) if path.is_file() else None
    if entry is None or actual is None:
        what = "not blessed" if entry is None else "missing from the export"
        return Row(name, entry and entry["md5"], actual, "differs", what)
    if actual == entry["md5"]:
        return Row(name, entry["md5"], actual, "equal", "")
    data = writer_json(path)
    if data is None:
        return Row(name, entry["md5"], actual, "differs", f"md5 {actual} vs blessed {entry['md5']}")
    body = {k: v for k, v in data.items() if k not in WRITER_KEYS}
    if "without_writer" in entry:  # format 2: the JSON itself was recorded
        if md5_text(canonical_json(body)) == entry["without_writer"]["md5"]:
            return Row(name, entry["md5"], actual, "writer", _writer_moved(entry, data))
        what = _keys_differ(entry["without_writer"]["json"], body)
        return Row(name, entry["md5"], actual, "differs", f"{what} ({'/'.join(WRITER_KEYS)} set aside)")
    # format 1: re-render with the blessed writer's version; equal means only the version moved
    then = {**data, **{k: v for k, v in (entry.get("writer") or {}).items() if k in data and v is not None}}
    if md5_text(canonical_json(then)) == entry["md5"]:
        return Row(name, entry["md5"], actual, "writer", _writer_moved(entry, data))
    return Row(
        name,
        entry["md5"],
        actual,
        "differs",
        f"differs beyond {'/'.join(WRITER_KEYS)} (md5 {actual} vs blessed {entry['md5']}; "
        "a format-1 blessing records no keys to name)",
    )


def compare(blessed: dict[str, Any], folder: Path) -> list[Row]:
    files = entries(blessed)
    names = sorted(files.keys() | {p.name for p in folder.iterdir() if p.is_file()})
    return [compare_file(n, files.get(n), folder / n) for n in names]


def verdict_line(rows: list[Row], folder: str, versions: str) -> str:
    """One line: what differs and the command that re-blesses, or what was set aside."""
    bad = [r for r in rows if not r.ok]
    if bad:
        what = "; ".join(f"{r.file}: {r.what}" for r in bad)
        return f"md5: {folder} differs from hf_registry: {what} ({versions}); next: an intended change: {REBLESS}"
    aside = [r for r in rows if r.status == "writer"]
    note = (
        f"; {', '.join(r.file for r in aside)}: only {'/'.join(WRITER_KEYS)} differs, set aside"
        if aside
        else ""
    )
    return f"md5: {len(rows)} files of {folder} equal hf_registry/md5.json ({versions}{note})"
