"""YAML as the project reads it: DVC's dialect, bounded, unambiguous, one-line errors (torch-free).

One dialect. DVC reads params.yaml, dvc.yaml and dvc.lock as YAML 1.2 (ruamel.yaml); PyYAML's
default is YAML 1.1, where `new_tokens: 040` is 32 (DVC: 40), `yes` is true (DVC: the string) and
`1e-6` a string (DVC: a float). Every loader here resolves plain scalars with ruamel's YAML 1.2 rules
(DIALECT), so the project and DVC read one value; and the strict loader (params.yaml, `--set`, the
mutation catalogue, a project's own params) refuses the plain forms whose YAML 1.1 reading is
another value (AMBIGUOUS: octal-looking numbers, base-60 numbers, yes/no/on/off/y/n), so no reader
of either dialect, nor a person, can take one for something else. tests/process/test_yaml_dialect.py holds
each loader to ruamel's reading.

Bounded. PyYAML's safe loader expands anchors and aliases: 8 KB of nested aliases ("billion laughs")
is a tree of 9**10 nodes. The strict loader refuses anchors, aliases and merge keys, duplicate keys,
%YAML/%TAG directives, nesting deeper than MAX_DEPTH, and files that are not regular files, larger
than MAX_BYTES or not UTF-8. DVC's own files (dvc.yaml uses anchors) go through `load_pipeline`:
one event pass (libyaml) bounds their depth and what their aliases expand to before they are built.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from contracts.fileio import read_regular
from contracts.validate import ValidationError

MAX_BYTES = 1 << 20  # params.yaml is ~9 KB
MAX_DEPTH = 32  # params.yaml nests 5 deep
MERGE_TAG = "tag:yaml.org,2002:merge"

# ruamel.yaml's YAML 1.2 implicit resolvers (ruamel/yaml/resolver.py, version (1, 2)): what DVC reads
DIALECT = (
    ("tag:yaml.org,2002:bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    (
        "tag:yaml.org,2002:float",
        r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)"
        r"|[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+0123456789.",
    ),
    (
        "tag:yaml.org,2002:int",
        r"[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+",
        "-+0123456789",
    ),
    ("tag:yaml.org,2002:merge", r"<<", "<"),
    ("tag:yaml.org,2002:null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    (
        "tag:yaml.org,2002:timestamp",
        r"[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?"
        r"(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?",
        "0123456789",
    ),
    ("tag:yaml.org,2002:value", r"=", "="),
)

# plain scalars YAML 1.1 reads as another value than YAML 1.2 does: refused by the strict loader
AMBIGUOUS = (
    (re.compile(r"[-+]?0[0-9_]*[0-9][0-9_]*|[-+]?0o[0-7_]+"), "an octal number in YAML 1.1", "write it without the leading 0"),
    (re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"), "a base-60 number in YAML 1.1", "quote it"),
    (re.compile(r"y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF"), "a boolean in YAML 1.1", "write true or false, or quote it"),
    (re.compile(r"[-+]_[0-9_]*"), "a string in YAML 1.1", "write it without the underscores"),
)  # fmt: skip


def construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """An int as YAML 1.2 (ruamel) reads it: `040` is 40 (not octal), `0o17` 15, `0b101` 5, `0x1F` 31."""
    value = str(loader.construct_scalar(node)).replace("_", "")
    sign, digits = (-1, value[1:]) if value[:1] == "-" else (1, value.lstrip("+"))
    base = {"0b": 2, "0o": 8, "0x": 16}.get(digits[:2], 10)
    try:
        return sign * int(digits[2:] if base != 10 else digits, base)
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None, None, f"{value!r} is not a number", node.start_mark
        ) from None


def speak_dvc(loader: type) -> type:
    """`loader` resolving plain scalars as DVC does (DIALECT) instead of YAML 1.1."""
    loader.yaml_implicit_resolvers = {}
    for tag, pattern, first in DIALECT:
        loader.add_implicit_resolver(tag, re.compile(f"^(?:{pattern})$"), list(first))
    loader.add_constructor("tag:yaml.org,2002:int", construct_int)
    return loader


@speak_dvc
class DvcLoader(yaml.SafeLoader):
    """PyYAML's safe loader reading YAML as DVC does (nothing refused: for files DVC wrote)."""


@speak_dvc
class CDvcLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same, parsed by libyaml (dvc.lock: 12 ms instead of 90 ms); only after `bounded_events`."""


class Refused(yaml.MarkedYAMLError):
    """Valid YAML this project does not accept (an alias, a duplicate key, an ambiguous scalar...)."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


def ambiguity(value: str) -> str | None:
    """Why a plain scalar means two things (YAML 1.1 and DVC's 1.2), or None."""
    for pattern, what, fix in AMBIGUOUS:
        if pattern.fullmatch(value):
            now = yaml.load(f"{value}\n", Loader=DvcLoader)
            return f"{value!r} is {what} but {now!r} to DVC (YAML 1.2): {fix}"
    return None


