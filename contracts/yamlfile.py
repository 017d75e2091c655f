"""Hand-written YAML (params.yaml, `--set` values): bounded, unambiguous, one-line errors (torch-free).

PyYAML's safe loader expands anchors and aliases: 8 KB of nested aliases ("billion laughs") is a
tree of 9**10 nodes that `config show` never finishes printing. It also takes the last of two
equal keys without a word. This loader refuses anchors, aliases and merge keys (params.yaml needs
none), duplicate keys, nesting deeper than MAX_DEPTH, and files that are not regular files, larger
than MAX_BYTES or not UTF-8; each is a yaml.YAMLError, or a ValidationError naming file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from contracts.fileio import read_regular
from contracts.validate import ValidationError

MAX_BYTES = 1 << 20  # params.yaml is ~9 KB
MAX_DEPTH = 32  # params.yaml nests 5 deep
MERGE_TAG = "tag:yaml.org,2002:merge"


class Refused(yaml.MarkedYAMLError):
    """Valid YAML this project does not accept (an alias, a duplicate key, ...)."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class StrictLoader(yaml.SafeLoader):
    """SafeLoader without anchors, aliases, merge keys or duplicate keys, and with a depth bound."""

    _depth = 0

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
    return " ".join(str(text).split())[:200]


def load_file(path: str | Path, hint: str = "") -> Any:
    """A YAML file read strictly; every problem is a ValidationError naming the file (and line)."""
    source = str(path)
    data = read_regular(path, MAX_BYTES, source, hint=hint)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValidationError(source, f"byte {e.start}", "not UTF-8 text", "a UTF-8 YAML file") from None
    try:
        return loads(text)
    except Refused as e:
        raise ValidationError(
            source, where(e), problem(e), "plain YAML: no anchors, aliases or duplicate keys"
        ) from None
    except yaml.YAMLError as e:
        raise ValidationError(source, where(e), f"not valid YAML: {problem(e)}") from None
