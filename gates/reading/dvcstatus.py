"""`dvc status` without DVC: which stages' deps, params, outs or command differ from dvc.lock (torch-free).

The gates judge a tree only if it is what dvc repro made: DVC's own answer is `dvc status`, and
importing DVC costs more than every gate together (docs/verdicts.md, "Cost"). So this module
decides it as DVC's Stage.status does (dvc/stage/__init__.py, dependency/param.py, output.py), for
every stage dvc.yaml defines (gates/reading/dvcyaml.py), with the lock entry matched by path:
- a dep or out is `deleted` when absent, `modified` when its md5 (a folder's `.dir` hash) differs
  from its dvc.lock entry or when dvc.lock has no entry for it (deleting lines is no way around it);
- a params file is `new` when dvc.lock records no values for it, and each key `deleted`, `new` or
  `modified` as DVC compares them (Python `!=` of the values both sides read as DVC reads YAML);
- `changed command` when dvc.lock's cmd is not dvc.yaml's;
- a frozen stage's deps and params are not looked at; an `always_changed` stage is judged like any
  other (DVC reruns it on every repro by design: that alone makes nothing stale);
- `not in cache` is not reported: a missing cache object is DVC's storage, not a stale artifact.
One deliberate difference: a registry data file (registry/index.json) whose md5 moved is not
stale, because blessing after dvc repro rewrites it by design and the registry checks it by
content hash on every read; a registry data dep missing from dvc.lock still is.
tests/process/test_seals_dvc_status.py holds every stage's verdict equal to real `dvc status` on random
thinnings and edits of dvc.lock, params and deps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from contracts.fileio import read_json, read_regular
from contracts.validate import ValidationError
from contracts.yamlfile import PIPELINE_BYTES, decoded, load_pipeline
from gates.reading.dvclock import DvcLock, dir_md5
from gates.reading.dvcyaml import StageDef

ABSENT = "(absent)"


@dataclass(frozen=True)
class Change:
    stage: str
    kind: str  # dep | param | out | cmd
    name: str  # the path, `params.yaml closed_loop.prompts`, or "" for the cmd
    state: str  # deleted | modified | new | changed
    why: str  # one phrase naming both sides


def blessed(path: str) -> bool:
    """A registry data file: rewritten by blessing after dvc repro (not sealed by its md5)."""
    return path.startswith("registry/") and not path.endswith(".py")


def entries(body: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
    return {str(e.get("path")): e for e in body.get(key) or [] if isinstance(e, dict)}


def md5_now(lock: DvcLock, path: str, legacy: bool = False) -> str | None:
    """The md5 DVC would compute for `path` now: a file's, a folder's `.dir` hash; None when absent
    (`legacy`: as DVC 2 recorded it, md5-dos2unix)."""
    full = lock.root / path
    if full.is_file():
        return lock.md5(path, legacy)
    if full.is_dir():
        return dir_md5(lock.listing(path, legacy))
    return None


def path_change(
    lock: DvcLock, stage: str, kind: str, path: str, entry: dict[str, Any] | None
) -> Change | None:
    """A dep's or out's status: deleted, modified (md5 moved, or no dvc.lock entry), or None."""
    now = md5_now(lock, path, legacy=entry is not None and "hash" not in entry)
    recorded = (str(entry["md5"]) if entry and "md5" in entry else "") or None
    if now is None:
        return Change(
            stage, kind, path, "deleted", f"{kind} {path} md5 (missing), dvc.lock recorded {recorded}"
        )
    if entry is None:
        return Change(
            stage, kind, path, "modified", f"{kind} {path} has no entry in dvc.lock (md5 now {now})"
        )
    if now == recorded or (kind == "dep" and blessed(path) and full_file(lock, path)):
        return None
    return Change(stage, kind, path, "modified", f"{kind} {path} md5 {now}, dvc.lock recorded {recorded}")


def full_file(lock: DvcLock, path: str) -> bool:
    return (lock.root / path).is_file()


def dig(doc: Any, key: str) -> Any:
    """The value at a dotted params key as DVC's dpath reads it (list items by index), or ABSENT."""
    for part in key.split("."):
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return ABSENT
    return doc


def dvc_parsed(path: Path, suffix: str) -> Any:
    """A .toml or .py params file read by DVC's own parser (dvc/utils/serialize: tomlkit, ast); imported
    only for such a file, as its cost is DVC's start-up (docs/verdicts.md, "Cost")."""
    from dvc.utils.serialize import ParseError, parse_py, parse_toml

    text = decoded(read_regular(path, PIPELINE_BYTES), str(path))
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # DVC opens it in text mode: universal newlines
    try:
        return (parse_toml if suffix == ".toml" else parse_py)(text, str(path))
    except ParseError as e:
        raise ValidationError(str(path), "", f"DVC cannot read it: {e}") from None


