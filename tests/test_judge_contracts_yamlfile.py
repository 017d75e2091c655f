"""contracts/yamlfile.py under mutation (docs/judge-mutation.md): hand-written YAML, strictly.

Anchors, aliases, merge keys, duplicate keys and deep nesting refused with the line they are on;
files that are too large, not UTF-8 or not YAML named in one line; plain YAML read as PyYAML reads it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contracts import yamlfile
from contracts.validate import ValidationError
from contracts.yamlfile import MAX_DEPTH, Refused, load_file, loads, problem, where

RULE = "(rule: plain YAML: no anchors, aliases or duplicate keys)"


def refused(text: str, tmp_path: Path) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError) as e:
        load_file(path, hint="h")
    return str(e.value).replace(str(path), "p.yaml")


def test_plain_yaml_reads_as_pyyaml_reads_it() -> None:
    text = "a: 1\nb: [x, {c: 1e-3, d: null}]\nc: |\n  two\n  lines\n1: one\n"
    assert loads(text) == yaml.safe_load(text)
    assert loads("") is None and loads("[1, 2]") == [1, 2]


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("a: &x 1\nb: *x\n", 1, "anchor &x refused (anchors and aliases are not allowed)"),
        ("a: 1\nb: [2, &y 3]\n", 2, "anchor &y refused (anchors and aliases are not allowed)"),
        ("a:\n  b: 1\n  c: 2\n  b: 3\n", 4, "duplicate key 'b' (first at line 2)"),
        ("a: {b: 1}\nc:\n  <<: {d: 2}\n", 3, "merge key << refused (write the keys out)"),
        ("1: a\n1: b\n", 2, "duplicate key 1 (first at line 1)"),
    ],
)
def test_what_this_project_refuses_names_the_line(tmp_path: Path, text: str, line: int, what: str) -> None:
    assert refused(text, tmp_path) == f"p.yaml: line {line}: {what} {RULE}"


def test_an_alias_is_refused_as_an_alias() -> None:
    with pytest.raises(Refused, match=r"^alias \*x refused \(anchors and aliases are not allowed\)"):
        _alias_loader().compose_node(None, None)


def _alias_loader() -> yamlfile.StrictLoader:
    """A loader whose next event is an alias (PyYAML's parser reports an undefined one itself first)."""
    loader = yamlfile.StrictLoader("- *x\n")
    loader.get_event()  # stream start
    loader.get_event()  # document start
    loader.get_event()  # sequence start
    return loader


def test_nesting_is_bounded(tmp_path: Path) -> None:
    ok = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert loads(ok) is not None
    deep = "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    assert refused(deep, tmp_path) == f"p.yaml: line 1: nested deeper than {MAX_DEPTH} levels {RULE}"
    assert MAX_DEPTH == 32 and yamlfile.MAX_BYTES == 1 << 20


def test_an_unhashable_key_is_left_to_pyyaml(tmp_path: Path) -> None:
    assert refused("? [1]\n: a\n", tmp_path).startswith(
        "p.yaml: line 1: not valid YAML: found unhashable key"
    )


def test_bad_files_are_named_in_one_line(tmp_path: Path) -> None:
    assert refused("a: [1\n", tmp_path).startswith("p.yaml: line 2: not valid YAML: expected ',' or ']'")
    assert (
        refused("a: b: c\n", tmp_path)
        == "p.yaml: line 1: not valid YAML: mapping values are not allowed here"
    )
    assert (
        refused("a: \x01\n", tmp_path)
        == "p.yaml: character 3: not valid YAML: special characters are not allowed"
    )
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"a: 1\n\xff")
    with pytest.raises(ValidationError) as e:
        load_file(path)
    assert str(e.value) == f"{path}: byte 5: not UTF-8 text (rule: a UTF-8 YAML file)"
    with pytest.raises(ValidationError) as e:
        load_file(tmp_path / "none.yaml", hint="run from the repository root")
    assert str(e.value) == f"{tmp_path / 'none.yaml'}: file not found; next: run from the repository root"


def test_a_file_over_the_limit_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(yamlfile, "MAX_BYTES", 4)
    path = tmp_path / "p.yaml"
    path.write_text("a: 12\n")
    with pytest.raises(ValidationError) as e:
        load_file(path)
    assert str(e.value) == f"{path}: 6 bytes, larger than the limit (rule: <= 4 bytes)"


def test_where_and_problem_of_library_errors() -> None:
    class NoMark(yaml.YAMLError):
        pass

    assert where(NoMark()) == "" and problem(NoMark("a\n  b")) == "a b"
    err = yaml.reader.ReaderError("f", 7, 1, "utf-8", "odd")
    assert where(err) == "character 7" and problem(err) == "odd"
    assert problem(NoMark("x" * 300)) == "x" * 200
