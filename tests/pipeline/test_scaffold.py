"""Your own trainer from an empty folder (issue #34 item 4): `python -m gates init`, `dvc repro`,
`python -m gates check` reach a verdict in three commands; a golden blessed by `registry bless
--golden` (no export) then catches a change of the numbers. The README's runrecord snippet is the
template's train.py, executed here as written.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import existing_repo
import pytest

from conftest import REPO, code_first
from gates.judges import catalogue
from gates.reading import expect

TEMPLATE = REPO / "gates" / "byo_template"


def sh(folder: Path, *argv: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    env = code_first(REPO, {**code_first(REPO), "DVC_NO_ANALYTICS": "1", "OMP_NUM_THREADS": "1"})
    proc = subprocess.run(list(argv), cwd=folder, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode in ok, f"{argv}: {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def readme_snippet() -> str:
    """The Python block under "## Gate your own trainer" in README.md."""
    section = REPO.joinpath("README.md").read_text().split("## Gate your own trainer", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_snippet_is_the_template_and_runs_as_written(tmp_path: Path) -> None:
    snippet = readme_snippet()
    assert (
        snippet == (TEMPLATE / "train.py.template").read_text()
    )  # one text: what the README shows is what init writes
    (tmp_path / "train.py").write_text(snippet)
    sh(tmp_path, sys.executable, "train.py")
    m = json.loads((tmp_path / "runs" / "single" / "metrics.json").read_text())
    assert expect.run_problems(None, "single", m) == []
    assert m["dropout"]["masks"] == "seeded" and m["eval_mode_steps"] == []
    assert m["eval"][-1]["loss"] < m["eval"][0]["loss"]  # it learns
    assert (tmp_path / "runs" / "single" / "checkpoints" / "latest").is_file()  # consistency needs it


@pytest.mark.parametrize(
    ("there", "says"),
    [
        ({"dvc.yaml": "stages: {}\n"}, "dvc.yaml: exists: refusing to replace it"),
        ({"notes.txt": "mine\n"}, "holds 1 entries (notes.txt): gates init writes a new project into a new"),
    ],
)
def test_init_writes_only_into_a_new_or_empty_folder(tmp_path: Path, there: dict, says: str) -> None:
    for name, text in there.items():
        (tmp_path / name).write_text(text)
    proc = sh(tmp_path, sys.executable, "-m", "gates", "init", ok=(2,))
    assert proc.stderr.strip().count("\n") == 0 and says in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(there)  # nothing written
    link = tmp_path.parent / f"{tmp_path.name}-link"
    link.symlink_to(tmp_path / "absent")
    proc = sh(tmp_path, sys.executable, "-m", "gates", "init", str(link), ok=(2,))
    assert "is a symbolic link, not a folder" in proc.stderr and not (tmp_path / "absent").exists()


@pytest.mark.parametrize(
    ("hidden", "says"),
    [
        ({".git": "garbage\n"}, "git cannot use the repository here: fatal: invalid gitfile format"),
        ({".dvc": ""}, ".dvc: is not a folder, as git and DVC expect there"),
        ({".gitignore": "*\n"}, ".dvc: ignored by git ("),
    ],
)
def test_init_refuses_what_would_stop_it_half_way_then_a_fixed_folder_inits(
    tmp_path: Path, hidden: dict, says: str
) -> None:
    """main wrote train.py, dvc.yaml and params.yaml, then failed in git or dvc init; its re-run was
    refused ("train.py exists")."""
    for name, text in hidden.items():
        (tmp_path / name).write_text(text)
    proc = sh(tmp_path, sys.executable, "-m", "gates", "init", ok=(2,))
    assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(hidden)  # nothing written
    for name in hidden:
        (tmp_path / name).unlink()
    sh(tmp_path, sys.executable, "-m", "gates", "init")
    assert {".git", ".dvc", "train.py", "dvc.yaml", "params.yaml"} <= {p.name for p in tmp_path.iterdir()}


def test_init_runs_this_interpreters_dvc_not_one_on_path(tmp_path: Path) -> None:
    """main: `dvc` not on PATH gave a 25-line traceback (FileNotFoundError)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    (bin_dir / "git").symlink_to(git)
    env = {**code_first(REPO), "DVC_NO_ANALYTICS": "1", "PATH": str(bin_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "gates", "init", "mine"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith("git init, dvc init; next: dvc repro && python3 -m gates check\n")
    assert (tmp_path / "mine" / ".dvc" / "config").is_file()


@pytest.mark.ddp
@pytest.mark.xdist_group("ddp")
def test_three_commands_from_an_empty_folder_reach_a_verdict(tmp_path: Path) -> None:
    """init, dvc repro (one device and torchrun world 2), gates check: exit 0, the gates of stages
    the project has no part of folded into one line."""
    folder = tmp_path / "mine"
    t0 = time.perf_counter()
    sh(tmp_path, sys.executable, "-m", "gates", "init", "mine")
    sh(folder, "dvc", "repro")
    check = sh(folder, sys.executable, "-m", "gates", "check")
    print(f"init + dvc repro + gates check: {time.perf_counter() - t0:.1f} s")
    report = json.loads((folder / "reports" / "gates.json").read_text())
    status = {g["id"]: g["status"] for g in report["gates"]}
    judged = ("seals", "consistency", "loss_match.proc", "cross_rank.proc", "finite")
    assert all(status[g] == "pass" for g in judged), check.stdout
    assert status["fresh_train"] == "skip" and "python -m registry bless --golden" in check.stdout
    ours = {"train_single", "train@proc"}
    folded = [g for g in catalogue.GATES if catalogue.not_in_pipeline(g, ours.__contains__)]
    assert f"not in this pipeline: {len(folded)} gates" in check.stdout and len(folded) >= 15
    assert "dvc repro train@thread" not in check.stdout
    # a golden of the run alone (no export), then a change of the numbers fails it
    bless = sh(
        folder, sys.executable, "-m", "registry", "bless", "--golden", "--reason", "the first run, looked at"
    )
    assert "the run alone: no export" in bless.stdout and (folder / "registry" / "index.json").is_file()
    sh(folder, sys.executable, "-m", "gates", "check", "--only", "fresh_train")
    train = folder / "train.py"
    train.write_text(train.read_text().replace("lr=0.5)", "lr=0.55)"))  # a planted change
    sh(folder, "dvc", "repro", "train_single")
    changed = sh(folder, sys.executable, "-m", "gates", "check", "--only", "fresh_train", ok=(1,))
    assert "FAIL fresh_train: exact tier vs golden" in changed.stdout, changed.stdout


@pytest.mark.ddp
@pytest.mark.xdist_group("ddp")
def test_an_existing_repository_reaches_a_verdict_in_three_commands_and_ten_lines(tmp_path: Path) -> None:
    """Issue #54 item 4 (main: `gates init` refused a folder holding train.py; 7 commands by hand). The
    commands and the recording lines are counted from docs/byo-trainer.md's section; the trainer
    without those lines records nothing and trains; with them, in a git repository of its own, the
    documented commands run verbatim reach a verdict, and the trainer is left as it was."""
    commands, lines = existing_repo.commands(), existing_repo.recording_lines()
    assert len(commands) <= 3 and len(lines) <= 10, (commands, lines)
    recorded = existing_repo.TRAINER.read_text()
    plain = existing_repo.before(recorded, lines)
    assert existing_repo.records(plain) == [] and "rec" in existing_repo.records(recorded)
    before = tmp_path / "before"
    existing_repo.make_repo(before, plain)
    sh(before, sys.executable, "train.py", "--tokens", "tokens.safetensors", "--vocab-size", "64")
    assert not (before / "runs").exists()  # it trains, and records nothing
    folder = tmp_path / "mine"
    existing_repo.make_repo(folder, recorded)
    outs = [sh(folder, "bash", "-c", command).stdout for command in commands]
    assert outs[0].startswith("plan: write dvc.yaml\nplan: write params.yaml\nplan: run "), outs[0]
    report = json.loads((folder / "reports" / "gates.json").read_text())
    status = {g["id"]: g["status"] for g in report["gates"]}
    judged = ("seals", "consistency", "loss_match.proc", "cross_rank.proc", "finite")
    assert all(status[g] == "pass" for g in judged), outs[-1]
    assert (folder / "train.py").read_text() == recorded  # left alone
    assert sh(folder, "git", "status", "--porcelain", "train.py").stdout == ""
    again = sh(folder, "bash", "-c", commands[0]).stdout  # a re-run: nothing to do
    assert again.startswith("plan: keep dvc.yaml (already this content)\nplan: keep params.yaml"), again
