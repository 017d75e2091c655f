"""gates/campaigns/bisect.py, its git parts in-process (docs/judge-mutation.md) on a tiny real
repository: the commit range, a commit's worktree and cached verdict, GOOD's registry put under a
commit's artifacts, and the whole bisect's decisions and text with scripted verdicts. DVC and
`gates check` are replaced by recording fakes (what bisect asks them is asserted); no pipeline runs.
The pure parts: tests/process/test_judge_bisect_unit.py; the real end-to-end bisect: tests/pipeline/test_bisect.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import PARAMS
from contracts.outputs import MARKER
from gates.campaigns import bisect
from gates.campaigns.bisect import BisectError, Bisector, Verdict
from judge_trees import make_golden
from registry import index
from registry.store import Registry

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip


def sh(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", message)
    return sh(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """old (a registry before its index), good (a golden of cfg1, indexed), one, two (a registry
    file after GOOD), three."""
    repo = tmp_path_factory.mktemp("bisect-git") / "repo"
    repo.mkdir()
    sh(repo, "init", "-q", "-b", "main")
    c = {"old": commit(repo, "old: a registry before its index", {"registry/notes.txt": "old\n"})}
    index.create(repo / "registry")
    make_golden(Registry(repo / "registry"), "cpu-a", config_hash="cfg1")
    c["good"] = commit(repo, "good: a golden", {"README": "good\n"})
    c["one"] = commit(repo, "one", {"README": "one\n"})
    c["two"] = commit(repo, "two: a later registry file", {"registry/later.txt": "later\n"})
    c["three"] = commit(repo, "three", {"README": "three\n"})
    return repo, c


def short(repo: Path, sha: str) -> str:
    return sh(repo, "rev-parse", "--short", sha)


def test_git_returns_stripped_stdout_and_names_a_failure(history) -> None:
    repo, c = history
    assert bisect.git(repo, "rev-parse", "main") == c["three"]
    assert bisect.subject(repo, c["two"]) == f"{short(repo, c['two'])} two: a later registry file"
    wrong = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "nope"], capture_output=True, text=True
    )
    with pytest.raises(BisectError) as e:
        bisect.git(repo, "rev-parse", "--verify", "nope")
    assert str(e.value) == f"git rev-parse --verify nope: {wrong.stderr.strip()}"
    assert str(e.value).startswith("git rev-parse --verify nope: fatal: ")


def test_the_commit_range_is_after_good_up_to_bad_oldest_first(history) -> None:
    repo, c = history
    assert bisect.commit_range(repo, "main~3", "main") == (c["good"], [c["one"], c["two"], c["three"]])
    assert bisect.commit_range(repo, c["two"], c["three"]) == (c["two"], [c["three"]])
    tree = sh(repo, "rev-parse", "main^{tree}")
    with pytest.raises(BisectError, match=r"^git rev-parse --verify "):
        bisect.commit_range(repo, tree, "main")  # a tree is not a commit
    with pytest.raises(BisectError, match=r"^git rev-parse --verify "):
        bisect.commit_range(repo, "main", "nope")


@pytest.mark.parametrize(
    ("good", "bad", "refused"),
    [
        ("main", "main~2", "GOOD main is not an ancestor of BAD main~2"),
        ("main", "main", "no commits between GOOD main and BAD main"),
    ],
)
def test_a_range_without_commits_after_good_is_refused(history, good: str, bad: str, refused: str) -> None:
    repo, _ = history
    with pytest.raises(BisectError) as e:
        bisect.commit_range(repo, good, bad)
    assert str(e.value) == refused


def test_the_range_follows_the_ancestry_path_only(tmp_path: Path) -> None:
    """A side branch forked before GOOD and merged after it holds no commit between GOOD and BAD."""
    repo = tmp_path / "repo"
    repo.mkdir()
    sh(repo, "init", "-q", "-b", "main")
    commit(repo, "base", {"a": "0"})
    sh(repo, "checkout", "-q", "-b", "side")
    commit(repo, "side", {"b": "1"})
    sh(repo, "checkout", "-q", "main")
    good = commit(repo, "good", {"a": "1"})
    after = commit(repo, "after", {"a": "2"})
    sh(repo, "merge", "-q", "--no-edit", "side")
    merge = sh(repo, "rev-parse", "HEAD")
    assert bisect.commit_range(repo, good, "main") == (good, [after, merge])


def bisector(history, tmp_path: Path, gate: str | None = "fresh_train", good: str = "good") -> Bisector:
    repo, c = history
    (tmp_path / "judge").mkdir(exist_ok=True)
    return Bisector(repo, tmp_path / "judge", PARAMS, gate, c[good], tmp_path / "made" / "cache")


def test_a_cached_verdict_is_read_back_without_building(history, tmp_path: Path, monkeypatch) -> None:
    b = bisector(history, tmp_path)
    commit_sha = history[1]["two"]
    b.cache.mkdir(parents=True)
    saved = {"status": "fail", "message": "m", "config": "cfg9", "golden": True}
    (b.cache / f"{b.key(commit_sha)}.json").write_text(json.dumps(saved))
    monkeypatch.setattr(Bisector, "build_and_judge", lambda self, tree: pytest.fail("built"))
    assert b.verdict(commit_sha) == Verdict("fail", "m", "cfg9", True)


class Builder:
    """build_and_judge replaced: checks it got the commit's worktree, returns `verdict` or raises."""

    def __init__(self, verdict: Verdict | None) -> None:
        self.verdict, self.trees = verdict, []

    def __call__(self, tree: Path) -> Verdict:
        self.trees.append((tree, sh(tree, "rev-parse", "HEAD"), (tree / "README").read_text()))
        if self.verdict is None:
            raise RuntimeError("stages broke")
        return self.verdict


