"""The registry's index of its own contents (torch-free): registry/index.json.

Every data file of the registry (models/, goldens/, baselines/, pinned/, anything else but the
package's own *.py) is listed with its sha256, and the index is sealed like every registry file
(`content_sha256`). Every read of the registry first checks the files on disk against it, and
every write (bless, bless --golden, bless --perf, pin) adds the new files to it atomically: a
deleted version or golden, an extra file (a leftover temporary included) or an altered one is an
error naming the file, never a silent fallback to what is left.

What it cannot stop: someone who edits the files and re-seals the index by hand (the same hash
scheme, no secret). What it guarantees is that nothing changes unseen through an ordinary edit,
copy, checkout or deletion.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from contracts import lockfile
from contracts.fileio import atomic_write_json, md5_file, sha256_file
from contracts.validate import ValidationError
from registry.sealed import VERSION_FILE, load_sealed, seal

INDEX = "index.json"
FORMAT = "xtrain-registry-index/1"
SCHEMA = "registry_index.schema.json"
TEMP = re.compile(r"\..+\.(tmp|old)")  # write_once's, atomic writes' and pin's scratch names
RESTORE = "restore the registry from git (git checkout -- registry/)"


class IndexProblem(ValidationError):
    """The registry's files differ from its index: one line naming the file."""


def on_disk(root: Path) -> list[str]:
    """Relative paths of every data file under `root` (not index.json, the package's code or caches)."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel_folder = Path(folder).relative_to(root)
        for name in files:
            rel = (rel_folder / name).as_posix()
            if rel == INDEX or (rel_folder == Path(".") and name.endswith(".py")):
                continue
            out.append(rel)
    return sorted(out)


def _leftover(rel: str) -> bool:
    return any(TEMP.fullmatch(part) for part in rel.split("/"))


def _extra(root: Path, rel: str) -> IndexProblem:
    if writer := lockfile.holding(Path(root).resolve()):  # its work in progress, not a past crash
        return IndexProblem(
            str(root / rel),
            "",
            f"not yet in registry/index.json: {writer} is writing the registry now",
            hint="let it finish, then re-run",
        )
    if _leftover(rel):
        return IndexProblem(
            str(root / rel),
            "",
            "a leftover temporary file of an interrupted registry write (not in registry/index.json)",
            hint="delete it; registry writes are atomic, so nothing blessed is lost",
        )
    _own_error(root, rel)  # its own error where it has one (a seal, a pin md5) says more than a hash
    return IndexProblem(
        str(root / rel),
        "",
        "unknown file in the registry (not in registry/index.json): files are added only by bless / pin",
        hint=f"remove it, or {RESTORE}",
    )


PINNED_MD5 = {"model.safetensors": "model_md5", "state.json": "state_md5", "tokenizer.json": "tokenizer_md5"}
FOLDER_KEY = {"models": "model", "goldens": "env_id", "baselines": "env_id"}
SCHEMAS = {
    "models": "version.schema.json",
    "goldens": "golden.schema.json",
    "baselines": "baseline.schema.json",
}


def _own_error(root: Path, rel: str) -> None:
    """An extra or altered registry file's own error where it has one (not JSON, schema, seal, pin md5,
    folder name): it says more than a hash. A file that still reads cleanly was forged with a valid
    seal (or copied in from elsewhere): the index's error follows."""
    parts = rel.split("/")
    if len(parts) != 3:
        return
    kind, folder, name = parts
    if kind == "pinned" and name in PINNED_MD5:  # the md5 pin.json records for it
        pin = load_sealed(root / "pinned" / folder / "pin.json", "pinned.schema.json")
        key, actual = PINNED_MD5[name], md5_file(root / rel)
        if actual != pin[key]:
            problem = f"missing or differs from pin.json (md5 {actual}, pin.json recorded {pin[key]})"
            raise ValidationError(str(root / rel), key, problem)
        return
    if kind == "pinned" and name == "pin.json":
        load_sealed(root / rel, "pinned.schema.json")
        return
    if kind not in SCHEMAS or not VERSION_FILE.fullmatch(name):
        return
    data = load_sealed(root / rel, SCHEMAS[kind])
    key = FOLDER_KEY[kind]
    if data.get(key) != folder:
        raise ValidationError(
            str(root / rel), key, f"{data.get(key)!r} does not match its folder", repr(folder)
        )


def read(root: Path) -> dict[str, str] | None:
    """The sealed index's {path: sha256}; None where there is none."""
    path = root / INDEX
    if not path.exists():
        return None
    return load_sealed(path, SCHEMA)["files"]


def check(root: Path, new: tuple[str, ...] = ()) -> dict[str, str]:
    """The index, after checking every file on disk against it (`new`: files being added now)."""
    root = Path(root)
    files = [f for f in on_disk(root) if f not in new]
    listed = read(root)
    if listed is None:
        if files:
            raise IndexProblem(
                str(root / INDEX),
                "",
                f"missing: the registry holds {len(files)} files and no index of them",
                hint=f"{RESTORE}; for a registry that never had one: python -m registry index",
            )
        return {}
    for rel in sorted(set(files) | set(listed)):
        if rel not in listed:
            raise _extra(root, rel)
        if rel not in files:
            raise IndexProblem(
                str(root / rel),
                "",
                f"missing: registry/index.json lists it (sha256 {listed[rel][:12]}...)",
                hint=f"{RESTORE}; a blessed file is never deleted",
            )
        if (actual := sha256_file(root / rel)) != listed[rel]:
            _own_error(root, rel)
            raise IndexProblem(
                str(root / rel),
                "sha256",
                f"{actual[:12]}... differs from registry/index.json's {listed[rel][:12]}...",
                hint=f"registry files change only through python -m registry bless / pin; {RESTORE}",
            )
    return listed


def write(root: Path, files: dict[str, str]) -> None:
    atomic_write_json(Path(root) / INDEX, seal({"format": FORMAT, "files": dict(sorted(files.items()))}))


def record(root: Path, paths: list[Path]) -> None:
    """Add just-written files to the index (the rest must match it): what every registry write calls."""
    root = Path(root)
    rels = tuple((Path(p).resolve().relative_to(root.resolve())).as_posix() for p in paths)
    listed = check(root, new=rels)
    write(root, {**listed, **{rel: sha256_file(root / rel) for rel in rels}})


def create(root: Path) -> int:
    """Index a registry that has none (a registry from before the index): returns the files indexed."""
    root = Path(root)
    if (root / INDEX).exists():
        raise IndexProblem(
            str(root / INDEX),
            "",
            "exists: the index changes only with bless / pin",
            hint="python -m registry validate",
        )
    files = on_disk(root)
    if bad := [f for f in files if _leftover(f)]:
        raise _extra(root, bad[0])
    write(root, {rel: sha256_file(root / rel) for rel in files})
    return len(files)
