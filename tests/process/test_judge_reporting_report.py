"""gates/reporting/report.py under mutation (docs/judge-mutation.md): the verdict for people and JSON.

The exit code of every mix of statuses, the git revision (a real repository, none, git missing or
hung), the report's exact JSON fields, and the terminal table: its rows, legend, folded line,
messages and verdict line as the user reads them, in colour and in plain text.
"""

from __future__ import annotations

import io
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from contracts.validate import ValidationError
from gates.judges.outcome import Outcome
from gates.reporting import report

LONG = "cpu: step 0 rel <= 1e-05, max rel <= 0.001"


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        ((), 2),  # nothing judged
        (("skip", "skip"), 2),
        (("pass", "skip"), 0),
        (("pass", "fail"), 1),
        (("inconclusive",), 3),
        (("inconclusive", "skip", "pass"), 3),
        (("inconclusive", "fail"), 1),
        (("fail", "error"), 2),
        (("error", "pass"), 2),
    ],
)
def test_exit_code(statuses: tuple[str, ...], code: int) -> None:
    outcomes = {str(i): Outcome(s) for i, s in enumerate(statuses)}
    assert report.exit_code(outcomes) == code == report.exit_code(outcomes, strict=False)
    assert report.exit_code(outcomes, strict=True) == (1 if code == 3 else code)  # --strict: only 3 moves


def git(root: Path, *args: str) -> str:
    cmd = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git repository with one commit, and that commit."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    return repo, git(repo, "rev-parse", "HEAD")


def test_the_git_revision_of_a_repository_and_of_none(tmp_path: Path, committed: tuple[Path, str]) -> None:
    repo, head = committed
    assert len(head) == 40 and report._git_revision(repo) == head
    git(tmp_path, "init", "-q")
    assert report._git_revision(tmp_path) is None  # no commit yet: git prints "HEAD" and fails
    assert report._git_revision(tmp_path / "missing") is None


