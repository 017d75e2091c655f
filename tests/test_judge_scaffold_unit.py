"""`gates init` (gates/scaffold.py) in-process (issue #37: its functions were reached only through
`python -m gates init` subprocesses, so no mutant of them had a test).

`_run` and `_inside_git` run real commands (git, the Python interpreter: milliseconds); `init` gets a
recording `_run`, since `dvc init` costs ~1.5 s and tests/test_scaffold.py runs the real one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gates import scaffold
from gates.scaffold import ScaffoldError, init, refuse

WROTE = ["wrote train.py", "wrote dvc.yaml", "wrote params.yaml"]
REPLACE = (
    ": exists: refusing to replace it (gates init writes train.py, dvc.yaml, params.yaml into a new or "
    "empty folder); next: an empty folder, or copy gates/byo_template/ by hand"
)


def py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


# ---- _run: a command that fails says which, and its last line of output ------------------------


def test_run_passes_quietly_in_the_folder_with_dvc_analytics_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DVC_NO_ANALYTICS", raising=False)  # the driver of a mutation run sets it
    monkeypatch.setenv("XTRAIN_SCAFFOLD_KEPT", "yes")
    env = "os.environ.get('DVC_NO_ANALYTICS') == '1' and os.environ.get('XTRAIN_SCAFFOLD_KEPT') == 'yes'"
    check = f"import os,sys; sys.exit(0 if {env} and os.getcwd() == {str(tmp_path)!r} else 3)"
    scaffold._run(tmp_path, *py(check))  # no exception: exit 0 (elsewhere it fails: the test below)


@pytest.mark.parametrize(
    ("code", "last"),
    [
        ("import sys; sys.stderr.write('one\\n  two  \\n'); print('out'); sys.exit(1)", "  two"),
        ("import sys; print('first\\nsecond'); sys.exit(4)", "second"),
        ("import sys; sys.exit(5)", "no output"),
        ("import sys; sys.stderr.write('  \\n'); print('said'); sys.exit(1)", "said"),
    ],
)
def test_run_failing_names_the_folder_command_and_last_line(tmp_path: Path, code: str, last: str) -> None:
    argv = py(code)
    with pytest.raises(ScaffoldError) as e:
        scaffold._run(tmp_path, *argv)
    assert str(e.value) == f"{tmp_path}: {' '.join(argv)} failed: {last}"
    assert e.value.exit_code == 2


def test_run_fails_where_the_folder_is_not_the_cwd(tmp_path: Path) -> None:
    check = "import os,sys; sys.exit(0 if os.getcwd() == {!r} else 3)"
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(ScaffoldError, match=r"failed: no output$"):
        scaffold._run(other, *py(check.format(str(tmp_path))))


# ---- _inside_git: only a git work tree ----------------------------------------------------------


def test_inside_git(tmp_path: Path) -> None:
    assert scaffold._inside_git(tmp_path) is False  # /tmp's pytest folders lie in no repository
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "sub").mkdir()
    assert scaffold._inside_git(tmp_path) is True
    assert scaffold._inside_git(tmp_path / "sub") is True
    assert scaffold._inside_git(tmp_path / ".git") is False  # git says "false" there, exit 0


# ---- refuse: a new project goes only into a new or empty folder ---------------------------------


@pytest.mark.parametrize("hidden", [[], [".git"], [".venv", ".dvc"]])
def test_refuse_accepts_a_missing_or_empty_folder(tmp_path: Path, hidden: list[str]) -> None:
    refuse(tmp_path / "absent" / "deeper")
    for name in hidden:
        (tmp_path / name).mkdir()
    refuse(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(hidden)  # nothing written


def test_refuse_a_file_or_a_symbolic_link(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "to_d").symlink_to(tmp_path / "d")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    cases = {"f": "a file", "to_d": "a symbolic link", "dangling": "a symbolic link"}
    for name, what in cases.items():
        with pytest.raises(ScaffoldError) as e:
            refuse(tmp_path / name)
        assert str(e.value) == f"{tmp_path / name}: is {what}, not a folder"


@pytest.mark.parametrize(
    ("names", "first"),
    [
        (["train.py"], "train.py"),
        (["dvc.yaml"], "dvc.yaml"),
        (["params.yaml"], "params.yaml"),
        (["params.yaml", "dvc.yaml"], "dvc.yaml"),  # the first in the order init writes them
    ],
)
def test_refuse_one_of_its_own_files(tmp_path: Path, names: list[str], first: str) -> None:
    for name in names:
        (tmp_path / name).write_text("mine\n")
    with pytest.raises(ScaffoldError) as e:
        refuse(tmp_path)
    assert str(e.value) == f"{tmp_path / first}{REPLACE}"


def test_refuse_its_own_name_as_a_dangling_link(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ScaffoldError) as e:
        refuse(tmp_path)
    assert str(e.value) == f"{tmp_path / 'dvc.yaml'}{REPLACE}"


@pytest.mark.parametrize(
    ("visible", "listed"),
    [
        (["b"], "1 entries (b)"),
        (["c", "a", "b"], "3 entries (a, b, c)"),
        (["d", "c", "b", "a"], "4 entries (a, b, c, ...)"),
    ],
)
def test_refuse_a_folder_holding_anything_else(tmp_path: Path, visible: list[str], listed: str) -> None:
    (tmp_path / ".hidden").write_text("")
    for name in visible:
        (tmp_path / name).write_text("")
    with pytest.raises(ScaffoldError) as e:
        refuse(tmp_path)
    assert str(e.value) == (
        f"{tmp_path}: holds {listed}: gates init writes a new project into a new or empty folder; next: name one"
    )


# ---- init: the three files, then git and dvc where absent ---------------------------------------


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, tuple[str, ...]]]:
    made: list[tuple[Path, tuple[str, ...]]] = []
    monkeypatch.setattr(scaffold, "_run", lambda folder, *argv: made.append((folder, argv)))
    return made


def test_init_into_a_new_folder_writes_the_template_then_git_and_dvc(tmp_path: Path, calls: list) -> None:
    folder = tmp_path / "new" / "project"
    assert init(folder) == [*WROTE, "git init", "dvc init"]
    assert calls == [(folder, ("git", "init", "-q")), (folder, ("dvc", "init", "-q", "--subdir"))]
    assert sorted(p.name for p in folder.iterdir()) == ["dvc.yaml", "params.yaml", "train.py"]
    for name, template in scaffold.FILES.items():
        assert (folder / name).read_bytes() == (scaffold.TEMPLATE / template).read_bytes()


def test_init_inside_git_with_dvc_runs_neither(tmp_path: Path, calls: list) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".dvc").mkdir()
    assert init(tmp_path) == WROTE
    assert calls == []


def test_init_inside_git_runs_dvc_init_where_dvc_is_not_a_folder(tmp_path: Path, calls: list) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".dvc").write_text("not a folder")
    assert init(tmp_path) == [*WROTE, "dvc init"]
    assert calls == [(tmp_path, ("dvc", "init", "-q", "--subdir"))]


def test_init_into_an_existing_empty_folder_outside_git(tmp_path: Path, calls: list) -> None:
    (tmp_path / ".dvc").mkdir()
    assert init(tmp_path) == [*WROTE, "git init"]
    assert calls == [(tmp_path, ("git", "init", "-q"))]


def test_init_refuses_before_writing_anything(tmp_path: Path, calls: list) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(ScaffoldError, match="holds 1 entries"):
        init(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"] and calls == []
