"""gates/reading/dvcignore.py under mutation (docs/judge-mutation.md): folders as DVC lists them, in-process.

Each piece against DVC's own (dvc/pathspec_math.py, dvc/ignore.py), on rules, paths and small trees
written here: a rule rebased below a folder, two folders' rules merged, a path matched, and a folder
walked with `.dvcignore` files at several levels, `.git`, `.hg`, a nested project. The refusals: a
`.dvcignore` inside a folder DVC hashes, an out a rule hides.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.reading.dvcignore import DEFAULTS, IgnoreError, IgnoreFilter, Patterns, change_rule, merge

RULES = st.sampled_from(
    ["a", "/a", "a/", "a/b", "/a/b/", "**/a", "!a", "!/a/b", "\\#x", "#c", " a ", "a/**", "*.tmp", "d/",
     "!keep.tmp", "x/*/y", "**/z/", "?b", "[ab]c", "sub/**/f"]
)  # fmt: skip


@given(rule=RULES, rel=st.sampled_from(["sub", "sub/dir", "a/b/c"]))
def test_change_rule_is_dvcs(rule: str, rel: str) -> None:
    from dvc.pathspec_math import change_rule as dvc_change_rule

    assert change_rule(rule, rel) == dvc_change_rule(rule, rel)


def test_change_rule_examples() -> None:
    assert change_rule("a", "s") == "s/**/a" and change_rule("/a", "s") == "s/a"
    assert change_rule("a/b", "s") == "s/a/b" and change_rule("**/a/b", "s") == "s/**/a/b"
    assert change_rule("!a", "s") == "!/s/**/a" and change_rule("#c", "s") == "#c"
    assert change_rule("\\!x", "s") == "s/**/!x" and change_rule("a/", "s") == "s/**/a/"


@given(
    a=st.lists(RULES, max_size=3),
    b=st.lists(RULES, max_size=3),
    dirs=st.sampled_from(
        [("/r", "/r/x"), ("/r/x", "/r"), ("/r/x", "/r/y"), ("/r", "/r"), ("/r/x/y", "/r/x")]
    ),
)
def test_merge_is_dvcs_merge_patterns(a: list[str], b: list[str], dirs: tuple[str, str]) -> None:
    from dvc.pathspec_math import PatternInfo, merge_patterns

    class Flavour:
        commonpath = staticmethod(posixpath.commonpath)

    theirs, prefix = merge_patterns(
        Flavour, [PatternInfo(r, "") for r in a], dirs[0], [PatternInfo(r, "") for r in b], dirs[1]
    )
    assert merge(a, dirs[0], b, dirs[1]) == ([p.patterns for p in theirs], prefix)


def test_merge_examples() -> None:
    assert merge([], "/r", ["b"], "/r/x") == (["b"], "/r/x") and merge(["a"], "/r", [], "/r/x") == (
        ["a"],
        "/r",
    )
    assert merge(["a"], "/r", ["b"], "/r/x") == (["a", "x/**/b"], "/r")
    assert merge(["a"], "/r/x", ["b"], "/r") == (["b", "x/**/a"], "/r")
    assert merge(["a"], "/r/x", ["b"], "/r/y") == (["x/**/a", "y/**/b"], "/r")


PATHS = st.sampled_from(
    [("/r", "a", False), ("/r", "a", True), ("/r/x", "a", False), ("/r/sub/dir", "a", True), ("/r", "junk.tmp", False),
     ("/r/d", "keep.tmp", False), ("/r", ".git", False), ("/r/p", ".git", True), ("/r/p/.hg", "f", False),
     ("/r/a", "b", False), ("/r/x/q", "y", False), ("/elsewhere", "a", False), ("/r", "#x", False),
     ("/r/s", "bc", False), ("/r/sub/k", "f", False), ("/rr", "a", False), ("/r/z", "f", False), ("/r/y", "z", True)]
)  # fmt: skip


@given(rules=st.lists(RULES, max_size=4), where=PATHS)
def test_patterns_match_as_dvcs(rules: list[str], where: tuple[str, str, bool]) -> None:
    from dvc.ignore import DvcIgnorePatterns

    dirname, basename, is_dir = where
    theirs = DvcIgnorePatterns([*DEFAULTS, *rules], "/r", "/")
    ours = Patterns([*DEFAULTS, *rules], "/r")
    assert ours.matches(dirname, basename, is_dir) == theirs.matches(dirname, basename, is_dir)
    assert ours.rules == [p.patterns for p in theirs.pattern_list]


def test_patterns_examples() -> None:
    p = Patterns(["*.tmp", "!keep.tmp", "d/", "/top", "x/y", "#c"], "/r")
    assert p.rules == ["*.tmp", "!keep.tmp", "d/", "/top", "x/y"]  # a comment compiles to nothing
    assert p.matches("/r", "a.tmp") and p.matches("/r/s", "a.tmp") and not p.matches("/r", "keep.tmp")
    assert p.matches("/r", "d", True) and not p.matches("/r", "d", False) and p.matches("/r/d", "f")
    assert p.matches("/r", "top") and not p.matches("/r/s", "top") and p.matches("/r/x", "y")
    assert not p.matches("/elsewhere", "a.tmp") and not p.matches("/rr", "a.tmp")
    assert Patterns(["*.tmp", "!keep.tmp", "*.tmp"], "/r").matches("/r", "keep.tmp")  # the last rule wins


# -- a project's filter ---------------------------------------------------------------------------------------


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def dvcs_files(root: Path, folder: str) -> list[str]:
    """The files DVC's own filter walks under `folder`, relative to it, after walking the project as
    `dvc status` does first (collecting its stages: each folder then holds its own subfolders' rules)."""
    from dvc.fs import LocalFileSystem
    from dvc.ignore import DvcIgnoreFilter

    fs = LocalFileSystem()
    base = os.path.join(str(root.resolve()), folder)
    ignore = DvcIgnoreFilter(fs, str(root.resolve()))
    for _ in ignore.walk(fs, str(root.resolve())):
        pass
    walked = ignore.walk(fs, base)
    return sorted(os.path.relpath(os.path.join(top, n), base) for top, _, names in walked for n in names)


LAYOUTS = {
    "plain": {"out/p/a": "", "out/p/sub/b": ""},
    "git and hg": {"out/p/a": "", "out/p/.git": "", "out/p/.hg/store": "", "out/p/s/.git/HEAD": "", "out/p/s/f": ""},
    "root rules": {".dvcignore": "*.tmp\nout/p/a\n", "out/p/a": "", "out/p/j.tmp": "", "out/p/b": ""},
    "negated": {".dvcignore": "*.tmp\n!keep.tmp\n", "out/p/keep.tmp": "", "out/p/j.tmp": ""},
    "a rule above the folder": {"out/.dvcignore": "p/sub/b\n", "out/p/sub/b": "", "out/p/sub/c": ""},
    "rules at two levels": {".dvcignore": "*.log\n", "out/.dvcignore": "!p/keep.log\n*.x\n", "out/p/keep.log": "",
                            "out/p/a.log": "", "out/p/b.x": "", "out/p/c": ""},
    "nested project": {"out/p/nested/.dvc/config": "", "out/p/nested/f": "", "out/p/g": ""},
    ".dvc folder": {"out/p/.dvc/f": "", "out/p/g": ""},  # the folder itself a nested project: nothing
    "nested in an intermediate folder": {"out/.dvc/config": "", "out/p/g": ""},
    "an ignored .dvcignore": {".dvcignore": "out/p/.dvcignore\n", "out/p/.dvcignore": "g\n", "out/p/g": ""},
}  # fmt: skip


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_files_of_a_folder_are_dvcs(tmp_path: Path, layout: str) -> None:
    root = tree(tmp_path / "r", LAYOUTS[layout])
    assert IgnoreFilter(root, subrepos=True).files(root / "out" / "p") == dvcs_files(root, "out/p")


def test_files_examples(tmp_path: Path) -> None:
    root = tree(tmp_path / "r", {**LAYOUTS["git and hg"], ".dvcignore": "*.tmp\n", "out/p/s/j.tmp": ""})
    assert IgnoreFilter(root, subrepos=True).files(root / "out/p") == ["a", "s/f"]
    assert IgnoreFilter(root, subrepos=True).files(Path(os.path.relpath(root / "out/p"))) == [
        "a",
        "s/f",
    ]  # a relative folder
    root = tree(tmp_path / "n", LAYOUTS["nested project"])
    assert IgnoreFilter(root, subrepos=True).files(root / "out/p") == ["g"]


def test_a_dvcignore_inside_a_folder_is_refused_as_dvc_refuses_it(tmp_path: Path) -> None:
    root = tree(tmp_path / "r", {"out/p/a": "", "out/p/sub/.dvcignore": "a\n"})
    with pytest.raises(IgnoreError) as e:
        IgnoreFilter(root, subrepos=True).files(root / "out/p")
    assert (
        str(e.value) == f".dvcignore file should not be in collected dir path: '{root.resolve()}/out/p/sub'"
    )


def test_an_out_a_rule_hides(tmp_path: Path) -> None:
    root = tree(
        tmp_path / "r", {".dvcignore": "out/s.txt\nd/\n", "out/s.txt": "", "out/t.txt": "", "d/x": ""}
    )
    f = IgnoreFilter(root)
    assert f.ignored(root / "out/s.txt") and f.ignored(root / "d") and not f.ignored(root / "out/t.txt")
    assert not f.ignored(tmp_path / "elsewhere.txt") and not f.ignored(root / ".dvcignore")
    assert not f.ignored(root / "out/missing.txt")
    tree(root, {"sub/.dvcignore": "y\n", "sub/y": ""})
    assert IgnoreFilter(root).ignored(root / "sub/y")


def test_the_trie_keeps_each_folder_and_the_root_defaults(tmp_path: Path) -> None:
    root = tree(tmp_path / "r", {".dvcignore": "*.tmp\n", "a/b/c": "", "a/.dvcignore": "x\n"})
    f = IgnoreFilter(root)
    assert f.root == str(root.resolve()) and f._key(f.root) == () and f._key(f.root + "/a/b") == ("a", "b")
    assert f.trie[()].rules == [*DEFAULTS, "*.tmp"]
    rules = f.patterns(f.root + "/a/b")
    assert rules.rules == [*DEFAULTS, "*.tmp", "a/**/x"] and rules.dirname == f.root
    assert set(f.trie) == {(), ("a",), ("a", "b")} and f.patterns(f.root + "/a/b") is rules
    assert f._nearest(("a", "b", "c")) == (("a", "b"), rules)


def test_an_out_outside_the_project_is_never_ignored_and_reads_no_rule_there(tmp_path: Path) -> None:
    root = tree(tmp_path / "r", {".dvcignore": "*.txt\n", "a.txt": ""})
    tree(tmp_path, {".dvcignore": "*\n", "x.txt": ""})
    f = IgnoreFilter(root)
    before = dict(f.trie)
    assert not f.ignored(tmp_path / "x.txt") and not f.ignored(tmp_path / "r2" / "x.txt")
    assert f.trie == before  # no folder outside the project was read
    assert f.ignored(root / "a.txt") and f.ignored(root / "sub" / "b.txt")


def test_a_rule_of_double_stars_alone() -> None:
    assert change_rule("**/", "s") == "s/**/" and change_rule("**", "s") == "s/**/**"


def test_matching_walks_each_folder_from_the_first_and_files_are_no_folders() -> None:
    from dvc.ignore import DvcIgnorePatterns

    for rules, where, want in (
        (["*", "!keep"], ("/r", "keep"), False),  # "*" matches the empty path's "/": never asked
        (["*", "!d/"], ("/r/d", "x"), True),  # a folder rule re-includes no file
        (["d/"], ("/r", "d"), False),  # a file named d is no folder (the default)
        (["d/"], ("/r/s", "d"), False),
        (["/s/d/"], ("/r/s/d", "x"), True),
    ):
        assert Patterns(rules, "/r").matches(*where) is want, (rules, where)
        assert DvcIgnorePatterns(rules, "/r", "/").matches(*where) is want


def test_comments_and_blank_lines_of_a_nested_dvcignore_are_no_rules(tmp_path: Path) -> None:
    layout = {".dvcignore": "# top\n\n*.log\n", "out/.dvcignore": "\n# a comment\n   \np/b\n", "out/p/a": "",
              "out/p/b": "", "out/p/c.log": "", "out/p/d/e": ""}  # fmt: skip
    root = tree(tmp_path / "r", layout)
    assert (
        IgnoreFilter(root, subrepos=True).files(root / "out" / "p")
        == dvcs_files(root, "out/p")
        == ["a", "d/e"]
    )


def test_a_nested_project_is_skipped_but_never_an_ignored_out(tmp_path: Path) -> None:
    """An out holding a `.dvc` is hashed empty (dvc status: modified), not refused as ignored."""
    root = tree(tmp_path / "r", {"out/p/.dvc/f": "", "out/p/g": "", "out/q/h": ""})
    assert IgnoreFilter(root, subrepos=True).files(root / "out/p") == [] and IgnoreFilter(
        root, subrepos=True
    ).files(root / "out/q") == ["h"]
    assert IgnoreFilter(root, subrepos=True).ignored(root / "out/p")  # with nested projects: skipped
    plain = IgnoreFilter(root)
    assert not plain.ignored(root / "out/p") and not plain.subrepos
    assert plain.files(root / "out/p") == ["g"]  # .dvc/ is a default rule: its files are skipped either way
    assert set(plain.trie) == {(), ("out",), ("out", "p")}


def test_only_a_folder_holding_dvc_is_a_nested_project(tmp_path: Path) -> None:
    root = tree(tmp_path / "r", {"out/p/n/.dvc": "a file named .dvc", "out/p/n/f": "", "out/p/m/.dvc/config": "",
                                 "out/p/m/g": "", "out/p/plain/h": "", "out/p/top": ""})  # fmt: skip
    assert IgnoreFilter(root, subrepos=True).files(root / "out/p") == dvcs_files(root, "out/p")
    assert IgnoreFilter(root, subrepos=True).files(root / "out/p") == [
        "plain/h",
        "top",
    ]  # .dvc file or folder
