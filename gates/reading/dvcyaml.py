"""dvc.yaml's stages as DVC resolves them: cmd, deps, params, outs (torch- and dvc-free).

`foreach` expands to `name@key` with `${key}`, `${item}` and `${item.field}` substituted, and any
other `${name.sub}` is looked up in `vars` and params.yaml, as DVC does; a whole-string `${...}`
keeps its value's type. What this module does not model (a `matrix` stage, a `wdir`, a non-YAML
vars file) is one line naming the stage, never a silent guess: the gates' staleness is held equal to
`dvc status` (tests/test_seals_dvc_status.py), and a guess could make a stale stage look fresh.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.validate import ValidationError
from contracts.yamlfile import load_pipeline

DEFAULT_PARAMS = "params.yaml"
TOP_KEYS = {"stages", "vars", "plots", "params", "metrics", "artifacts", "datasets"}  # dvc.yaml's schema
INTERPOLATION = re.compile(r"\$\{\s*([^}]*?)\s*\}")


class DvcYamlError(Exception):
    """dvc.yaml unreadable, or a form the gates do not model: exit 2."""


@dataclass(frozen=True)
class Out:
    path: str
    cache: bool = True


@dataclass(frozen=True)
class StageDef:
    """One stage as `dvc status` sees it."""

    cmd: Any
    deps: tuple[str, ...] = ()
    params: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (file, keys); no keys: the whole file
    outs: tuple[Out, ...] = ()  # outs, metrics and plots (DVC records all three in dvc.lock)
    always_changed: bool = False  # reruns on every repro by design: never stale for that alone
    frozen: bool = False  # `dvc status` skips a frozen stage's deps

    @property
    def out_paths(self) -> list[str]:
        return [o.path for o in self.outs]


def lookup(ctx: dict[str, Any], name: str, where: str) -> Any:
    node: Any = ctx
    for part in name.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise DvcYamlError(f"{where}: ${{{name}}} names nothing in vars or params.yaml")
    return node


def interpolate(value: Any, ctx: dict[str, Any], where: str) -> Any:
    """`value` with every `${name}` replaced as DVC does (a whole-string one keeps its type)."""
    if isinstance(value, dict):
        return {interpolate(k, ctx, where): interpolate(v, ctx, where) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, ctx, where) for v in value]
    if not isinstance(value, str) or "${" not in value:
        return value
    whole = INTERPOLATION.fullmatch(value)
    if whole:
        return lookup(ctx, whole.group(1), where)

    def text(m: re.Match[str]) -> str:
        found = lookup(ctx, m.group(1), where)
        if isinstance(found, (dict, list)):
            raise DvcYamlError(f"{where}: ${{{m.group(1)}}} is a {type(found).__name__} inside a string")
        return str(found).lower() if isinstance(found, bool) else str(found)

    return INTERPOLATION.sub(text, value)


def _entries(entries: Any, where: str) -> list[Any]:
    """A stage's list of deps, outs or params (absent: none). DVC's schema wants a list: a string
    would otherwise be read character by character."""
    if not entries:
        return []
    if not isinstance(entries, list):
        raise DvcYamlError(f"{where}: {entries!r} is not a list of entries")
    return entries


def _entry_paths(entries: Any, where: str) -> list[Out]:
    outs = []
    for entry in _entries(entries, where):
        if (
            isinstance(entry, dict)
            and len(entry) == 1
            and isinstance(next(iter(entry.values())), (dict, type(None)))
        ):
            path, flags = next(iter(entry.items()))
            outs.append(Out(str(path), bool((flags or {}).get("cache", True))))
        elif isinstance(entry, str):
            outs.append(Out(entry))
        else:
            raise DvcYamlError(f"{where}: an out or dep {entry!r} is neither a path nor {{path: flags}}")
    return outs


def _params(entries: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    files: dict[str, list[str]] = {}
    for entry in _entries(entries, where):
        if isinstance(entry, str):
            files.setdefault(DEFAULT_PARAMS, []).append(entry)
        elif isinstance(entry, dict) and all(isinstance(keys, (list, type(None))) for keys in entry.values()):
            for name, keys in entry.items():
                files.setdefault(str(name), []).extend(str(k) for k in keys or [])
        else:
            raise DvcYamlError(f"{where}: params entry {entry!r} is neither a key nor {{file: [keys]}}")
    return tuple((f, tuple(dict.fromkeys(keys))) for f, keys in files.items())


def stage_def(body: dict[str, Any], where: str) -> StageDef:
    return StageDef(
        cmd=body.get("cmd"),
        deps=tuple(o.path for o in _entry_paths(body.get("deps"), where)),
        params=_params(body.get("params"), where),
        outs=tuple(o for key in ("outs", "metrics", "plots") for o in _entry_paths(body.get(key), where)),
        always_changed=bool(body.get("always_changed")),
        frozen=bool(body.get("frozen")),
    )


def _foreach_items(each: Any, where: str) -> list[tuple[str, Any]]:
    if isinstance(each, dict):
        return [(str(k), v) for k, v in each.items()]
    if isinstance(each, list):  # as DVC's normalized_iterable: indices if any item is composite
        composite = any(isinstance(v, (dict, list)) for v in each)
        return [(str(i) if composite else str(v), v) for i, v in enumerate(each)]
    raise DvcYamlError(f"{where}: foreach is neither a list nor a mapping")


def expand(name: str, body: dict[str, Any], ctx: dict[str, Any], source: str) -> dict[str, StageDef]:
    """One dvc.yaml stage, a `foreach` expanded to `name@key`."""
    where = f"{source}: stage {name}"
    for unmodelled in ("wdir", "matrix", "vars"):
        if unmodelled in body or unmodelled in (body.get("do") or {}):
            raise DvcYamlError(f"{where}: `{unmodelled}` is a form the gates' staleness check does not model")
    if "foreach" not in body:
        return {name: stage_def(interpolate(body, ctx, where), where)}
    do = body.get("do")
    if not isinstance(do, dict):
        raise DvcYamlError(f"{where}: foreach without a `do` mapping")
    stages = {}
    for key, item in _foreach_items(interpolate(body["foreach"], ctx, where), where):
        one = {**ctx, "key": key, "item": item}
        stages[f"{name}@{key}"] = stage_def(interpolate(do, one, f"{where}@{key}"), f"{where}@{key}")
    return stages


def context(root: Path, data: dict[str, Any], source: str) -> dict[str, Any]:
    """What `${...}` may name: params.yaml (DVC loads it by default) and the inline `vars`."""
    ctx: dict[str, Any] = {}
    params = root / DEFAULT_PARAMS
    named = {m.split(".")[0] for m in INTERPOLATION.findall(str(data))} - {"key", "item"}
    if params.is_file() and named:  # only where a `${...}` names more than foreach's key and item
        loaded = load_pipeline(params)
        ctx.update(loaded if isinstance(loaded, dict) else {})
    for entry in data.get("vars") or []:
        if not isinstance(entry, dict):
            raise DvcYamlError(f"{source}: vars: {entry!r}: only inline mappings are modelled")
        ctx.update(entry)
    return ctx


def pipeline_stages(root: Path) -> dict[str, StageDef]:
    """Every stage of dvc.yaml (a missing, unreadable or unmodelled one: DvcYamlError, exit 2)."""
    path = root / "dvc.yaml"
    if not path.is_file():
        raise DvcYamlError(f"{path}: missing: the gates cannot tell which stages the pipeline has")
    try:
        data = load_pipeline(path) or {}
        if (
            not isinstance(data, dict)
            or not set(data) <= TOP_KEYS
            or not isinstance(data.get("stages") or {}, dict)
        ):
            raise DvcYamlError(
                f"{path}: not a DVC pipeline (a mapping of {', '.join(sorted(TOP_KEYS))}; stages a mapping)"
            )
        ctx = context(root, data, str(path))
    except ValidationError as e:
        raise DvcYamlError(str(e)) from None
    stages: dict[str, StageDef] = {}
    for name, body in (data.get("stages") or {}).items():
        if not isinstance(body, dict):
            raise DvcYamlError(f"{path}: stage {name}: not a mapping")
        stages.update(expand(str(name), body, ctx, str(path)))
    return stages
