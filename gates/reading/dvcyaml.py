"""dvc.yaml's stages as DVC resolves them: cmd, deps, params, outs (torch-free; DVC imported only for rare forms).

First DVC's own schema (gates/reading/dvcschema.py): a file DVC refuses is refused with DVC's reason.
Then the templating of dvc/parsing (DVC 3), mirrored rule by rule where importing DVC would cost more
than the gates' whole check, and reusing DVC's own code where a form is rare (docs/verdicts.md, "Cost"):
- the context is params.yaml (loaded whenever it exists, as DVC does) and the inline `vars`, merged
  without overwriting: `vars` redefining a params key is refused with DVC's MergeError text; keys that
  are not strings are not in the context (DVC's CtxDict drops them);
- `${a.b}`, `${a[0]}`, `${ a }` select as DVC's Context.select does (dots and brackets are one path,
  a list takes `int()` of its index, so `[-1]` is the last item); an expression DVC's grammar rejects
  is refused; `\\${x}` is the text `${x}`;
- a string that is one `${...}` keeps its value's type; inside a longer string a value is written by
  DVC's own `to_str` (`true`, a dict in a cmd as `--key value` flags, per .dvc/config `[parsing]`);
  a dict or list anywhere else is refused as DVC refuses it;
- `foreach` expands to `name@key`: a mapping's keys, a list's values (`to_str`: `x@true`), a list
  holding a mapping or a list by index; from a `${...}` the items are DVC's Value nodes, named by
  `str()` (`x@True`); `key` is set only for a mapping.
What this module does not model (a `matrix` stage, a `wdir`, a `vars` file, a stage's own `vars`) is
one line naming the stage, never a silent guess: the gates' staleness is held equal to `dvc status`
(tests/process/test_seals_dvc_status.py), and a guess could make a stale stage look fresh.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.validate import ValidationError
from contracts.yamlfile import load_pipeline
from gates.reading.dvcschema import PIPELINE, DvcRefuses, check

DEFAULT_PARAMS = "params.yaml"
KEYCRE = re.compile(r"(?<!\\)\$\{(?P<inner>.*?)\}", re.DOTALL)  # dvc/parsing/interpolate.py
WORD = r"[^.\[\]]+"  # DVC's pyparsing grammar: word (. word | [ word ])*
EXPRESSION = re.compile(rf"{WORD}(?:\.{WORD}|\[{WORD}\])*", re.DOTALL)
PRIMITIVES = (int, float, str, bytes, bool)  # dvc/parsing/context.py
UNMODELLED = ("wdir", "matrix", "vars")


class DvcYamlError(Exception):
    """dvc.yaml unreadable, refused by DVC, or a form the gates do not model: exit 2."""


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


class Node:
    """A value selected from the context whole, not unwrapped (DVC's Value node in a `foreach`)."""

    def __init__(self, value: Any) -> None:
        self.value = value


def plain(value: Any, source: str, path: str = "") -> Any:
    """`value` as DVC's context holds it: mappings without their non-string keys (CtxDict drops them);
    a value DVC's context cannot hold (a date) is refused as DVC refuses it, naming `source:path`."""
    if isinstance(value, dict):
        return {
            k: plain(v, source, f"{path}.{k}" if path else k) for k, v in value.items() if isinstance(k, str)
        }
    if isinstance(value, list):
        return [plain(v, source, f"{path}.{i}" if path else str(i)) for i, v in enumerate(value)]
    if value is None or isinstance(value, PRIMITIVES):
        return value
    raise DvcYamlError(f"Unsupported value of type '{type(value).__name__}' in '{source}:{path}'")


def select(ctx: dict[str, Any], expr: str) -> Any:
    """The value at `expr` as DVC's Context.select finds it; DvcYamlError "Could not find" otherwise."""
    node: Any = ctx
    rest = expr.replace("[", ".").replace("]", "")
    while True:
        index, *rems = rest.split(".", 1)
        try:
            node = node[int(index) if isinstance(node, list) else index.strip()]
        except (LookupError, ValueError, TypeError):
            raise DvcYamlError(f"Could not find '{expr}'") from None
        if not rems:
            return node
        if not isinstance(node, (dict, list)):
            raise DvcYamlError(f"Could not find '{expr}'")
        rest = rems[0]


def expression(inner: str) -> str:
    """`inner` of a `${...}` if DVC's grammar takes it (words joined by dots and [index])."""
    if not EXPRESSION.fullmatch(inner):
        raise DvcYamlError(f"${{{inner}}} is not an expression DVC parses")
    return inner


def to_str(value: Any, config: dict[str, str] | None = None) -> str:
    """A value written into a longer string: a string as it is, anything else by DVC's own to_str."""
    if isinstance(value, str):
        return value
    from dvc.parsing.interpolate import ParseError  # a rare form: DVC's own code
    from dvc.parsing.interpolate import to_str as dvc_to_str

    try:
        return dvc_to_str(value, config=config)
    except ParseError as e:
        raise DvcYamlError(str(e)) from None


def checked(value: Any, key: str | None) -> Any:
    """DVC's validate_value: a dict or list is refused outside `foreach` (a dict is allowed in a cmd)."""
    bare = value.value if isinstance(value, Node) else value
    composite = bare is not None and not isinstance(bare, PRIMITIVES)
    if (
        composite
        and key is not None
        and "foreach" not in key
        and not (isinstance(bare, dict) and key == "cmd")
    ):
        raise DvcYamlError(f"Cannot interpolate data of type '{type(bare).__name__}'")
    return value


def resolve_str(src: str, ctx: dict[str, Any], key: str | None, config: dict[str, str], whole: bool) -> Any:
    """One string with its `${...}` replaced (`whole`: a lone `${...}` keeps its value, as a Node when
    the caller keeps nodes)."""
    matches = list(KEYCRE.finditer(src))
    if len(matches) == 1 and src == matches[0].group(0):
        value = select(ctx, expression(matches[0]["inner"]))
        return checked(Node(value) if whole else value, key)
    out, index = "", 0
    for m in matches:
        value = checked(select(ctx, expression(m["inner"])), key)
        out += src[index : m.start()] + to_str(value, config)
        index = m.end()
    return (out + src[index:]).replace(r"\${", "${")


def resolve(
    value: Any, ctx: dict[str, Any], key: str | None, config: dict[str, str], nodes: bool = False
) -> Any:
    """`value` with every string (mapping keys too) resolved, as DVC's Context.resolve."""
    if isinstance(value, dict):
        return {
            resolve(k, ctx, key, config, nodes): resolve(v, ctx, key, config, nodes) for k, v in value.items()
        }
    if isinstance(value, list):
        return [resolve(v, ctx, key, config, nodes) for v in value]
    if isinstance(value, str):
        return resolve_str(value, ctx, key, config, nodes)
    return value


def _outs(entries: list[Any]) -> list[Out]:
    """Outs as the schema lets them be written: a path, or {path: flags} (`cache` a bool)."""
    outs = []
    for entry in entries:
        if isinstance(entry, dict):
            path, flags = next(iter(entry.items()))
            cache = flags.get("cache", True) if isinstance(flags, dict) else True
            outs.append(Out(str(path), bool(cache)))
        else:
            outs.append(Out(str(entry)))
    return outs


def _params(entries: list[Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    files: dict[str, list[str]] = {}
    for entry in entries:
        if isinstance(entry, dict):
            for name, keys in entry.items():
                files.setdefault(str(name), []).extend(str(k) for k in keys or [])
        else:
            files.setdefault(DEFAULT_PARAMS, []).append(str(entry))
    return tuple((f, tuple(dict.fromkeys(keys))) for f, keys in files.items())


def stage_def(body: dict[str, Any]) -> StageDef:
    return StageDef(
        cmd=body.get("cmd"),
        deps=tuple(str(d) for d in body.get("deps") or []),
        params=_params(body.get("params") or []),
        outs=tuple(o for key in ("outs", "metrics", "plots") for o in _outs(body.get(key) or [])),
        always_changed=bool(body.get("always_changed")),
        frozen=bool(body.get("frozen")),
    )


def resolved(body: dict[str, Any], ctx: dict[str, Any], config: dict[str, str], where: str) -> StageDef:
    """A stage's definition with every key resolved (DVC's EntryDefinition.resolve_stage)."""
    try:
        return stage_def({k: resolve(v, ctx, k, config) for k, v in body.items()})
    except DvcYamlError as e:
        raise DvcYamlError(f"{where}: {e} (DVC refuses it)") from None


def foreach_keys(each: Any) -> list[tuple[str, Any]]:
    """(key, item) of a resolved foreach, as DVC's ForeachDefinition.normalized_iterable names them."""
    # to_str without .dvc/config's `[parsing]`: it shapes only a dict, and a foreach key is never one
    name = lambda v: str(v.value) if isinstance(v, Node) else to_str(v)  # noqa: E731
    if isinstance(each, dict):
        return [(name(k), v) for k, v in each.items()]
    if any(isinstance(v.value if isinstance(v, Node) else v, (dict, list)) for v in each):
        return [(str(i), v) for i, v in enumerate(each)]  # composite items: by index
    return [(name(v), v) for v in each]


def expand(
    name: str, body: dict[str, Any], ctx: dict[str, Any], config: dict[str, str], source: str
) -> dict[str, StageDef]:
    """One dvc.yaml stage, a `foreach` expanded to `name@key`."""
    where = f"{source}: stage {name}"
    for form in UNMODELLED:
        if form in body or form in (body.get("do") or {}):
            raise DvcYamlError(f"{where}: `{form}` is a form the gates' staleness check does not model")
    if "foreach" not in body:
        return {name: resolved(body, ctx, config, where)}
    try:
        each = resolve(body["foreach"], ctx, None, config, nodes=True)
        if isinstance(each, Node):  # from the context whole: a list's items are DVC's Value nodes
            each = [Node(v) for v in each.value] if isinstance(each.value, list) else each.value
        if not isinstance(each, (dict, list)):
            raise DvcYamlError(f"expected list/dictionary, got {type(each).__name__}")
        items = foreach_keys(each)
    except DvcYamlError as e:
        raise DvcYamlError(f"{where}: foreach: {e} (DVC refuses it)") from None
    stages = {}
    for key, item in items:
        one = {**ctx, "item": plain(item.value if isinstance(item, Node) else item, "<local>", "item")}
        if isinstance(each, dict):
            one["key"] = key
        stages[f"{name}@{key}"] = resolved(body["do"], one, config, f"{where}@{key}")
    return stages


def merge(
    into: dict[str, Any], update: dict[str, Any], source: str, sources: dict[str, str], path: str = ""
) -> None:
    """DVC's context merge without overwriting: a key both define (not both mappings) is refused."""
    for key, value in update.items():
        dotted = f"{path}.{key}" if path else key
        if isinstance(into.get(key), dict) and isinstance(value, dict):
            merge(into[key], value, source, sources, dotted)
        elif key in into:
            ancestors = [p for p in sources if dotted == p or dotted.startswith(p + ".")]
            # the nearest source defined it: each ancestor is a prefix of the next (the longest is the greatest)
            before = sources[max(ancestors, key=len)]  # pragma: no mutate -- equivalent: see the line above
            raise DvcYamlError(
                f"cannot redefine '{dotted}' from '{source}' as it already exists in '{before}'"
            )
        else:
            into[key] = value
            sources[dotted] = source


def context(root: Path, data: dict[str, Any], source: str) -> dict[str, Any]:
    """What `${...}` may name: params.yaml (DVC loads it whenever it exists) and the inline `vars`."""
    ctx: dict[str, Any] = {}
    sources: dict[str, str] = {}
    params = root / DEFAULT_PARAMS
    if params.is_file():
        loaded = load_pipeline(params)
        if not isinstance(loaded, dict):
            raise DvcYamlError(
                f"{source}: vars: expected a dictionary, got '{type(loaded).__name__}' in file '{DEFAULT_PARAMS}'"
            )
        merge(ctx, plain(loaded, DEFAULT_PARAMS), DEFAULT_PARAMS, sources)
    for index, entry in enumerate(data.get("vars") or []):
        if not isinstance(entry, dict):
            raise DvcYamlError(f"{source}: vars: {entry!r}: a vars file is a form the gates do not model")
        try:
            merge(ctx, plain(entry, f"vars[{index}]"), f"vars[{index}]", sources)
        except DvcYamlError as e:
            raise DvcYamlError(f"{source}: vars: {e} (DVC refuses it)") from None
    return ctx


def parsing_config(root: Path) -> dict[str, str]:
    """.dvc/config's `[parsing]` (bool, list): how DVC writes a dict into a cmd."""
    cfg = configparser.ConfigParser()
    cfg.read([root / ".dvc" / "config", root / ".dvc" / "config.local"])
    return dict(cfg["parsing"]) if cfg.has_section("parsing") else {}


def pipeline_stages(root: Path) -> dict[str, StageDef]:
    """Every stage of dvc.yaml (missing, unreadable, refused by DVC or unmodelled: DvcYamlError, exit 2)."""
    path = root / "dvc.yaml"
    if not path.is_file():
        raise DvcYamlError(f"{path}: missing: the gates cannot tell which stages the pipeline has")
    try:
        data = load_pipeline(path)
        data = {} if data is None else data
        check(PIPELINE, data, str(path))
        ctx = context(root, data, str(path))
    except (ValidationError, DvcRefuses) as e:
        raise DvcYamlError(str(e)) from None
    config = parsing_config(root)
    stages: dict[str, StageDef] = {}
    for name, body in (data.get("stages") or {}).items():
        stages.update(expand(str(name), body, ctx, config, str(path)))
    return stages