@speak_dvc
class StrictLoader(yaml.SafeLoader):
    """DVC's dialect without anchors, aliases, merge keys, duplicate keys, directives or ambiguous
    plain scalars, and with a depth bound."""

    _depth = 0

    def compose_document(self) -> Any:
        event = self.peek_event()
        if getattr(event, "version", None) or getattr(event, "tags", None):
            raise Refused(
                "a %YAML or %TAG directive refused (the project reads YAML as DVC does)", event.start_mark
            )
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise Refused(
                f"alias *{event.anchor} refused (anchors and aliases are not allowed)", event.start_mark
            )
        if getattr(event, "anchor", None) is not None:
            raise Refused(
                f"anchor &{event.anchor} refused (anchors and aliases are not allowed)", event.start_mark
            )
        plain = isinstance(event, yaml.ScalarEvent) and event.style is None and event.tag is None
        if plain and (why := ambiguity(event.value)):
            raise Refused(why, event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if key_node.tag == MERGE_TAG:
                raise Refused("merge key << refused (write the keys out)", key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base constructor names it
                break
            if first is not None:
                raise Refused(f"duplicate key {key!r} (first at line {first.line + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def loads(text: str) -> Any:
    """Parse YAML text strictly; raises yaml.YAMLError (Refused for what this project refuses)."""
    return yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass: no arbitrary objects


def where(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        return f"line {mark.line + 1}"
    position = getattr(err, "position", None)  # a ReaderError (a control character) has no mark
    return f"character {position}" if position is not None else ""


def problem(err: yaml.YAMLError) -> str:
    """The YAML library's problem on one line (its messages span lines)."""
    text = getattr(err, "problem", None) or getattr(err, "reason", None) or str(err)
    return " ".join(str(text).split())[:120]


def decoded(data: bytes, source: str, what: str = "a UTF-8 YAML file") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValidationError(source, f"byte {e.start}", "not UTF-8 text", what) from None


def load_file(path: str | Path, hint: str = "", limit: int = MAX_BYTES) -> Any:
    """A YAML file read strictly; every problem is a ValidationError naming the file (and line)."""
    source = str(path)
    text = decoded(read_regular(path, limit, source, hint=hint), source)
    try:
        return loads(text)
    except Refused as e:
        raise ValidationError(
            source,
            where(e),
            problem(e),
            "plain YAML, one meaning per value",
        ) from None
    except yaml.YAMLError as e:
        raise ValidationError(source, where(e), f"not valid YAML: {problem(e)}") from None


# DVC's own files: anchors allowed (dvc.yaml shares its deps lists), bounded before they are built
PIPELINE_BYTES = 32 << 20  # the real dvc.lock is 75 KB
PIPELINE_NODES = 1_000_000  # nodes once every alias is expanded (the real dvc.yaml: ~2,000)


def bounded_events(text: str, source: str, aliases: bool) -> None:
    """One libyaml event pass: nesting at most MAX_DEPTH deep (libyaml's composer recurses in C and
    crashed the interpreter at 100,000 levels), aliases refused or expanding to at most PIPELINE_NODES."""
    depth, sizes, stack = 0, {}, [[None, 0]]
    loader = CDvcLoader(text)
    try:
        while (event := loader.get_event()) is not None:
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ValidationError(
                        source, where_event(event), f"nested deeper than {MAX_DEPTH} levels"
                    )
                stack.append([event.anchor, 1])
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
                anchor, size = stack.pop()
                stack[-1][1] += size
                sizes[anchor] = size
            elif isinstance(event, yaml.AliasEvent):
                if not aliases:
                    raise ValidationError(source, where_event(event), f"alias *{event.anchor} refused")
                stack[-1][1] += sizes.get(event.anchor, 1)
            elif isinstance(event, yaml.ScalarEvent):
                sizes[event.anchor] = 1
                stack[-1][1] += 1
            if stack[0][1] > PIPELINE_NODES:
                raise ValidationError(
                    source, where_event(event), f"expands to more than {PIPELINE_NODES} nodes"
                )
    except yaml.YAMLError as e:
        raise ValidationError(source, where(e), f"not valid YAML: {problem(e)}") from None
    finally:
        loader.dispose()


def where_event(event: Any) -> str:
    return f"line {event.start_mark.line + 1}"


def load_pipeline(path: str | Path, aliases: bool = True) -> Any:
    """dvc.yaml or dvc.lock (or a params file) as DVC reads it, bounded; one-line errors naming the file."""
    source = str(path)
    return load_pipeline_text(decoded(read_regular(path, PIPELINE_BYTES), source), source, aliases)


def load_pipeline_text(text: str, source: str, aliases: bool = True) -> Any:
    bounded_events(text, source, aliases)
    try:
        return yaml.load(text, Loader=CDvcLoader)
    except yaml.YAMLError as e:
        raise ValidationError(source, where(e), f"not valid YAML: {problem(e)}") from None