def worktrees(repo: Path) -> list[str]:
    return [line for line in sh(repo, "worktree", "list", "--porcelain").splitlines() if "made" in line]


def test_a_verdict_is_built_in_a_fresh_worktree_then_cached(history, tmp_path: Path, monkeypatch) -> None:
    repo, c = history
    b = bisector(history, tmp_path)
    tree = b.cache / "worktrees" / c["one"][:12]
    (tree / "stale").mkdir(parents=True)  # a worktree folder left by a killed bisect
    builder = Builder(Verdict("fail", "m", "cfg2", True))
    monkeypatch.setattr(Bisector, "build_and_judge", lambda self, tree: builder(tree))
    assert b.verdict(c["one"]) == Verdict("fail", "m", "cfg2", True)
    assert builder.trees == [(tree, c["one"], "one\n")]
    assert not tree.exists() and worktrees(repo) == []
    cached = json.loads((b.cache / f"{b.key(c['one'])}.json").read_text())
    assert cached == {"status": "fail", "message": "m", "config": "cfg2", "golden": True}
    assert b.verdict(c["one"]) == Verdict("fail", "m", "cfg2", True) and len(builder.trees) == 1


def test_worktrees_a_killed_bisect_left_registered_are_pruned(history, tmp_path: Path, monkeypatch) -> None:
    repo, c = history
    b = bisector(history, tmp_path)
    stale = b.cache / "worktrees" / "stale"
    sh(repo, "worktree", "add", "--detach", str(stale), c["one"])
    subprocess.run(["rm", "-rf", str(stale)], check=True)  # gone from disk, still registered
    monkeypatch.setattr(Bisector, "build_and_judge", lambda self, tree: Verdict("pass", "ok"))
    assert b.verdict(c["good"]) == Verdict("pass", "ok")
    assert worktrees(repo) == []


