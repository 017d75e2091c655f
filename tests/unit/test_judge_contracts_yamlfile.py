"""contracts/yamlfile.py under mutation (docs/judge-mutation.md): hand-written YAML, strictly.

Anchors, aliases, merge keys, duplicate keys, directives, YAML 1.1-ambiguous scalars and deep nesting
refused with the line they are on; files that are too large, not UTF-8 or not YAML named in one line;
plain YAML read as DVC (YAML 1.2) reads it; DVC's own files bounded in depth and alias expansion.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contracts import yamlfile
from contracts.validate import ValidationError
from contracts.yamlfile import MAX_DEPTH, Refused, load_file, load_pipeline_text, loads, problem, where

RULE = "(rule: plain YAML, one meaning per value)"


def refused(text: str, tmp_path: Path) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ValidationError) as e:
        load_file(path, hint="h")
    return str(e.value).replace(str(path), "p.yaml")


def test_plain_yaml_reads_as_dvc_reads_it() -> None:
    text = "a: 1\nb: [x, {c: 1e-3, d: null}]\nc: |\n  two\n  lines\n1: one\n"
    assert loads(text) == {"a": 1, "b": ["x", {"c": 0.001, "d": None}], "c": "two\nlines\n", 1: "one"}
    assert loads("") is None and loads("[1, 2]") == [1, 2]
    assert loads("[0x1F, -0b101, 1_000, +7, true, 2024-01-02]") == [
        31,
        -5,
        1000,
        7,
        True,
        yaml.safe_load("2024-01-02"),
    ]


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("a: 040\n", "'040' is an octal number in YAML 1.1 but 40 to DVC (YAML 1.2): write it without the leading 0"),
        ("a: 0o17\n", "'0o17' is an octal number in YAML 1.1 but 15 to DVC (YAML 1.2): write it without the leading 0"),
        ("a: yes\n", "'yes' is a boolean in YAML 1.1 but 'yes' to DVC (YAML 1.2): write true or false, or quote it"),
        ("a: 1:20\n", "'1:20' is a base-60 number in YAML 1.1 but '1:20' to DVC (YAML 1.2): quote it"),
        ("a: +_1\n", "'+_1' is a string in YAML 1.1 but 1 to DVC (YAML 1.2): write it without the underscores"),
    ],
)  # fmt: skip
def test_a_scalar_with_two_meanings_is_refused(tmp_path: Path, text: str, what: str) -> None:
    assert refused(text, tmp_path) == f"p.yaml: line 1: {what[:120]} {RULE}"
    assert loads(text.replace(": ", ": '").replace("\n", "'\n"))["a"] == text[3:-1]  # quoted: one meaning


def test_a_directive_is_refused(tmp_path: Path) -> None:
    what = "a %YAML or %TAG directive refused (the project reads YAML as DVC does)"
    assert refused("%YAML 1.1\n---\na: 1\n", tmp_path) == f"p.yaml: line 1: {what} {RULE}"
    assert refused("%TAG !e! tag:e.org,2000:\n---\na: 1\n", tmp_path) == f"p.yaml: line 1: {what} {RULE}"


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


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("a: 12\n")
    assert load_file(path, limit=6) == {"a": 12}
    with pytest.raises(ValidationError) as e:
        load_file(path, limit=5)
    assert str(e.value) == f"{path}: 6 bytes, larger than the limit (rule: <= 5 bytes)"


def test_where_and_problem_of_library_errors() -> None:
    class NoMark(yaml.YAMLError):
        pass

    assert where(NoMark()) == "" and problem(NoMark("a\n  b")) == "a b"
    err = yaml.reader.ReaderError("f", 7, 1, "utf-8", "odd")
    assert where(err) == "character 7" and problem(err) == "odd"
    assert problem(NoMark("x" * 300)) == "x" * 120


# -- DVC's own files (dvc.yaml, dvc.lock): anchors allowed, bounded before they are built ----------------


def test_a_pipeline_file_reads_anchors_as_dvc_does_or_refuses_them() -> None:
    text = "a: &x [1, 1e-3]\nb: *x\n"
    assert load_pipeline_text(text, "dvc.yaml") == {"a": [1, 0.001], "b": [1, 0.001]}
    with pytest.raises(ValidationError) as e:
        load_pipeline_text(text, "dvc.lock", aliases=False)
    assert str(e.value) == "dvc.lock: line 2: alias *x refused"
    with pytest.raises(ValidationError) as e:
        load_pipeline_text("a: [\n", "dvc.lock")
    assert str(e.value) == "dvc.lock: line 2: not valid YAML: did not find expected node content"


def test_a_pipeline_file_is_bounded_in_depth_and_expansion(monkeypatch) -> None:
    ok = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert load_pipeline_text(ok, "f") is not None
    with pytest.raises(ValidationError) as e:
        load_pipeline_text("a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n", "f")
    assert str(e.value) == f"f: line 1: nested deeper than {MAX_DEPTH} levels"
    monkeypatch.setattr(yamlfile, "PIPELINE_NODES", 10)  # a mapping, a key, a list and its items
    assert load_pipeline_text("a: [1, 2, 3, 4, 5, 6, 7]\n", "f") == {"a": [1, 2, 3, 4, 5, 6, 7]}
    assert load_pipeline_text("a: &x [1, 2]\nb: [*x]\n", "f") == {"a": [1, 2], "b": [[1, 2]]}
    for text, line in (("a: [1, 2, 3, 4, 5, 6, 7, 8]\n", 2), ("a: &x [1, 2]\nb: [*x, *x]\n", 3)):
        with pytest.raises(ValidationError) as e:
            load_pipeline_text(text, "f")
        assert str(e.value) == f"f: line {line}: expands to more than 10 nodes"
    assert yamlfile.PIPELINE_BYTES == 32 << 20
