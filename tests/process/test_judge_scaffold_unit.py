"""`gates init` (gates/scaffold.py) in-process (issue #37: its functions were reached only through
`python -m gates init` subprocesses, so no mutant of them had a test).

`_run` and `git_state` run real commands (git, the Python interpreter: milliseconds); `init` gets a
recording `_run`, since `dvc init` costs ~1.5 s and tests/pipeline/test_scaffold.py runs the real one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gates import scaffold
from gates.scaffold import ScaffoldError, init, refuse

WROTE = ["wrote train.py", "wrote dvc.yaml", "wrote params.yaml"]
DVC_INIT = (sys.executable, "-m", "dvc", "init", "-q", "--subdir")  # never a `dvc` found on PATH
REPLACE = (
    ": exists: refusing to replace it (gates init writes train.py, dvc.yaml, params.yaml into a new or "
    "empty folder); next: an empty folder, or beside your trainer: python3 -m gates init --train "
    "'python3 train.py ARGS'"
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
        (
            "import sys; sys.stderr.write('hint: a\\nfatal: broke\\nhint: b\\n'); sys.exit(128)",
            "fatal: broke",
        ),
        ("import sys; sys.stderr.write('error: broke\\nusage: x\\n'); sys.exit(1)", "error: broke"),
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


# ---- git_state: only a git work tree, or none ---------------------------------------------------


def test_git_state_of_a_work_tree(tmp_path: Path) -> None:
    assert scaffold.git_state(tmp_path) is False  # /tmp's pytest folders lie in no repository
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "sub").mkdir()
    assert scaffold.git_state(tmp_path) is True
    assert scaffold.git_state(tmp_path / "sub") is True


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
        f"{tmp_path}: holds {listed}: gates init writes a new project into a new or empty folder; next: name one, "
        "or beside your trainer: python3 -m gates init --train 'python3 train.py ARGS'"
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
    assert calls == [(folder, ("git", "init", "-q")), (folder, DVC_INIT)]
    assert sorted(p.name for p in folder.iterdir()) == ["dvc.yaml", "params.yaml", "train.py"]
    for name, template in scaffold.FILES.items():
        assert (folder / name).read_bytes() == (scaffold.TEMPLATE / template).read_bytes()


def test_init_inside_git_with_dvc_runs_neither(tmp_path: Path, calls: list) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".dvc").mkdir()
    assert init(tmp_path) == WROTE
    assert calls == []


def test_init_inside_git_runs_dvc_init_where_there_is_no_dvc(tmp_path: Path, calls: list) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert init(tmp_path) == [*WROTE, "dvc init"]
    assert calls == [(tmp_path, DVC_INIT)]


def test_init_into_an_existing_empty_folder_outside_git(tmp_path: Path, calls: list) -> None:
    (tmp_path / ".dvc").mkdir()
    assert init(tmp_path) == [*WROTE, "git init"]
    assert calls == [(tmp_path, ("git", "init", "-q"))]


def test_init_refuses_before_writing_anything(tmp_path: Path, calls: list) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(ScaffoldError, match="holds 1 entries"):
        init(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"] and calls == []


# ---- preflight: everything checked before anything is written (issue #51 item 4) ----------------


def refused(folder: Path, calls: list) -> str:
    before = sorted(p.name for p in folder.iterdir()) if folder.exists() else None
    with pytest.raises(ScaffoldError) as e:
        init(folder)
    assert calls == [] and (sorted(p.name for p in folder.iterdir()) if folder.exists() else None) == before
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
    return str(e.value)


def test_a_broken_git_is_refused_in_gits_words(tmp_path: Path, calls: list) -> None:
    (tmp_path / ".git").write_text("garbage\n")
    assert refused(tmp_path, calls) == (
        f"{tmp_path}: git cannot use the repository here: fatal: invalid gitfile format: {tmp_path}/.git; "
        "next: repair or remove it"
    )


def test_a_new_folder_under_a_broken_git_is_refused_and_not_made(tmp_path: Path, calls: list) -> None:
    (tmp_path / ".git").write_text("garbage\n")
    assert refused(tmp_path / "new" / "mine", calls).startswith(
        f"{tmp_path / 'new' / 'mine'}: git cannot use the repository here: fatal: invalid gitfile format"
    )
    assert not (tmp_path / "new").exists()


def test_inside_a_git_directory_is_not_a_work_tree(tmp_path: Path, calls: list) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert refused(tmp_path / ".git" / "x", calls) == (
        f"{tmp_path / '.git' / 'x'}: git cannot use the repository here: inside a git directory, not a work "
        f"tree ({tmp_path / '.git'}); next: repair or remove it"
    )


def test_git_state(tmp_path: Path) -> None:
    assert scaffold.git_state(tmp_path / "a" / "b") is False  # absent: asked of the nearest folder
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert scaffold.git_state(tmp_path) is True and scaffold.git_state(tmp_path / "a" / "b") is True
    assert scaffold._existing(tmp_path / "a" / "b") == tmp_path and scaffold._existing(tmp_path) == tmp_path


@pytest.mark.parametrize(
    ("name", "make", "kind"),
    [
        (".dvc", lambda p: p.write_text("x"), "a folder"),
        (".dvc", lambda p: p.symlink_to(p.parent), "a folder"),
        (".dvcignore", lambda p: p.mkdir(), "a file"),
        (".gitignore", lambda p: p.mkdir(), "a file"),
        (".gitignore", lambda p: p.symlink_to(p.parent / "absent"), "a file"),
    ],
)
def test_a_hidden_entry_of_the_wrong_kind_is_refused(
    tmp_path: Path, calls: list, name: str, make, kind
) -> None:
    make(tmp_path / name)
    assert refused(tmp_path, calls) == (
        f"{tmp_path / name}: is not {kind}, as git and DVC expect there; next: remove it, or init elsewhere"
    )


def test_hidden_entries_of_the_right_kind_pass(tmp_path: Path) -> None:
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvcignore").write_text("")
    (tmp_path / ".gitignore").write_text("/runs\n")
    assert scaffold.check_hidden(tmp_path) is None
    assert scaffold.preflight(tmp_path) == (True, False)
    assert scaffold.preflight(tmp_path / "absent") == (True, True)


@pytest.mark.parametrize(
    ("rules", "named", "why"),
    [
        ("*\n", ".dvc", "dvc init refuses an ignored .dvc"),
        ("# mine\n/params.yaml\n", "params.yaml", "the project's files must be committed"),
        ("*.py\n", "train.py", "the project's files must be committed"),
        ("*\n!.dvc\n!train.py\n", "dvc.yaml", "the project's files must be committed"),  # `!` un-ignores
    ],
)
def test_an_ignore_rule_hiding_dvc_or_its_files_is_refused(
    tmp_path: Path, calls: list, rules: str, named: str, why: str
) -> None:
    (tmp_path / ".gitignore").write_text(rules)
    line = 1 if rules.startswith("*\n") else rules.count("\n")
    pattern = rules.splitlines()[line - 1]
    assert refused(tmp_path, calls) == (
        f"{tmp_path / named}: ignored by git ({tmp_path / '.gitignore'} line {line}: {pattern!r}): {why}; "
        f"next: un-ignore it (add '!{named}' below that line)"
    )


def test_an_ignore_rule_of_the_enclosing_repository_is_named(tmp_path: Path, calls: list) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("sub/dvc.yaml\n")
    assert refused(tmp_path / "sub", calls).startswith(
        f"{tmp_path / 'sub' / 'dvc.yaml'}: ignored by git ({tmp_path / '.gitignore'} line 1: 'sub/dvc.yaml')"
    )
    (tmp_path / ".gitignore").write_text("sub/dvc.yaml\n!sub/dvc.yaml\n")  # un-ignored: it goes through
    assert scaffold.preflight(tmp_path / "sub") == (False, True)


def test_git_or_dvc_missing_is_refused_before_anything(
    tmp_path: Path, calls: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_which, real_spec = scaffold.shutil.which, scaffold.importlib.util.find_spec
    monkeypatch.setattr(scaffold.shutil, "which", lambda name: None if name == "git" else real_which(name))
    assert refused(tmp_path, calls) == "git: not found on PATH; next: install git, then re-run gates init"
    monkeypatch.setattr(scaffold.shutil, "which", real_which)
    monkeypatch.setattr(
        scaffold.importlib.util, "find_spec", lambda name, *a: None if name == "dvc" else real_spec(name, *a)
    )
    assert refused(tmp_path, calls) == (
        f"dvc: not installed for {sys.executable}; next: {sys.executable} -m pip install dvc, then re-run"
    )


@pytest.mark.parametrize("exists", [True, False])
def test_a_step_failing_after_the_checks_leaves_the_folder_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exists: bool
) -> None:
    folder = tmp_path / "project" if exists else tmp_path / "new" / "deep" / "project"
    if exists:
        folder.mkdir()
        (folder / ".venv").mkdir()

    def git_then_fail(where: Path, *argv: str) -> None:
        if argv[:2] == ("git", "init"):
            (where / ".git").mkdir()
            return
        raise ScaffoldError("dvc init failed")

    monkeypatch.setattr(scaffold, "_run", git_then_fail)
    with pytest.raises(ScaffoldError, match="dvc init failed"):
        init(folder)
    if exists:
        assert sorted(p.name for p in folder.iterdir()) == [".venv"]
    else:
        assert sorted(p.name for p in tmp_path.iterdir()) == []
    monkeypatch.setattr(scaffold, "_run", lambda *a: None)
    assert init(folder) == [*WROTE, "git init", "dvc init"]  # a re-run is not refused


def test_a_program_that_cannot_start_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError) as e:
        scaffold._run(tmp_path, str(tmp_path / "no-such-program"), "init")
    assert (
        str(e.value) == f"{tmp_path}: {tmp_path / 'no-such-program'} init failed: No such file or directory"
    )


def test_run_names_the_error_line_before_the_last(tmp_path: Path) -> None:
    code = "import sys; sys.stderr.write('ERROR: it broke\\nHaving any troubles? Hit us up\\n'); sys.exit(1)"
    with pytest.raises(ScaffoldError, match=r"failed: ERROR: it broke$"):
        scaffold._run(tmp_path, *py(code))


def test_an_enclosing_repositorys_rule_hiding_dvc_and_a_folder_named_like_an_option(
    tmp_path: Path, calls: list
) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".gitignore").write_text("/-proj/.dvc\n")
    assert refused(tmp_path / "-proj", calls) == (
        f"{tmp_path / '-proj' / '.dvc'}: ignored by git ({tmp_path / '.gitignore'} line 1: '/-proj/.dvc'): dvc "
        "init refuses an ignored .dvc; next: un-ignore it (add '!.dvc' below that line)"
    )


def test_a_global_ignore_rule_is_named_by_its_own_path(
    tmp_path: Path, calls: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    excludes = tmp_path / "global-ignore"
    excludes.write_text("params.yaml\n")
    (tmp_path / "gitconfig").write_text(f"[core]\n\texcludesFile = {excludes}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    folder = tmp_path / "mine"
    assert refused(folder, calls).startswith(
        f"{folder / 'params.yaml'}: ignored by git ({excludes} line 1: 'params.yaml'): the project's files"
    )


def test_undo_removes_only_its_own_names_and_only_empty_folders(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    made = scaffold.Made(folder)
    assert made.new == ["train.py", "dvc.yaml", "params.yaml", ".git", ".dvc", ".dvcignore"]
    assert made.folders == [folder, tmp_path / "a"]
    folder.mkdir(parents=True)
    (folder / ".git" / "objects").mkdir(parents=True)
    (folder / "train.py").write_text("")
    (folder / ".dvcignore").symlink_to(tmp_path / "absent")
    (folder / "theirs.txt").write_text("mine")  # not one of its names: kept, and so its folders
    made.undo()
    assert sorted(os.listdir(folder)) == ["theirs.txt"]
    (folder / "theirs.txt").unlink()
    made.undo()
    assert os.listdir(tmp_path) == []


def test_undo_keeps_what_was_there_before(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: x\n")
    made = scaffold.Made(tmp_path)
    assert ".git" not in made.new and made.folders == []
    (tmp_path / "dvc.yaml").write_text("")
    made.undo()
    assert sorted(os.listdir(tmp_path)) == [".git"] and (tmp_path / ".git" / "HEAD").exists()


def test_undo_never_hides_the_failure_it_undoes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "new"
    made = scaffold.Made(folder)
    (folder / ".git").mkdir(parents=True)
    (folder / "train.py").write_text("")

    def cannot(*_a, **_k) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(scaffold.shutil, "rmtree", cannot)
    monkeypatch.setattr(Path, "unlink", cannot)
    monkeypatch.setattr(Path, "rmdir", cannot)
    made.undo()  # quiet: the caller re-raises the failure being undone
    monkeypatch.undo()
    assert sorted(os.listdir(folder)) == [".git", "train.py"]
