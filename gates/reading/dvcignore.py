"""The files of a folder as DVC lists them: `.dvcignore` rules, `.git`, `.hg`, nested DVC projects.

A folder out or dep is hashed by DVC over the files its ignore filter keeps (dvc/ignore.py): the
defaults `.hg/`, `.git/`, `.git`, `.dvc/` (relative to the project root), every `.dvcignore` from the
root down to the folder (each merged into its parent's rules, dvc/pathspec_math.py), and each
subdirectory holding a `.dvc` (a nested project: skipped whole). A `.dvcignore` inside the folder itself
makes DVC refuse it ("file should not be in collected dir path"); an out that a rule ignores is refused
too. The gates list folders the same way, or a file DVC skips (runs/pilot/.git) would make a stage look
stale that `dvc repro` calls up to date: a loop with no exit.

The rules are compiled by pathspec's gitignore patterns as DVC compiles them; DVC's own module imports
most of DVC (~0.1 s, docs/verdicts.md "Cost"), so its matching is mirrored here, rule by rule, and
held equal to `dvc status` by tests/process/test_seals_dvc_status.py.
"""

from __future__ import annotations

import os
import posixpath
import re
from itertools import groupby
from pathlib import Path

IGNORE_FILE = ".dvcignore"
DEFAULTS = (".hg/", ".git/", ".git", ".dvc/")  # dvc/ignore.py DvcIgnoreFilter


class IgnoreError(Exception):
    """A folder DVC refuses to hash: a .dvcignore inside it, or an out a rule ignores."""


def change_rule(rule: str, rel: str) -> str:
    """A rule of the folder `rel` below a new base, as dvc/pathspec_math.py rewrites it."""
    from pathspec.util import normalize_file

    rule = rule.strip()
    if rule.startswith("#"):
        return rule
    negate, rule = (True, rule[1:]) if rule.startswith("!") else (False, rule)
    # DVC also asks `not rule.startswith("**/")` here: such a rule is rebased the same either way
    if "/" in rule[:-1]:
        every_level, rule = False, rule.removeprefix("/")
    else:  # only "**/" itself has a prefix to remove here (it is its own suffix too)
        every_level, rule = True, rule.removeprefix("**/")  # pragma: no mutate -- equivalent: see above
    rule = rule[1:] if rule.startswith("\\") else rule
    rule = f"/**/{rule}" if every_level else f"/{rule}"
    return normalize_file(f"!/{rel}{rule}" if negate else f"/{rel}{rule}")


def merge(rules_a: list[str], dir_a: str, rules_b: list[str], dir_b: str) -> tuple[list[str], str]:
    """Two folders' rules on their longest common folder (dvc/pathspec_math.py merge_patterns)."""
    if not rules_a:
        return rules_b, dir_b
    if not rules_b:
        return rules_a, dir_a
    common = posixpath.commonpath([dir_a, dir_b])

    def rebased(rules: list[str], folder: str) -> list[str]:
        return rules if folder == common else [change_rule(r, os.path.relpath(folder, common)) for r in rules]

    a, b = rebased(rules_a, dir_a), rebased(rules_b, dir_b)
    return (a + b if len(dir_a) <= len(dir_b) else b + a), common


class Patterns:
    """One folder's rules as DVC's DvcIgnorePatterns compiles and matches them."""

    def __init__(self, rules: list[str], dirname: str) -> None:
        from pathspec.patterns.gitignore.spec import _DIR_MARK, GitIgnoreSpecPattern

        self.rules: list[str] = []
        self.dirname = dirname
        compiled = []
        for count, rule in enumerate(rules):
            regex, ignore = GitIgnoreSpecPattern.pattern_to_regex(rule)
            if regex is not None:  # a comment or a blank rule compiles to (None, None): DVC drops it
                self.rules.append(rule)
                dir_only = rule.endswith("/")  # never matched against a file (`!d/` re-includes no file)
                compiled.append((regex.replace(f"<{_DIR_MARK}>", f"<{_DIR_MARK}{count}>"), ignore, dir_only))
        self.spec: list[tuple[re.Pattern[str], bool, bool]] = []
        for (ignore, dir_only), group in groupby(compiled, key=lambda c: (c[1], c[2])):
            regexes = [regex for regex, _, _ in group]
            if ignore:  # DVC joins the ignoring rules into one regex, each a named group
                joined = "|".join(f"(?P<rule_{i}>{r})" for i, r in enumerate(regexes))
                self.spec.append((re.compile(joined), True, dir_only))
            else:
                self.spec += [(re.compile(r), False, dir_only) for r in regexes]

    def _find(self, path: str, is_dir: bool) -> bool:
        paths = (
            [path, f"{path}/"] if is_dir else [path]
        )  # DVC also asks that `path` not end in "/": it never does
        for pattern, ignore, dir_only in reversed(self.spec):
            if dir_only and not is_dir:
                continue
            if any(pattern.match(p) for p in paths):
                return ignore
        return False

    def matches(self, dirname: str, basename: str, is_dir: bool = False) -> bool:
        """`dirname/basename` (absolute) is ignored by these rules."""
        prefix = self.dirname + "/"  # DVC strips a trailing "/" first: a normalised absolute path has none
        if dirname == self.dirname:
            path = basename
        elif dirname.startswith(prefix):
            path = f"{dirname[len(prefix) :]}/{basename}"
        else:
            return False
        parts = path.split("/")
        for depth, _ in enumerate(parts, 1):  # each folder on the way, then the path itself
            if self._find("/".join(parts[:depth]), is_dir or depth < len(parts)):
                return True
        return False