@pytest.mark.parametrize("error", [OSError("no git"), subprocess.TimeoutExpired("git", 5)])
def test_no_git_or_a_hung_git_is_no_revision(error: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(*args: Any, **kwargs: Any) -> None:
        raise error

    monkeypatch.setattr(subprocess, "run", run)
    assert report._git_revision(Path("/r")) is None


@pytest.mark.parametrize(
    ("code", "stdout", "revision"),
    [(0, " abc \n", "abc"), (0, " \n", None), (128, "HEAD\n", None), (1, "abc", None)],
)
def test_the_git_command(
    code: int, stdout: str, revision: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def run(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess:
        calls.append((args, kwargs))
        return subprocess.CompletedProcess(args, code, stdout, "")

    monkeypatch.setattr(subprocess, "run", run)
    assert report._git_revision(Path("/r")) == revision
    assert calls == [
        ((["git", "-C", "/r", "rev-parse", "HEAD"],), {"capture_output": True, "text": True, "timeout": 5})
    ]


def test_build_the_json_report(tmp_path: Path) -> None:
    outcomes = {
        "b": Outcome("fail", 0.5, 0.1, "over", {"runs/x": {"md5": "0" * 32}}),
        "a": Outcome("skip", None, None, "not run", not_in_pipeline=["pilot"]),
        "c": Outcome("pass", 1, 2, "ok"),
        "d": Outcome("pass", None, None, ""),
    }
    got = report.build(outcomes, tmp_path / "nowhere", "params.yaml", "cpu-1")
    assert got == {
        "format": "xtrain-gates-report/2",
        "exit_code": 1,
        "verdict": "fail",
        "strict": False,
        "summary": {"pass": 2, "fail": 1, "inconclusive": 0, "skip": 1, "error": 0},
        "git_revision": None,
        "environment": {
            "platform": f"{sys.platform}-{platform.machine()}",
            "python": platform.python_version(),
            "training_env_id": "cpu-1",
        },
        "thresholds_source": "params.yaml",
        "gates": [
            {"id": "b", "status": "fail", "measured": 0.5, "threshold": 0.1, "message": "over"}
            | {"artifacts": {"runs/x": {"md5": "0" * 32}}},
            {"id": "a", "status": "skip", "measured": None, "threshold": None, "message": "not run"}
            | {"artifacts": {}, "not_in_pipeline": ["pilot"]},
            {"id": "c", "status": "pass", "measured": 1, "threshold": 2, "message": "ok", "artifacts": {}},
            {
                "id": "d",
                "status": "pass",
                "measured": None,
                "threshold": None,
                "message": "",
                "artifacts": {},
            },
        ],
    }
    assert report.build({}, tmp_path, "t.yaml", None)["environment"]["training_env_id"] is None


def test_build_records_the_revision_of_the_root(committed: tuple[Path, str]) -> None:
    repo, head = committed
    assert report.build({}, repo, "params.yaml", None)["git_revision"] == head


def test_build_refuses_a_report_its_schema_refuses(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as e:
        report.build({"g": Outcome("pass", [1])}, tmp_path, "params.yaml", None)  # type: ignore[arg-type]
    assert str(e.value) == (
        "gates report: gates[0].measured: [1] is invalid (rule: type number or string or boolean or null)"
    )


def test_write_then_read_back(tmp_path: Path) -> None:
    rep = report.build({"c": Outcome("pass", 1, 2, "ok")}, tmp_path, "params.yaml", None)
    path = tmp_path / "reports" / "gates.json"
    report.write(rep, path)
    assert json.loads(path.read_text()) == rep


ARTS = {f"{p}": {"md5": "0" * 32} for p in ("runs/b/x.json", "runs/a/y.json", "runs/a/z.json", "top.json")}
MIXED = {
    "pilot.a": Outcome("pass", 1.8e-7, LONG, "ok a", ARTS),
    "pilot.b": Outcome("fail", 0.0071234, f"{LONG}; vs base: x", "b over", not_applied={"masks": "n"}),
    "perf": Outcome("inconclusive", "spread 31%", None, "rerun"),
    "scaling": Outcome("skip", None, None, "not run"),
    "finite": Outcome("error", None, 0.5, "bad"),
    "gone": Outcome("skip", None, "t", "absent", not_in_pipeline=["export"]),
    "na": Outcome("pass", 3, 4, "fine", not_applied={"train mode": "not recorded", "x": "y"}),
    "quiet": Outcome("pass", 3, 4, "said only when it does not pass"),
}
TABLE = """\
                                              xtrain-gates
┏━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ gate    ┃ status               ┃ measured   ┃ threshold                    ┃ artifacts                ┃
┡━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ pilot.b │ FAIL (1 not applied) │ 0.00712    │ pilot.* (below) + vs base: x │ -                        │
│ finite  │ ERROR                │ -          │ finite label                 │ -                        │
│ perf    │ INCONCLUSIVE         │ spread 31% │ -                            │ -                        │
│ pilot.a │ PASS                 │ 1.8e-07    │ pilot.* (below)              │ runs/a, runs/b, top.json │
│ na      │ PASS (2 not applied) │ 3          │ 4                            │ -                        │
│ quiet   │ PASS                 │ 3          │ 4                            │ -                        │
│ scaling │ SKIP                 │ -          │ -                            │ -                        │
└─────────┴──────────────────────┴────────────┴──────────────────────────────┴──────────────────────────┘
threshold of pilot.*: cpu: step 0 rel <= 1e-05, max rel <= 0.001
not in this pipeline: 1 gate (stages export: not in dvc.yaml or dvc.lock, nothing to judge)
FAIL pilot.b: b over
ERROR finite: bad
INCONCLUSIVE perf: rerun
PASS na: not applied: train mode: not recorded; x: y
SKIP scaling: not run
missing or invalid artifact (3 pass, 1 fail, 1 inconclusive, 2 skip, 1 error); report: reports/gates.json; exit 2
"""


def printed(outcomes: dict[str, Outcome], labels: dict[str, str], path: Path | None, width: int = 120) -> str:
    out = io.StringIO()
    report.print_table(outcomes, labels, path, Console(file=out, width=width, color_system=None))
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())  # the title is padded


def test_the_table_of_every_status_exactly() -> None:
    assert printed(MIXED, {"finite": "finite label"}, Path("reports/gates.json")) == TABLE


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ("pass", "all gates pass (1 pass); exit 0"),
        ("inconclusive", "no gate failed, 1 inconclusive (1 inconclusive); exit 3"),
        ("fail", "gate failure (1 fail); exit 1"),
    ],
)
def test_the_verdict_line_without_a_report_path(status: str, verdict: str) -> None:
    text = printed({"g": Outcome(status, 1, 2, "m")}, {}, None)
    assert text.splitlines()[-1] == verdict


NARROW = """\
                        xtrain-gates
┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━┳━━━━━━━┓
┃           ┃                      ┃ measu ┃ thres ┃ artif ┃
┃ gate      ┃ status               ┃ red   ┃ hold  ┃ acts  ┃
┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━╇━━━━━━━┩
│ gate.name │ PASS (1 not applied) │ mmmmm │ ttttt │ runs/ │
│           │                      │ mmmmm │ ttttt │ abcde │
│           │                      │ mmmmm │ ttttt │ fghij │
│           │                      │ mmmmm │ ttttt │ klmno │
│           │                      │ mmmmm │ ttttt │ pqrst │
│           │                      │ mmmmm │ ttttt │ uvwxy │
│           │                      │       │       │ z     │
└───────────┴──────────────────────┴───────┴───────┴───────┘
PASS gate.name: not applied: a: b
all gates pass (1 pass); exit 0
"""


def test_a_narrow_table_folds_values_and_keeps_gate_and_status_on_one_line() -> None:
    arts = {"runs/abcdefghijklmnopqrstuvwxyz/x": {"md5": ""}}
    outcomes = {"gate.name": Outcome("pass", "m" * 30, "t" * 30, "", arts, not_applied={"a": "b"})}
    assert printed(outcomes, {}, None, width=60) == NARROW


def test_the_default_console_is_160_wide_in_colour_without_highlighting(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    outcomes = {
        "a": Outcome("pass", 3, 4, "fine"),
        "b": Outcome("skip", None, None, "w" * 170),
        "gone": Outcome("skip", None, "t", "absent", not_in_pipeline=["export"]),
    }
    report.print_table(outcomes, {}, Path("r.json"))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-5:] == [
        "\x1b[33mnot in this pipeline: 1 gate (stages export: not in dvc.yaml or dvc.lock, nothing to judge)\x1b[0m",
        "\x1b[33mSKIP\x1b[0m b: ",
        "w" * 160,
        "w" * 10,
        "\x1b[32mall gates pass\x1b[0m (1 pass, 2 skip); report: r.json; exit 0",
    ]
    assert "│ a    │ \x1b[32mPASS\x1b[0m   │ 3        │ 4         │ -         │" in lines


@pytest.mark.parametrize(
    ("outcome", "line"),
    [
        (Outcome("fail", 1, 2, "over"), "\x1b[1;31mFAIL\x1b[0m g: over"),
        (Outcome("error", 1, 2, "bad"), "\x1b[1;35mERROR\x1b[0m g: bad"),
        (Outcome("inconclusive", 1, 2, "noisy"), "\x1b[1;33mINCONCLUSIVE\x1b[0m g: noisy"),
    ],
)
def test_the_colours_of_the_verdict(
    outcome: Outcome, line: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    report.print_table({"g": outcome}, {}, None)
    lines = capsys.readouterr().out.splitlines()
    verdict = {
        "fail": "\x1b[1;31mgate failure\x1b[0m (1 fail); exit 1",
        "error": "\x1b[1;35mmissing or invalid artifact\x1b[0m (1 error); exit 2",
        "inconclusive": "\x1b[1;33mno gate failed, 1 inconclusive\x1b[0m (1 inconclusive); exit 3",
    }[outcome.status]
    assert lines[-2:] == [line, verdict]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_console_takes_the_terminals_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    out = Tty()
    monkeypatch.setattr(sys, "stdout", out)
    report.print_table({"b": Outcome("skip", None, None, "w" * 170)}, {}, None)
    lines = out.getvalue().splitlines()
    assert lines[-3:-1] == ["w" * 100, "w" * 70]
    assert report.stdout_console().width == 100


def test_the_verdict_line_is_not_strict_unless_asked() -> None:
    noisy = {"a": Outcome("inconclusive"), "b": Outcome("pass")}
    assert report.verdict_line(noisy, None) == (
        "[bold yellow]no gate failed, 1 inconclusive[/] (1 pass, 1 inconclusive); exit 3"
    )
    assert report.verdict_line(noisy, Path("r.json"), True) == (
        "[bold yellow]no gate failed, 1 inconclusive: not a pass under --strict[/] (1 pass, 1 inconclusive); "
        "report: r.json; exit 1"
    )
