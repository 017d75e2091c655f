"""`gates init --train` beside an existing trainer (issue #54 item 4), in-process: the plan (what it
would write given a folder), the trainer's command read and turned into the two stages, its own files
refused when there with other content (nothing written, one line naming it) and kept when there with
the same content. git runs for real (milliseconds); `dvc init` (~1.5 s) is recorded here and run for
real by tests/pipeline/test_scaffold.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gates import scaffold
from gates.scaffold import Plan, ScaffoldError

TRAIN = "python3 train.py --steps 3 --run-dir {run_dir}"
SINGLE = "python3 train.py --steps 3 --run-dir runs/single"
PROC = "python3 -m torch.distributed.run --standalone --nproc-per-node 2 train.py --steps 3 --run-dir 'runs/${item}'"
PARAMS = (scaffold.TEMPLATE / "params.yaml").read_bytes()
DVC_INIT = (sys.executable, "-m", "dvc", "init", "-q", "--subdir")


def dvc_yaml(single: str, proc: str, deps: list[str]) -> bytes:
    listed = "".join(f"\n    - {d}" for d in deps)
    return (
        scaffold.HEADER + f"stages:\n  train_single:\n    cmd: {single}\n    deps:{listed}\n    outs:\n"
        f"    - runs/single\n  train:\n    foreach:\n    - proc\n    do:\n      cmd: {proc}\n"
        f"      deps:{listed.replace(chr(10), chr(10) + '  ')}\n      outs:\n      - runs/${{item}}\n"
    ).encode()


def trainer(folder: Path) -> dict[str, str]:
    """A trainer of its own: a script importing a module beside it (and one it does not import)."""
    files = {
        "train.py": "import torch\nfrom model import Net\nimport helpers.util\n",
        "model.py": "class Net: ...\n",
        "helpers/__init__.py": "",
        "helpers/util.py": "X = 1\n",
        "unused.py": "import os\n",
        "notes.txt": "mine\n",
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return files


def listing(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(folder.rglob("*"))
        if ".git" not in p.relative_to(folder).parts[:1]
    }


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, tuple[str, ...]]]:
    made: list[tuple[Path, tuple[str, ...]]] = []
    monkeypatch.setattr(scaffold, "_run", lambda folder, *argv: made.append((folder, argv)))
    return made


DEPS = ["helpers/__init__.py", "helpers/util.py", "model.py", "train.py"]


# ---- the plan: what it would write given a folder ---------------------------------------------


def test_the_plan_beside_a_trainer_outside_git(tmp_path: Path) -> None:
    trainer(tmp_path)
    before = listing(tmp_path)
    p = scaffold.plan(tmp_path, TRAIN)
    assert listing(tmp_path) == before  # planning writes nothing
    assert p.writes == {"dvc.yaml": dvc_yaml(SINGLE, PROC, DEPS), "params.yaml": PARAMS}
    assert (p.kept, p.git_init, p.dvc_init) == ([], True, True)
    assert p.commands() == [("git", "init", "-q"), DVC_INIT]
    assert p.lines() == [
        f"write {tmp_path / 'dvc.yaml'}",
        f"write {tmp_path / 'params.yaml'}",
        f"run git init -q (in {tmp_path})",
        f"run {' '.join(DVC_INIT)} (in {tmp_path})",
    ]
    stages = yaml.safe_load(p.writes["dvc.yaml"])["stages"]  # what DVC reads
    assert stages["train"]["do"]["cmd"] == PROC and stages["train_single"]["deps"] == DEPS


def test_the_plan_inside_git_with_dvc_runs_nothing(tmp_path: Path) -> None:
    trainer(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".dvc").mkdir()
    p = scaffold.plan(tmp_path, "python3 train.py")
    assert (p.git_init, p.dvc_init, p.commands()) == (False, False, [])
    assert p.writes["dvc.yaml"] == dvc_yaml(
        "python3 train.py", "python3 -m torch.distributed.run --standalone --nproc-per-node 2 train.py", DEPS
    )


def test_init_beside_a_trainer_leaves_it_alone_and_a_rerun_does_nothing(tmp_path: Path, calls: list) -> None:
    files = trainer(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    assert scaffold.init(tmp_path, TRAIN) == ["wrote dvc.yaml", "wrote params.yaml", "dvc init"]
    assert calls == [(tmp_path, DVC_INIT)]
    after = listing(tmp_path)
    assert {name: after[name].decode() for name in files if name in after} == files  # the trainer as it was
    assert after["dvc.yaml"] == dvc_yaml(SINGLE, PROC, DEPS) and after["params.yaml"] == PARAMS
    (tmp_path / ".dvc").mkdir()
    p = scaffold.plan(tmp_path, TRAIN)
    assert (p.writes, p.kept) == ({}, ["dvc.yaml", "params.yaml"])
    assert p.lines() == [f"keep {tmp_path / n} (already this content)" for n in ("dvc.yaml", "params.yaml")]
    assert scaffold.apply(p) == [] and listing(tmp_path) == {**after, ".dvc": b"<dir>"}


def test_one_own_file_there_with_this_content_is_kept_the_other_written(tmp_path: Path) -> None:
    trainer(tmp_path)
    (tmp_path / "params.yaml").write_bytes(PARAMS)
    p = scaffold.plan(tmp_path, TRAIN)
    assert (list(p.writes), p.kept) == (["dvc.yaml"], ["params.yaml"])


def test_nothing_to_do_says_so() -> None:
    assert Plan(Path("f"), {}, [], False, False).lines() == [
        "nothing to do: every file is there with this content"
    ]


# ---- negative controls: its own file with other content, nothing written -----------------------


def other_dir(p: Path) -> None:
    p.mkdir()


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("dvc.yaml", lambda p: p.write_text("stages: {}\n")),
        ("params.yaml", lambda p: p.write_bytes(PARAMS + b"\n")),  # one byte more is other content
        ("params.yaml", lambda p: p.symlink_to(scaffold.TEMPLATE / "params.yaml")),  # a link, even to it
        ("dvc.yaml", lambda p: p.symlink_to(p.parent / "absent")),
        ("dvc.yaml", other_dir),
    ],
)
def test_an_own_file_with_other_content_is_refused_naming_it(
    tmp_path: Path, calls: list, name: str, make
) -> None:
    trainer(tmp_path)
    make(tmp_path / name)
    before = listing(tmp_path)
    with pytest.raises(ScaffoldError) as e:
        scaffold.init(tmp_path, TRAIN)
    assert str(e.value) == (
        f"{tmp_path / name}: exists with other content: refusing to replace it (gates init writes dvc.yaml, "
        "params.yaml beside your trainer; nothing was written); next: move it aside, re-run, then merge yours into "
        "it by hand"
    )
    assert e.value.exit_code == 2 and calls == [] and listing(tmp_path) == before


def test_an_ignore_rule_hiding_its_own_files_is_refused_but_not_one_hiding_the_trainer(
    tmp_path: Path, calls: list
) -> None:
    trainer(tmp_path)
    (tmp_path / ".gitignore").write_text("train.py\n")  # the trainer's own business
    assert scaffold.plan(tmp_path, "python3 model.py").writes["params.yaml"] == PARAMS
    (tmp_path / ".gitignore").write_text("params.yaml\n")
    with pytest.raises(ScaffoldError, match=r"params.yaml: ignored by git \("):
        scaffold.plan(tmp_path, TRAIN)


def test_a_broken_hidden_entry_or_git_is_refused_beside_a_trainer(tmp_path: Path, calls: list) -> None:
    trainer(tmp_path)
    (tmp_path / ".dvc").write_text("x")
    with pytest.raises(ScaffoldError, match=r"\.dvc: is not a folder, as git and DVC expect there"):
        scaffold.init(tmp_path, TRAIN)
    (tmp_path / ".dvc").unlink()
    (tmp_path / ".git").write_text("garbage\n")
    with pytest.raises(ScaffoldError, match="git cannot use the repository here: fatal: invalid gitfile"):
        scaffold.init(tmp_path, TRAIN)
    assert calls == [] and not (tmp_path / "dvc.yaml").exists()


def test_git_missing_is_refused_beside_a_trainer(
    tmp_path: Path, calls: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer(tmp_path)
    monkeypatch.setattr(scaffold.shutil, "which", lambda name: None)
    with pytest.raises(ScaffoldError, match=r"^git: not found on PATH"):
        scaffold.plan(tmp_path, TRAIN)


def test_a_step_failing_removes_only_its_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = trainer(tmp_path)

    def git_then_fail(where: Path, *argv: str) -> None:
        if argv[:2] == ("git", "init"):
            (where / ".git").mkdir()
            return
        raise ScaffoldError("dvc init failed")

    monkeypatch.setattr(scaffold, "_run", git_then_fail)
    with pytest.raises(ScaffoldError, match="dvc init failed"):
        scaffold.init(tmp_path, TRAIN)
    assert sorted(os.listdir(tmp_path)) == sorted({*(n.split("/")[0] for n in files)})
    assert scaffold.Made(tmp_path, ("dvc.yaml", ".git")).new == ["dvc.yaml", ".git"]


# ---- the trainer's command ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("train", "says"),
    [
        (
            "python3 'train.py",
            '--train: "python3 \'train.py": No closing quotation; next: quote it as a shell',
        ),
        ("train.py --x", "--train: 'train.py --x': not `python3 SCRIPT.py ARGS` (an interpreter, then your"),
        ("python3", "--train: 'python3': not `python3 SCRIPT.py ARGS`"),
        ("bash train.py", "--train: 'bash train.py': not `python3 SCRIPT.py"),
        ("python3 -m train", "--train: 'python3 -m train': not `python3 SCRIPT.py"),
        ("python3 -u train.py", "--train: 'python3 -u train.py': not `python3 SCRIPT.py"),
        ("python3 train.py --x=${HOME}", "--train: 'python3 train.py --x=${HOME}': DVC would read ${...} in"),
    ],
)
def test_a_command_that_is_not_python_and_a_script_is_refused(tmp_path: Path, train: str, says: str) -> None:
    trainer(tmp_path)
    with pytest.raises(ScaffoldError) as e:
        scaffold.plan(tmp_path, train)
    assert str(e.value).startswith(says) and "\n" not in str(e.value)
    nexts = ("next: quote it as a shell would", f"next: {scaffold.EXISTING}", "next: pass the value itself")
    assert str(e.value).endswith(nexts)


@pytest.mark.parametrize("script", ["absent.py", "../train.py", "helpers", "ABS"])
def test_a_script_not_inside_the_folder_is_refused(tmp_path: Path, script: str) -> None:
    folder = tmp_path / "repo"
    folder.mkdir()
    trainer(folder)
    (tmp_path / "train.py").write_text("")
    script = str(tmp_path / "train.py") if script == "ABS" else script
    with pytest.raises(ScaffoldError) as e:
        scaffold.trainer_argv(folder, f"python3 {script}.py" if script == "helpers" else f"python3 {script}")
    named = folder / (f"{script}.py" if script == "helpers" else script)
    assert (
        str(e.value)
        == f"{named}: --train names no script inside {folder}; next: the script's path from there"
    )


def test_any_python_interpreter_and_a_script_in_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")
    argv = scaffold.trainer_argv(tmp_path, ".venv/bin/python3.11 src/train.py --lr=1e-3 'a b'")
    assert argv == [".venv/bin/python3.11", "src/train.py", "--lr=1e-3", "a b"]
    assert scaffold.commands(argv) == (
        ".venv/bin/python3.11 src/train.py --lr=1e-3 'a b'",
        ".venv/bin/python3.11 -m torch.distributed.run --standalone --nproc-per-node 2 src/train.py "
        "--lr=1e-3 'a b'",
    )


def test_run_dir_is_each_stages_own_in_every_word() -> None:
    single, proc = scaffold.commands(["python", "t.py", "--out={run_dir}/x", "{run_dir}"])
    assert single == "python t.py --out=runs/single/x runs/single"
    assert proc.endswith(" t.py '--out=runs/${item}/x' 'runs/${item}'")
    assert scaffold.commands(["python", "{run_dir}.py"])[0] == "python runs/single.py"  # every word


@pytest.mark.parametrize("kind", ["absent", "file", "link"])
def test_beside_needs_an_existing_folder(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "repo"
    if kind == "file":
        folder.write_text("")
    elif kind == "link":
        (tmp_path / "real").mkdir()
        trainer(tmp_path / "real")
        folder.symlink_to(tmp_path / "real")
    with pytest.raises(ScaffoldError) as e:
        scaffold.plan(folder, TRAIN)
    what = "a symbolic link" if kind == "link" else "not a folder"
    assert str(e.value) == (
        f"{folder}: is {what}: --train names a trainer in an existing folder; next: the folder holding it"
    )


def test_the_plan_into_a_new_folder_is_the_template(tmp_path: Path) -> None:
    folder = tmp_path / "new"
    p = scaffold.plan(folder)
    assert not folder.exists()  # planning makes nothing
    assert p.writes == {n: (scaffold.TEMPLATE / t).read_bytes() for n, t in scaffold.FILES.items()}
    assert p.lines() == [
        *(f"write {folder / n}" for n in ("train.py", "dvc.yaml", "params.yaml")),
        f"run git init -q (in {folder})",
        f"run {' '.join(DVC_INIT)} (in {folder})",
    ]


def test_a_failure_after_dvc_init_takes_back_what_it_made_and_only_that(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = trainer(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / ".git" / "mine").write_text("kept")

    def dvc_then_fail(where: Path, *argv: str) -> None:
        (where / ".dvc").mkdir()
        (where / ".dvcignore").write_text("")
        raise ScaffoldError("dvc init failed")

    monkeypatch.setattr(scaffold, "_run", dvc_then_fail)
    with pytest.raises(ScaffoldError, match="dvc init failed"):
        scaffold.init(tmp_path, TRAIN)
    assert sorted(os.listdir(tmp_path)) == sorted({".git", *(n.split("/")[0] for n in files)})
    assert (tmp_path / ".git" / "mine").read_text() == "kept"


def test_an_ignore_rule_of_the_enclosing_repository_hides_its_own_file(tmp_path: Path, calls: list) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "sub").mkdir()
    trainer(tmp_path / "sub")
    (tmp_path / ".gitignore").write_text("sub/dvc.yaml\n")
    with pytest.raises(ScaffoldError) as e:
        scaffold.plan(tmp_path / "sub", TRAIN)
    assert str(e.value).startswith(
        f"{tmp_path / 'sub' / 'dvc.yaml'}: ignored by git ({tmp_path / '.gitignore'} line 1: 'sub/dvc.yaml')"
    )
    (tmp_path / ".gitignore").write_text("")
    assert scaffold.plan(tmp_path / "sub", TRAIN).git_init is False  # the enclosing repository


def test_undo_beside_a_trainer_takes_back_only_the_names_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trainer in src/: a train.py appearing beside it during the run is not init's (the template's
    name, but init writes only dvc.yaml and params.yaml here)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("")

    def theirs_then_fail(where: Path, *argv: str) -> None:
        (where / "train.py").write_text("theirs")
        raise ScaffoldError("git init failed")

    monkeypatch.setattr(scaffold, "_run", theirs_then_fail)
    with pytest.raises(ScaffoldError, match="git init failed"):
        scaffold.init(tmp_path, "python3 src/train.py")
    assert sorted(os.listdir(tmp_path)) == ["src", "train.py"]


def test_the_rule_is_named_by_its_file_from_an_existing_subfolder_too(tmp_path: Path, calls: list) -> None:
    """main named `sub/.gitignore` for a rule of the top's `.gitignore` when the folder existed (git
    names a rule's file from the repository's top, not from its cwd)."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "sub" / ".gitignore").write_text("# mine\n")
    (tmp_path / ".gitignore").write_text("# top\nsub/deeper/.dvc\n")
    with pytest.raises(ScaffoldError) as e:
        scaffold.init(tmp_path / "sub" / "deeper")
    assert str(e.value).startswith(
        f"{tmp_path / 'sub' / 'deeper' / '.dvc'}: ignored by git ({tmp_path / '.gitignore'} line 2: "
        "'sub/deeper/.dvc'): dvc init refuses"
    )
    (tmp_path / ".gitignore").write_text("# top\n")
    (tmp_path / "sub" / ".gitignore").write_text("deeper/params.yaml\n")  # a rule of the subfolder's own
    with pytest.raises(ScaffoldError) as e:
        scaffold.init(tmp_path / "sub" / "deeper")
    assert f"({tmp_path / 'sub' / '.gitignore'} line 1: 'deeper/params.yaml')" in str(e.value)
