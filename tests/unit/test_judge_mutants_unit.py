"""The mutation catalogue (gates/campaigns/mutants.py) in-process: load, select, locate and apply on
small hand-built catalogues and files (issue #37: 70 of its mutants survived the unit tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.validate import ValidationError
from gates.campaigns import mutants as m
from gates.campaigns.mutants import AnchorError, Edit, Mutant

EDIT = {"file": "xtrain/core/a.py", "old": "x = 1", "new": "x = 2"}


def entry(ident: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "area": "model",
        "what": "a small change",
        "expect": ["training"],
        "edits": [EDIT],
        **extra,
    }


def catalogue(mutant_list: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "campaign": {"skip_stages": ["scaling"], "skip_gates": ["perf", "scaling"], "timeout_s": 77},
        "profiles": {"default": [], "tiny": ["seed=1"]},
        "mutants": mutant_list,
    }


class NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # the catalogue's reader refuses anchors


def written(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "cat.yaml"
    path.write_text(yaml.dump(data, Dumper=NoAliases, sort_keys=False))
    return path


# ---- load -----------------------------------------------------------------------------------------


def test_load_reads_every_field(tmp_path: Path) -> None:
    path = written(
        tmp_path, catalogue([entry("a"), entry("b", equivalent=True, ci=True, expect=["xx", "yy"])])
    )
    c = m.load(path)
    assert c.profiles == {"default": [], "tiny": ["seed=1"]}
    assert (c.skip_stages, c.skip_gates, c.timeout_s, c.source) == (
        ["scaling"],
        ["perf", "scaling"],
        77,
        str(path),
    )
    edit = Edit("xtrain/core/a.py", "x = 1", "x = 2")
    assert c.mutants == [
        Mutant("a", "model", "a small change", ["training"], [edit], False, False),
        Mutant("b", "model", "a small change", ["xx", "yy"], [edit], True, True),
    ]
    assert c.mutants[0].equivalent is False and c.mutants[0].ci is False


def test_load_defaults_to_the_shipped_catalogue() -> None:
    c = m.load()
    assert c.source == str(m.CATALOGUE) and len(c.mutants) > 10
    assert "default" in c.profiles and c.timeout_s > 0


def test_load_refuses_duplicate_ids_sorted_once_each(tmp_path: Path) -> None:
    path = written(tmp_path, catalogue([entry(i) for i in ["z", "b", "z", "a", "b", "z", "c"]]))
    with pytest.raises(ValidationError) as e:
        m.load(path)
    assert str(e.value) == f"{path}: mutants: duplicate ids ['b', 'z'] (rule: unique ids)"


def test_load_validates_against_the_schema(tmp_path: Path) -> None:
    path = written(tmp_path, catalogue([entry("a", area="nowhere")]))
    with pytest.raises(ValidationError) as e:
        m.load(path)
    assert e.value.source == str(path) and "nowhere" in str(e.value)


def test_load_refuses_a_catalogue_over_4_mib(tmp_path: Path) -> None:
    path = written(tmp_path, catalogue([entry("a")]))
    with open(path, "a") as f:
        f.write("#" * ((4 << 20) - path.stat().st_size) + "\n")  # one byte over
    with pytest.raises(ValidationError) as e:
        m.load(path)
    assert str(e.value) == (
        f"{path}: 4194305 bytes, larger than the limit (rule: <= 4194304 bytes); next: name the catalogue with --catalogue"
    )


# ---- Catalogue.select -----------------------------------------------------------------------------


@pytest.fixture
def cat(tmp_path: Path) -> m.Catalogue:
    return m.load(written(tmp_path, catalogue([entry("a", ci=True), entry("b"), entry("c", ci=True)])))


@pytest.mark.parametrize(
    ("only", "subset", "ids"),
    [
        (None, None, ["a", "b", "c"]),
        ([], None, ["a", "b", "c"]),
        (["c", "a"], None, ["a", "c"]),  # catalogue order
        (["b"], None, ["b"]),
        (None, "ci", ["a", "c"]),
        (["b", "c"], "ci", ["c"]),
        (["b"], "ci", []),
    ],
)
def test_select(cat: m.Catalogue, only: list[str] | None, subset: str | None, ids: list[str]) -> None:
    assert [x.id for x in cat.select(only, subset)] == ids


def test_select_unknown_ids_named_sorted(cat: m.Catalogue) -> None:
    with pytest.raises(ValidationError) as e:
        cat.select(["zz", "a", "yy", "zz"], None)
    assert (
        str(e.value)
        == f"{cat.source}: mutants: unknown mutant ids ['yy', 'zz'] (rule: an id in the catalogue)"
    )


@pytest.mark.parametrize("subset", ["nightly", "", "CI"])
def test_select_unknown_subset(cat: m.Catalogue, subset: str) -> None:
    with pytest.raises(ValidationError) as e:
        cat.select(None, subset)
    assert str(e.value) == (
        f"--subset: {subset}: unknown subset (rule: ci)" if subset else "--subset: unknown subset (rule: ci)"
    )


# ---- _indent, _locate, mutated_text, apply ---------------------------------------------------------


def test_indent_pads_every_line_but_empty_ones() -> None:
    assert m._indent("a\n\n b\n", "  ") == "  a\n\n   b\n"
    assert m._indent("", "  ") == ""


def one(file: str, old: str, new: str, ident: str = "t") -> Mutant:
    return Mutant(ident, "model", "what", [], [Edit(file, old, new)])


@pytest.mark.parametrize(
    ("text", "old", "new", "found"),
    [
        ("a = 1\nb = 2\n", "b = 2", "b = 3", ("b = 2", "b = 3")),
        ("a = 1\na = 1\n", "a = 1", "a = 9", ("", "")),
        ("a = 1\n", "c = 1", "c = 2", ("", "")),
        (
            "def f():\n    if x:\n        y()\n",
            "if x:\n    y()",
            "if z:\n    w()",
            ("    if x:\n        y()", "    if z:\n        w()"),
        ),
        ("if x:\n    y()\n", "if x:\n    y()", "pass", ("if x:\n    y()", "pass")),
        (
            " " * 40 + "p\n" + " " * 40 + "q\n",
            "p\nq",
            "r\n\ns",
            (" " * 40 + "p\n" + " " * 40 + "q", " " * 40 + "r\n\n" + " " * 40 + "s"),
        ),
        (" " * 41 + "p\n" + " " * 41 + "q\n", "p\nq", "r", ("", "")),
        ("  p\n  q\n  p\n  q\n", "p\nq", "r", ("", "")),  # twice at one indentation
        ("p\nq\n    p\n    q\n", "p\nq", "r", ("", "")),  # at two indentations
    ],
)
def test_locate(text: str, old: str, new: str, found: tuple[str, str]) -> None:
    assert m._locate(text, Edit("f.py", old, new)) == found


def test_mutated_text_applies_edits_in_order_without_writing(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\ny = 2\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    return 1\n")
    mutant = Mutant(
        "t",
        "model",
        "what",
        [],
        [
            Edit("pkg/a.py", "x = 1", "x = 5"),
            Edit("pkg/b.py", "return 1", "return 2"),
            Edit("pkg/a.py", "x = 5\ny", "x = 6\ny"),
        ],
    )
    assert m.mutated_text(mutant, tmp_path) == {
        "pkg/a.py": "x = 6\ny = 2\n",
        "pkg/b.py": "def f():\n    return 2\n",
    }
    assert (tmp_path / "pkg" / "a.py").read_text() == "x = 1\ny = 2\n"  # nothing written
    assert m.apply(mutant, tmp_path) == ["pkg/a.py", "pkg/b.py"]
    assert (tmp_path / "pkg" / "a.py").read_text() == "x = 6\ny = 2\n"


def test_mutated_text_replaces_only_the_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("if a:\n    b = 1\nb = 1  # once more, unindented\n")
    mutant = one("a.py", "if a:\n    b = 1", "if a:\n    b = 2")
    assert m.mutated_text(mutant, tmp_path) == {"a.py": "if a:\n    b = 2\nb = 1  # once more, unindented\n"}


@pytest.mark.parametrize(
    ("text", "old", "why"),
    [
        ("x = 1\n", "y = 1", "anchor not found"),
        ("x = 1\nx = 1\n", "x = 1", "anchor found 2 times, expected once"),
        ("x = 1\nx = 1\nx = 1\n", "x = 1", "anchor found 3 times, expected once"),
        ("p\nq\n    p\n    q\n", "p\nq\nr", "anchor not found"),
        ("p\nq\n    p\n    q\n", "p\nq", "anchor found 1 times, expected once"),
    ],
)
def test_mutated_text_anchor_errors(tmp_path: Path, text: str, old: str, why: str) -> None:
    (tmp_path / "a.py").write_text(text)
    with pytest.raises(AnchorError) as e:
        m.mutated_text(one("a.py", old, "z", ident="m-1"), tmp_path)
    assert str(e.value) == f"mutant m-1: {why} in a.py: {old.splitlines()[0]!r}"
    assert e.value.exit_code == 2


def test_mutated_text_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(AnchorError) as e:
        m.mutated_text(one("gone.py", "x = 1", "x = 2", ident="m-2"), tmp_path)
    assert str(e.value) == "mutant m-2: cannot read gone.py: No such file or directory"
