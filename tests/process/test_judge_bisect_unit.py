"""gates/campaigns/bisect.py, its pure parts in-process (docs/judge-mutation.md): the verdict cache's
shape, a commit's config identity and golden, the judge's fingerprint and cache key, the gate report
read into a verdict (the `gates check` subprocess replaced by a fake that writes the report), and the
binary search over a scripted history. The git parts: tests/process/test_judge_bisect_git.py.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS
from gates.campaigns import bisect
from gates.campaigns.bisect import BisectError, Bisector, Verdict
from judge_trees import make_golden
from params.config import write_with_section
from params.project import load_judging
from registry.store import Registry, RegistryError

VERDICT_NAME = "0123456789abcdef01234567.json"


@pytest.mark.parametrize(
    ("names", "ours"),
    [
        ([], True),
        (["worktrees", VERDICT_NAME], True),
        ([VERDICT_NAME, "f" * 24 + ".json"], True),
        (["worktrees", VERDICT_NAME, "notes.txt"], False),
        (["0123456789abcdef0123456.json"], False),  # 23 digits
        (["0123456789ABCDEF01234567.json"], False),  # not lower-case hex
        ([VERDICT_NAME + ".tmp"], False),
        (["x" + VERDICT_NAME], False),
        (["worktree"], False),
    ],
)
def test_an_earlier_cache_holds_only_verdicts_and_worktrees(
    tmp_path: Path, names: list[str], ours: bool
) -> None:
    for name in names:
        (tmp_path / name).write_text("{}")
    assert bisect._earlier_cache(tmp_path) is ours
    assert bisect.CACHE.recognise(tmp_path) is ours


def test_an_unknown_gate_is_a_bisect_error_naming_the_known_ones() -> None:
    assert bisect.stages_for(None) == []
    assert bisect.stages_for("fresh_train") == ["train_single", "export"]
    with pytest.raises(BisectError, match=r"^no stage map for gate nope \(known: loss_match.thread, "):
        bisect.stages_for("nope")


@pytest.mark.parametrize(
    ("text", "n", "shown"),
    [
        ("a\nb\nc\nd\n", None, "b | c | d"),
        ("a\nb\nc\nd", 1, "d"),
        ("a\nb", 5, "a | b"),
        ("\n\n  one  \n\t two\t\n\n", None, "one | two"),
        ("", None, ""),
    ],
)
def test_tail_joins_the_last_lines_stripped(text: str, n: int | None, shown: str) -> None:
    assert (bisect.tail(text) if n is None else bisect.tail(text, n)) == shown


@pytest.mark.parametrize(
    ("gate", "reads"),
    [
        (None, True),
        ("fresh_train", True),
        ("fresh", True),  # a prefix of fresh_train
        ("fresh_train.exact", True),
        ("fresh_trainx", True),
        ("resh_train", False),
        ("ddp", False),
        ("export_md5", False),
    ],
)
def test_only_the_golden_reading_gates_name_a_config_change(gate: str | None, reads: bool) -> None:
    assert bisect.reads_goldens(gate) is reads


@pytest.mark.parametrize(
    ("good", "bad", "said"),
    [
        (Verdict("pass", "", "a"), Verdict("fail", "", "b"), "config_hash a -> b"),
        (Verdict("pass", "", "a", golden=True), Verdict("fail", "", "b"), "config_hash a -> b"),
        (Verdict("pass", "", "a"), Verdict("fail", "", "b", golden=True), None),
        (Verdict("pass", "", "a"), Verdict("fail", "", "a"), None),
        (Verdict("pass", "", None), Verdict("fail", "", "b"), None),
        (Verdict("pass", "", "a"), Verdict("fail", "", None), None),
        (Verdict("pass", "", None), Verdict("fail", "", None), None),
    ],
)
def test_a_config_change_is_named_only_without_a_golden(
    good: Verdict, bad: Verdict, said: str | None
) -> None:
    assert bisect.config_change(good, bad) == said


def write_metrics(tree: Path, launcher: str, text: str) -> None:
    (tree / "runs" / launcher).mkdir(parents=True, exist_ok=True)
    (tree / "runs" / launcher / "metrics.json").write_text(text)


@pytest.mark.parametrize(
    ("runs", "config"),
    [
        ({}, None),
        ({"single": '{"config_hash": "s"}', "thread": '{"config_hash": "t"}'}, "s"),
        ({"thread": '{"config_hash": "t"}', "proc": '{"config_hash": "p"}'}, "t"),
        ({"proc": '{"config_hash": "p"}'}, "p"),
        ({"single": '{"config_hash": 7}'}, "7"),
        ({"single": "{not json", "thread": '{"config_hash": "t"}'}, "t"),
        ({"single": '{"loss": 1}', "thread": '{"config_hash": "t"}'}, "t"),
        ({"single": '["config_hash"]', "proc": '{"config_hash": "p"}'}, "p"),
        ({"single": "{}", "thread": "[]", "proc": "nan"}, None),
    ],
)
def test_run_config_reads_the_first_run_that_recorded_one(
    tmp_path: Path, runs: dict, config: str | None
) -> None:
    for launcher, text in runs.items():
        write_metrics(tmp_path, launcher, text)
    assert bisect.run_config(tmp_path) == config


def test_run_config_skips_a_metrics_path_that_is_a_folder(tmp_path: Path) -> None:
    (tmp_path / "runs" / "single" / "metrics.json").mkdir(parents=True)
    write_metrics(tmp_path, "proc", '{"config_hash": "p"}')
    assert bisect.run_config(tmp_path) == "p"


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    reg = Registry(tmp_path / "registry")
    make_golden(reg, "cpu-a", config_hash="cfg1")
    make_golden(reg, "cpu-b", config_hash="cfg2")
    make_golden(reg, "cpu-b", config_hash="cfg3")
    return reg.root


@pytest.mark.parametrize(
    ("config", "held"), [("cfg1", True), ("cfg2", True), ("cfg3", True), ("cfg4", False), (None, False)]
)
def test_has_golden_looks_in_every_environment(registry: Path, config: str | None, held: bool) -> None:
    assert bisect.has_golden(registry, config) is held


def test_has_golden_of_an_empty_or_unreadable_registry_is_false(
    registry: Path, tmp_path: Path, monkeypatch
) -> None:
    assert bisect.has_golden(tmp_path / "none", "cfg1") is False

    def refuse(self: Registry) -> list[str]:
        raise RegistryError("unreadable")

    monkeypatch.setattr(Registry, "env_ids", refuse)
    assert bisect.has_golden(registry, "cfg1") is False


def test_run_logged_runs_in_cwd_with_analytics_off_and_keeps_the_environment(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("BISECT_PROBE", "kept")
    monkeypatch.setenv("DVC_NO_ANALYTICS", "0")
    code = (
        "import os, sys; print(os.getcwd()); print(os.environ['DVC_NO_ANALYTICS']);"
        " print(os.environ['BISECT_PROBE']); print('oops', file=sys.stderr); sys.exit(3)"
    )
    proc = bisect.run_logged([sys.executable, "-c", code], tmp_path)
    assert proc.args == [sys.executable, "-c", code] and proc.returncode == 3
    assert proc.stdout == f"{tmp_path}\n1\nkept\n"
    assert proc.stderr == "oops\n"


def test_the_judges_thresholds_are_its_gates_section(tmp_path: Path) -> None:
    assert bisect.judge_thresholds(PARAMS) == load_judging(PARAMS).thresholds
    assert "fresh_train" in bisect.judge_thresholds(PARAMS)
    bad = tmp_path / "params.yaml"
    bad.write_text("gates: 5\n")
    with pytest.raises(Exception) as refused:
        load_judging(bad)
    with pytest.raises(BisectError) as e:
        bisect.judge_thresholds(bad)
    assert str(e.value) == f"the judge's thresholds: {refused.value}"


def judge_checkout(root: Path) -> Path:
    files = {
        "gates/a.py": "a",
        "gates/sub/b.json": "{}",
        "contracts/c.py": "c",
        "gates/notes.txt": "not code",
        "other/x.py": "not the judge",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def expected_fingerprint(judge: Path, params: Path) -> str:
    h = hashlib.sha256()
    for rel in ("contracts/c.py", "gates/a.py", "gates/sub/b.json"):
        h.update(rel.encode())
        h.update((judge / rel).read_bytes())
    h.update(json.dumps(load_judging(params).thresholds, sort_keys=True).encode())
    return h.hexdigest()[:16]


def test_the_fingerprint_covers_the_gate_code_contracts_and_thresholds(tmp_path: Path) -> None:
    judge = judge_checkout(tmp_path / "judge")
    before = bisect.judge_fingerprint(judge, PARAMS)
    assert before == expected_fingerprint(judge, PARAMS)
    (judge / "gates" / "notes.txt").write_text("edited")
    (judge / "other" / "x.py").write_text("edited")
    assert bisect.judge_fingerprint(judge, PARAMS) == before  # neither is the judge's code
    (judge / "gates" / "sub" / "b.json").write_text('{"x": 1}')
    assert bisect.judge_fingerprint(judge, PARAMS) == expected_fingerprint(judge, PARAMS) != before


def test_the_fingerprint_moves_with_a_threshold(tmp_path: Path) -> None:
    judge = judge_checkout(tmp_path / "judge")
    params = yaml.safe_load(PARAMS.read_text())
    params["gates"]["cross_rank"]["max_abs"] = 2e-06
    edited = tmp_path / "params.yaml"
    edited.write_text(yaml.safe_dump(params))
    assert bisect.judge_fingerprint(judge, edited) == expected_fingerprint(judge, edited)
    assert bisect.judge_fingerprint(judge, edited) != bisect.judge_fingerprint(judge, PARAMS)


def test_judged_params_are_the_commits_own_with_the_judges_gates(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("# the commit's\ntrain:\n  lr: 0.5\ngates:\n  old: 1\n")
    out = bisect.judged_params(tmp_path, {"fresh_train": {"tier": "exact"}})
    assert out == tmp_path / "reports" / "bisect-params.yaml"
    assert out.read_text() == "# the commit's\ntrain:\n  lr: 0.5\ngates:\n  fresh_train:\n    tier: exact\n"
    assert (tmp_path / "params.yaml").read_text().endswith("old: 1\n")  # the commit's file untouched


def bisector(tmp_path: Path, gate: str | None = "fresh_train", good: str = "g" * 40) -> Bisector:
    judge = judge_checkout(tmp_path / "judge")
    return Bisector(tmp_path / "repo", judge, PARAMS, gate, good, tmp_path / "cache")


@pytest.mark.parametrize("gate", ["fresh_train", None])
def test_the_cache_key_names_gate_commit_good_and_judge(tmp_path: Path, gate: str | None) -> None:
    b = bisector(tmp_path, gate)
    fingerprint = bisect.judge_fingerprint(b.judge, PARAMS)
    text = f"v2|{gate}|{'c' * 40}|{'g' * 40}|{fingerprint}"
    assert b.key("c" * 40) == hashlib.sha256(text.encode()).hexdigest()[:24]
    assert bisect.VERDICT_FILE.fullmatch(b.key("c" * 40) + ".json")


class FakeCheck:
    """`gates check` replaced: records the command and its folder, writes the given report (or none)."""

    def __init__(self, gates: list[dict] | None, returncode: int = 0, stderr: str = "") -> None:
        self.gates, self.returncode, self.stderr = gates, returncode, stderr
        self.calls: list[tuple[list[str], Path]] = []

    def __call__(self, cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        self.calls.append((cmd, cwd))
        if self.gates is not None:
            Path(cmd[cmd.index("--report") + 1]).write_text(json.dumps({"gates": self.gates}))
        return subprocess.CompletedProcess(cmd, self.returncode, "", self.stderr)


def commit_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "reports").mkdir(parents=True)
    (tree / "params.yaml").write_bytes(PARAMS.read_bytes())
    return tree


def judged(tmp_path: Path, monkeypatch, fake: FakeCheck, gate: str | None = "fresh_train") -> Verdict:
    monkeypatch.setattr(bisect, "run_logged", fake)
    return bisector(tmp_path, gate).judge_tree(commit_tree(tmp_path))


@pytest.mark.parametrize("gate", ["fresh_train", None])
def test_judge_tree_runs_the_judges_gates_on_the_commits_tree(tmp_path: Path, monkeypatch, gate) -> None:
    fake = FakeCheck([{"id": "a", "status": "pass", "message": "ok"}])
    judged(tmp_path, monkeypatch, fake, gate)
    tree = tmp_path / "tree"
    params = tree / "reports" / "bisect-params.yaml"
    only = ["--only", gate] if gate else []
    report = ["--report", str(tree / "reports" / "bisect-gates.json")]
    cmd = [
        sys.executable,
        "-m",
        "gates",
        "--root",
        str(tree),
        "--params",
        str(params),
        "check",
        *only,
        *report,
    ]
    assert fake.calls == [(cmd, tmp_path / "judge")]
    assert load_judging(params).thresholds == load_judging(PARAMS).thresholds


def gate_row(gid: str, status: str) -> dict:
    return {"id": gid, "status": status, "message": f"{gid} said {status}"}


@pytest.mark.parametrize(
    ("statuses", "verdict", "message"),
    [
        (["pass", "pass"], "pass", "a: a said pass; b: b said pass"),
        ([], "untestable", "nothing judged: the report lists no gate"),  # never a pass (issue 51)
        (["pass", "fail", "inconclusive", "fail"], "fail", "b: b said fail; d: d said fail"),
        (["fail", "error", "skip"], "fail", "a: a said fail"),
        (["pass", "inconclusive"], "untestable", "b inconclusive: b said inconclusive"),
        (["error", "pass"], "untestable", "a error: a said error"),
        (["pass", "skip", "pass"], "untestable", "b skip: b said skip"),
        (["skip", "error"], "untestable", "a skip: a said skip; b error: b said error"),
        (["pass", "unknown"], "pass", "a: a said pass; b: b said unknown"),
    ],
)
def test_judge_tree_reads_the_report_into_one_verdict(
    tmp_path: Path, monkeypatch, statuses: list[str], verdict: str, message: str
) -> None:
    rows = [gate_row(gid, s) for gid, s in zip("abcd", statuses, strict=False)]
    assert judged(tmp_path, monkeypatch, FakeCheck(rows)) == Verdict(verdict, message)


def test_judge_tree_without_a_report_is_untestable_with_the_exit_and_stderr(
    tmp_path: Path, monkeypatch
) -> None:
    fake = FakeCheck(None, returncode=2, stderr="one\ntwo\nthree\nfour\n")
    assert judged(tmp_path, monkeypatch, fake) == Verdict(
        "untestable", "gates check exited 2: two | three | four"
    )


def test_a_commit_whose_params_the_loader_refuses_is_untestable(tmp_path: Path, monkeypatch) -> None:
    fake = FakeCheck([gate_row("a", "pass")])
    monkeypatch.setattr(bisect, "run_logged", fake)
    tree = commit_tree(tmp_path)
    (tree / "params.yaml").write_text("- a list\n")
    with pytest.raises(ValueError) as refused:
        write_with_section(tree / "params.yaml", tmp_path / "out.yaml", "gates", {})
    assert bisector(tmp_path).judge_tree(tree) == Verdict("untestable", str(refused.value))
    assert fake.calls == []


class Scripted:
    """A Bisector whose verdicts are given per commit; records the commits it was asked about."""

    def __init__(self, statuses: str) -> None:
        self.statuses = {f"c{i}": s for i, s in enumerate(statuses)}
        self.asked: list[str] = []

    def verdict(self, commit: str) -> Verdict:
        self.asked.append(commit)
        status = {"p": "pass", "f": "fail", "u": "untestable"}[self.statuses[commit]]
        return Verdict(status, f"{commit} {status}")


@pytest.mark.parametrize(
    ("statuses", "asked", "found"),
    [
        ("f", [], (-1, 0, [])),
        ("pf", ["c0"], (0, 1, [])),
        ("ff", ["c0"], (-1, 0, [])),
        ("ppppf", ["c1", "c2", "c3"], (3, 4, [])),
        ("pppff", ["c1", "c2", "c3"], (2, 3, [])),
        ("fffff", ["c1", "c0"], (-1, 0, [])),
        ("pfffffff", ["c3", "c1", "c0"], (0, 1, [])),
        ("ppupf", ["c1", "c2", "c3"], (3, 4, [])),
        ("ppuuf", ["c1", "c2", "c3"], (1, 4, [2, 3])),
        ("puuuf", ["c1", "c0", "c2", "c3"], (0, 4, [1, 2, 3])),  # a tie (c0, c2): the earlier
        ("uuupf", ["c1", "c0", "c2", "c3"], (3, 4, [])),
        ("puupf", ["c1", "c0", "c2", "c3"], (3, 4, [])),
        ("pupfff", ["c2", "c3"], (2, 3, [])),
        ("pufuff", ["c2", "c0", "c1"], (0, 2, [1])),
        ("pfufff", ["c2", "c1", "c0"], (0, 1, [])),  # c2 skipped, but past the boundary
        ("ppupff", ["c2", "c1", "c3", "c4"], (3, 4, [])),  # c2 skipped, but before the boundary
    ],
)
def test_search_halves_and_skips_the_untestable(statuses: str, asked: list[str], found: tuple) -> None:
    b = Scripted(statuses)
    said: list[tuple[str, Verdict, str]] = []
    result = bisect.search(b, list(b.statuses), lambda c, v, note: said.append((c, v, note)))  # type: ignore[arg-type]
    assert (b.asked, result) == (asked, found)
    assert [c for c, _, _ in said] == asked
    assert [v.message for _, v, _ in said] == [f"{c} {b.verdict(c).status}" for c in asked]


def test_search_says_how_many_commits_are_left_each_step() -> None:
    b = Scripted("ppuuppf")
    notes: list[str] = []
    bisect.search(b, list(b.statuses), lambda c, v, note: notes.append(f"{c} {note}"))  # type: ignore[arg-type]
    assert notes == ["c2 6 left", "c1 5 left", "c3 3 left", "c4 2 left", "c5 1 left"]