class ParamsFiles:
    """Params files as DVC reads them (by suffix: JSON, TOML, Python, anything else YAML 1.2), each
    read once per check."""

    def __init__(self, root: Path) -> None:
        self.root, self.cache = root, {}

    def __call__(self, name: str) -> Any:
        if name not in self.cache:
            path = self.root / name
            suffix = Path(name).suffix.lower()
            if suffix == ".json":
                self.cache[name] = read_json(path) or {}
            elif suffix in (".toml", ".py"):
                self.cache[name] = dvc_parsed(path, suffix)
            else:
                self.cache[name] = load_pipeline(path)
        return self.cache[name]


def key_change(stage: str, name: str, key: str, now: Any, then: Any) -> list[Change]:
    """One params key: deleted (absent from the file), new (absent from dvc.lock), modified, or []."""
    where = f"{name} {key}"
    if now is ABSENT:
        return [Change(stage, "param", where, "deleted", f"{where} is absent, dvc.lock recorded {then!r}")]
    if then is ABSENT:
        return [Change(stage, "param", where, "new", f"{where} is {now!r}, dvc.lock recorded none")]
    if now == then or (isinstance(now, tuple) and list(now) == then):  # DVC's `!=`: 1 == 1.0, NaN never
        return []  # equal; a Python params file's tuple equals the list dvc.lock recorded (top level only)
    leaves = leaf_diffs(key, now, then) or [(key, now, then)]
    return [Change(stage, "param", f"{name} {k}", "modified", f"{name} {k} is {a!r}, dvc.lock recorded {b!r}")
            for k, a, b in leaves]  # fmt: skip


def param_changes(stage: str, name: str, keys: tuple[str, ...], recorded: Any, doc: Any) -> list[Change]:
    """Each key's status as DVC's ParamsDependency.workspace_status gives it."""
    if recorded is None:
        return [Change(stage, "param", name, "new", f"{name} has no values in dvc.lock (dvc status: new)")]
    recorded = recorded if isinstance(recorded, dict) else {}
    doc = doc if isinstance(doc, dict) else {}
    every = keys or tuple(dict.fromkeys([*doc, *recorded]))  # no keys: the whole file, as DVC
    return [
        c
        for key in every
        for c in key_change(stage, name, str(key), dig(doc, str(key)), recorded.get(key, ABSENT))
    ]


def leaf_diffs(key: str, now: Any, then: Any) -> list[tuple[str, Any, Any]]:
    """(dotted key, now, recorded) of every leaf where two params values differ (to name them)."""
    if isinstance(now, dict) and isinstance(then, dict):
        return [
            d
            for k in sorted(now.keys() | then.keys(), key=str)
            for d in leaf_diffs(f"{key}.{k}", now.get(k, ABSENT), then.get(k, ABSENT))
        ]
    return [] if now == then else [(key, now, then)]


def stage_changes(lock: DvcLock, stage: str, d: StageDef, files: ParamsFiles) -> list[Change]:
    """Everything `dvc status` would list for one stage that dvc.lock records."""
    body = lock.stages.get(stage) or {}
    out = []
    if body.get("cmd") != d.cmd:
        out.append(
            Change(stage, "cmd", "", "changed", f"cmd {d.cmd!r}, dvc.lock recorded {body.get('cmd')!r}")
        )
    if not d.frozen:
        deps = entries(body, "deps")
        out += [c for p in d.deps if (c := path_change(lock, stage, "dep", p, deps.get(p)))]
        for name, keys in d.params:
            if not (lock.root / name).is_file():
                out.append(Change(stage, "param", name, "deleted", f"{name} is missing"))
                continue
            recorded = (body.get("params") or {}).get(name)
            out += param_changes(stage, name, keys, recorded, files(name) if recorded is not None else None)
    outs = entries(body, "outs")
    out += [c for p in d.out_paths if (c := path_change(lock, stage, "out", p, outs.get(p)))]
    return out


def frozen(lock: DvcLock, stages: list[str]) -> dict[str, list[Change]]:
    """Each frozen stage of `stages` that dvc.lock records -> what changed in its deps and params since
    its lock entry ([]: unchanged). `dvc status` and `dvc repro` skip those (even with --force), so
    the artifacts may be older than the code: the seals say so, and name the change as an error."""
    files = ParamsFiles(lock.root)
    found = {}
    for stage in stages:
        d = lock.definitions.get(stage)
        if d is not None and d.frozen and stage in lock.stages:
            # pragma: no mutate start -- equivalent: None is False to `if not d.frozen`
            thawed = replace(d, frozen=False)
            # pragma: no mutate end
            found[stage] = [
                c for c in stage_changes(lock, stage, thawed, files) if c.kind in ("dep", "param")
            ]
    return found


def status(lock: DvcLock, stages: list[str]) -> dict[str, list[Change]]:
    """Stage -> its changes, for each of `stages` that dvc.yaml defines and dvc.lock records and that
    has any (a stage dvc.lock does not record at all is the seals' `missing`)."""
    files = ParamsFiles(lock.root)
    found = {}
    for stage in stages:
        d = lock.definitions.get(stage)
        if d is not None and stage in lock.stages and (changes := stage_changes(lock, stage, d, files)):
            found[stage] = changes
    return found