def test_a_worktree_git_cannot_remove_is_deleted_quietly(history, tmp_path: Path, monkeypatch, capfd) -> None:
    """A tree git refuses to remove (here: locked) is deleted anyway, and git's complaint is not
    printed among bisect's lines."""
    repo, c = history
    b = bisector(history, tmp_path)
    tree = b.cache / "worktrees" / c["one"][:12]
    monkeypatch.setattr(
        Bisector,
        "build_and_judge",
        lambda self, t: sh(repo, "worktree", "lock", str(t)) or Verdict("pass", ""),
    )
    try:
        assert b.verdict(c["one"]) == Verdict("pass", "")
        assert not tree.exists()
        assert capfd.readouterr() == ("", "")
    finally:
        sh(repo, "worktree", "unlock", str(tree))
        sh(repo, "worktree", "prune")


def test_a_verdict_is_written_whole_or_not_at_all(history, tmp_path: Path, monkeypatch) -> None:
    _, c = history
    b = bisector(history, tmp_path)
    monkeypatch.setattr(Bisector, "build_and_judge", lambda self, tree: Verdict("pass", "ok"))

    def killed(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        b.verdict(c["two"])
    assert sorted(p.name for p in b.cache.iterdir()) == ["worktrees"]


def test_a_worktree_is_removed_when_building_raises(history, tmp_path: Path, monkeypatch) -> None:
    repo, c = history
    b = bisector(history, tmp_path)
    monkeypatch.setattr(Bisector, "build_and_judge", lambda self, tree: Builder(None)(tree))
    with pytest.raises(RuntimeError, match="stages broke"):
        b.verdict(c["three"])
    assert not (b.cache / "worktrees" / c["three"][:12]).exists() and worktrees(repo) == []
    assert list(b.cache.glob("*.json")) == []


class Dvc:
    """run_logged replaced for `dvc`: records (command, folder); `dvc repro` exits `code`."""

    def __init__(self, code: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.code, self.stdout, self.stderr, self.calls = code, stdout, stderr, []

    def __call__(self, cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        self.calls.append((cmd, cwd))
        code = self.code if cmd[:2] == ["dvc", "repro"] else 0
        return subprocess.CompletedProcess(cmd, code, self.stdout, self.stderr)


def commit_worktree(history, tmp_path: Path, config: str) -> Path:
    repo, c = history
    tree = tmp_path / "tree"
    sh(repo, "worktree", "add", "--detach", str(tree), c["two"])
    (tree / "runs" / "single").mkdir(parents=True)
    (tree / "runs" / "single" / "metrics.json").write_text(json.dumps({"config_hash": config}))
    (tree / c["old"]).write_text("")  # a file named like GOOD: `checkout GOOD -- registry` still works
    (tree / c["good"]).write_text("")
    return tree


def registry_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def build(history, tmp_path: Path, monkeypatch, dvc: Dvc, good: str = "good", config: str = "cfg1"):
    tree = commit_worktree(history, tmp_path, config)
    monkeypatch.setattr(bisect, "run_logged", dvc)
    monkeypatch.setattr(
        Bisector, "judge_tree", lambda self, t: Verdict("fail", f"judged {t.name}", "x", True)
    )
    return tree, bisector(history, tmp_path, good=good).build_and_judge(tree)


@pytest.mark.parametrize(("config", "golden"), [("cfg1", True), ("cfg2", False)])
def test_build_runs_the_gates_stages_then_judges_with_goods_registry(
    history, tmp_path: Path, monkeypatch, config: str, golden: bool
) -> None:
    repo, c = history
    dvc = Dvc()
    tree, v = build(history, tmp_path, monkeypatch, dvc, config=config)
    assert v == Verdict("fail", "judged tree", config, golden)
    cache = str(repo.resolve() / ".dvc" / "cache")
    assert dvc.calls == [
        (["dvc", "config", "--local", "cache.dir", cache], tree),
        (["dvc", "repro", "train_single", "export"], tree),
    ]
    good = tmp_path / "good"
    sh(repo, "worktree", "add", "--detach", str(good), c["good"])
    assert registry_files(tree / "registry") == registry_files(good / "registry")  # later.txt gone


def test_build_indexes_a_good_registry_from_before_the_index(history, tmp_path: Path, monkeypatch) -> None:
    tree, v = build(history, tmp_path, monkeypatch, Dvc(), good="old")
    assert v == Verdict("fail", "judged tree", "cfg1", False)
    assert sorted(registry_files(tree / "registry")) == [index.INDEX, "notes.txt"]
    assert index.check(tree / "registry") == index.read(tree / "registry")
    assert list(index.read(tree / "registry")) == ["notes.txt"]


@pytest.mark.parametrize(
    ("stdout", "stderr", "said"),
    [("", "a\nb\nc\nd\n", "b | c | d"), ("x\ny\n", "", "x | y"), ("out", "err", "err")],
)
def test_a_failed_build_is_untestable_and_judges_nothing(
    history, tmp_path: Path, monkeypatch, stdout: str, stderr: str, said: str
) -> None:
    tree, v = build(history, tmp_path, monkeypatch, Dvc(1, stdout, stderr))
    assert v == Verdict("untestable", f"dvc repro failed: {said}")
    assert (tree / "registry" / "later.txt").exists()  # the commit's registry left as it was


class Scripted:
    """Bisector.verdict replaced: the verdict per commit name; records the Bisector it was asked on."""

    def __init__(self, history, verdicts: dict[str, Verdict]) -> None:
        self.by_sha = {history[1][name]: v for name, v in verdicts.items()}
        self.bisectors: set[tuple] = set()

    def __call__(self, b: Bisector, sha: str) -> Verdict:
        self.bisectors.add((b.repo, b.judge, b.params, b.gate, b.good, b.cache))
        return self.by_sha[sha]


def run(history, tmp_path, monkeypatch, verdicts: dict[str, Verdict], gate: str | None, bad: str = "main"):
    repo, _ = history
    scripted = Scripted(history, verdicts)
    monkeypatch.setattr(Bisector, "verdict", lambda self, sha: scripted(self, sha))
    code = bisect.bisect(repo, tmp_path / "judge", PARAMS, "main~3", bad, gate, tmp_path / "new" / "cache")
    return code, scripted


def said(repo: Path, c: dict[str, str], name: str, word: str, note: str, message: str) -> str:
    return f"  {bisect.subject(repo, c[name])}: {word} [{note}]: {message}"


def test_bisect_names_the_first_bad_commit_its_skips_and_config_change(
    history, tmp_path: Path, monkeypatch, capsys
) -> None:
    repo, c = history
    verdicts = {
        "three": Verdict("fail", "fresh_train: step 1 differs", "cfg2"),
        "good": Verdict("pass", "fine", "cfg0"),
        "one": Verdict("pass", "fine too", "cfg1"),  # the last passing commit: cfg1, not GOOD's cfg0
        "two": Verdict("untestable", "dvc repro failed: x"),
    }
    code, scripted = run(history, tmp_path, monkeypatch, verdicts, "fresh_train")
    assert code == 0
    judge, s = tmp_path / "judge", lambda name: bisect.subject(repo, c[name])
    assert capsys.readouterr().out.splitlines() == [
        f"bisect fresh_train over 3 commits after {s('good')}; judged by the gates and thresholds of "
        f"{judge}, against GOOD's registry",
        said(repo, c, "three", "fail", "BAD", "fresh_train: step 1 differs"),
        said(repo, c, "good", "pass", "GOOD", "fine"),
        said(repo, c, "one", "pass", "2 left", "fine too"),
        said(repo, c, "two", "skip (untestable)", "1 left", "dvc repro failed: x"),
        f"untestable commits next to the boundary: the first bad commit could also be any of: {s('two')}",
        f"first bad commit: {s('three')} ({c['three']})",
        f"  config changed at {short(repo, c['three'])}, no golden: bless it or revert (config_hash cfg1 -> cfg2)",
        "  fresh_train: step 1 differs",
    ]
    cache = tmp_path / "new" / "cache"
    assert scripted.bisectors == {(repo, judge, PARAMS, "fresh_train", c["good"], cache)}
    assert json.loads((cache / MARKER).read_text()) == {"kind": "bisect cache"}


@pytest.mark.parametrize(("gate", "named"), [(None, True), ("export_md5", False)])
def test_a_config_change_right_after_good_is_named_for_golden_gates(
    history, tmp_path: Path, monkeypatch, capsys, gate: str | None, named: bool
) -> None:
    repo, c = history
    verdicts = {
        "three": Verdict("fail", "m3", "cfg2"),
        "good": Verdict("pass", "g", "cfg1"),
        "one": Verdict("fail", "m1", "cfg2"),
    }
    assert run(history, tmp_path, monkeypatch, verdicts, gate)[0] == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"bisect {gate or 'every gate'} over 3 commits after ")
    assert out[3:] == [
        said(repo, c, "one", "fail", "2 left", "m1"),
        f"first bad commit: {bisect.subject(repo, c['one'])} ({c['one']})",
        *([f"  config changed at {short(repo, c['one'])}, no golden: bless it or revert (config_hash cfg1 -> cfg2)"]
          if named else []),
        "  m1",
    ]  # fmt: skip


def test_every_untestable_commit_next_to_the_boundary_is_named(
    history, tmp_path: Path, monkeypatch, capsys
) -> None:
    repo, c = history
    verdicts = {
        "three": Verdict("fail", "f"),
        "good": Verdict("pass", "g"),
        "one": Verdict("untestable", "u1"),
        "two": Verdict("untestable", "u2"),
    }
    assert run(history, tmp_path, monkeypatch, verdicts, "export_md5")[0] == 0
    names = f"{bisect.subject(repo, c['one'])}, {bisect.subject(repo, c['two'])}"
    assert capsys.readouterr().out.splitlines()[5:7] == [
        f"untestable commits next to the boundary: the first bad commit could also be any of: {names}",
        f"first bad commit: {bisect.subject(repo, c['three'])} ({c['three']})",
    ]


def test_a_bad_that_passes_is_exit_1(history, tmp_path: Path, monkeypatch, capsys) -> None:
    repo, c = history
    code, _ = run(history, tmp_path, monkeypatch, {"three": Verdict("pass", "x" * 400)}, None)
    assert code == 1
    assert capsys.readouterr().out.splitlines()[1:] == [
        said(repo, c, "three", "pass", "BAD", "x" * 300),
        "every gate passes at BAD main: no failing commit",
    ]


@pytest.mark.parametrize(
    ("verdicts", "refused"),
    [
        ({"three": Verdict("untestable", "no build")}, "BAD main cannot be judged: no build"),
        (
            {"three": Verdict("fail", "f"), "good": Verdict("fail", "g")},
            "GOOD main~3 does not pass (fail): g",
        ),
        (
            {"three": Verdict("fail", "f"), "good": Verdict("untestable", "u")},
            "GOOD main~3 does not pass (untestable): u",
        ),
    ],
)
def test_a_bad_or_good_that_cannot_anchor_the_search_is_an_error(
    history, tmp_path: Path, monkeypatch, verdicts: dict, refused: str
) -> None:
    with pytest.raises(BisectError) as e:
        run(history, tmp_path, monkeypatch, verdicts, None)
    assert str(e.value) == refused


def test_an_unknown_gate_is_refused_before_any_work(history, tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(BisectError, match=r"^no stage map for gate nope "):
        run(history, tmp_path, monkeypatch, {}, "nope")
    assert not (tmp_path / "new").exists()


def test_the_default_cache_is_under_the_git_dir(history, tmp_path: Path, monkeypatch) -> None:
    repo, c = history
    scripted = Scripted(history, {"three": Verdict("pass", "")})
    monkeypatch.setattr(Bisector, "verdict", lambda self, sha: scripted(self, sha))
    for _ in range(2):  # the second finds its own cache there
        assert bisect.bisect(repo, tmp_path, PARAMS, "main~1", "main", None, None) == 1
    cache = repo / ".git" / "xtrain-bisect"
    assert scripted.bisectors == {(repo, tmp_path, PARAMS, None, c["two"], cache)}
    assert json.loads((cache / MARKER).read_text()) == {"kind": "bisect cache"}