class IgnoreFilter:
    """DVC's ignore filter of a project: the rules of each folder, from the root down, each folder's as
    DVC has them once it has walked the project (`dvc status` collects its stages by walking it, top
    down): with `subrepos`, a subfolder holding a `.dvc` is a nested project, skipped whole; without,
    the rules alone, as DVC asks whether an out is ignored (dvc/output.py, ignore_subrepos=False)."""

    def __init__(self, root: Path, subrepos: bool = False) -> None:
        self.root = str(root.resolve())
        self.subrepos = subrepos
        self.trie: dict[tuple[str, ...], Patterns] = {(): Patterns(list(DEFAULTS), self.root)}
        self._update(self.root)

    def _key(self, dirname: str) -> tuple[str, ...]:
        rel = os.path.relpath(dirname, self.root)
        return () if rel == "." else tuple(rel.split("/"))

    def _nearest(self, key: tuple[str, ...]) -> tuple[tuple[str, ...], Patterns]:
        ancestors = [k for k in self.trie if key[: len(k)] == k]
        # each ancestor is a prefix of the next: the longest is also the greatest
        found = max(ancestors, key=len)  # pragma: no mutate -- equivalent: see the line above
        return found, self.trie[found]

    def _add(self, dirname: str, rules: list[str], base: str) -> None:
        key = self._key(dirname)
        _, old = self._nearest(key)
        merged, prefix = merge(old.rules, old.dirname, rules, base)
        self.trie[key] = Patterns(merged, prefix)

    def _update(self, dirname: str) -> None:
        key = self._key(dirname)
        _, old = self._nearest(key)
        path = f"{dirname}/{IGNORE_FILE}"
        if not old.matches(dirname, IGNORE_FILE) and os.path.exists(path):
            with open(path, encoding="utf-8") as f:  # pragma: no mutate -- equivalent: the locale's is UTF-8
                lines = [
                    line for line in map(str.strip, f.readlines()) if line
                ]  # comments compile to nothing
            self._add(dirname, lines, dirname)
        else:
            self.trie[key] = old
        if not self.subrepos:
            return
        for entry in os.scandir(dirname):  # a nested DVC project is skipped whole
            if entry.is_dir() and os.path.exists(f"{entry.path}/.dvc"):
                self._add(dirname, [f"/{entry.name}/"], dirname)

    def patterns(self, dirname: str) -> Patterns:
        """The rules that apply in `dirname` (absolute), each folder down to it updated with its own
        subfolders."""
        key = self._key(dirname)
        if key in self.trie:
            return self.trie[key]
        prefix, _ = self._nearest(key)
        folder = Path(self.root, *prefix)
        for part in key[len(prefix) :]:
            folder /= part
            self._update(str(folder))
        return self.trie[key]

    def files(self, folder: Path) -> list[str]:
        """Every file of `folder` DVC would hash, as sorted paths relative to it; IgnoreError where DVC
        refuses the folder."""
        base = os.path.abspath(folder)
        found = []
        for top, dirs, names in os.walk(base):
            rules = self.patterns(top)
            # pragma: no mutate start -- equivalent: a folder DVC ignores is not walked, but its files would be
            # ignored all the same (matches() judges each of a path's folders): this only saves the walk
            dirs[:] = [d for d in dirs if not rules.matches(top, d, True)]
            # pragma: no mutate end
            kept = [n for n in names if not rules.matches(top, n)]
            if IGNORE_FILE in kept:
                raise IgnoreError(f"{IGNORE_FILE} file should not be in collected dir path: '{top}'")
            rel = os.path.relpath(top, base)
            found += [n if rel == "." else f"{rel}/{n}" for n in kept]
        return sorted(found)

    def ignored(self, path: Path) -> bool:
        """An out DVC refuses: a rule of its folder ignores it (asked of a filter without subrepos)."""
        full = str(path.resolve())
        dirname, basename = os.path.split(full)
        if dirname != self.root and not dirname.startswith(self.root + "/"):
            return False
        return self.patterns(dirname).matches(dirname, basename, path.is_dir())
