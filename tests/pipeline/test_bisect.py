"""python -m gates bisect on a scratch repository: real git, real DVC, real training (tiny config).

The scratch repository is this project with a tiny params config and a golden blessed at GOOD.
History after GOOD: a docs commit, a commit that breaks the build (train.steps=0 is refused), a
commit that fixes it, the planted regression (an off-by-one in the warm-up schedule of
xtrain/core/optim.py: fresh_train's exact tier fails at step 1), a docs commit (BAD). Bisect must name the planted commit, skip the broken one and say so.
A branch from GOOD holds the params case: train.lr raised by 30 % in params.yaml, then a docs
commit. Each commit is judged against its own params, so GOOD passes and the lr commit is named as
a config change without a golden.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS, REPO, TINY_MODEL, TINY_SEED, TINY_TRAIN, tiny_text

ENV = {**os.environ, "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip


def sh(repo: Path, *cmd: str) -> str:
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, f"{' '.join(cmd)}: {proc.stdout[-1500:]}{proc.stderr[-1500:]}"
    return proc.stdout


WARMUP = "return t.lr * (step + 1) / t.warmup_steps"


def commit(
    repo: Path,
    message: str,
    edit_params: dict | None = None,
    doc: str | None = None,
    warmup_bug: bool = False,
) -> str:
    if warmup_bug:
        optim = repo / "xtrain" / "core" / "optim.py"
        assert WARMUP in optim.read_text()
        optim.write_text(optim.read_text().replace(WARMUP, WARMUP.replace("step + 1", "step + 2")))
    if edit_params is not None:
        params = yaml.safe_load((repo / "params.yaml").read_text())
        params["train"].update(edit_params)
        (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if doc is not None:
        (repo / "docs" / "notes.md").write_text(doc)
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "commit", "-q", "-m", message)
    return sh(repo, "git", "rev-parse", "--short", "HEAD").strip()


def project_copy(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for rel in files:
        if (REPO / rel).is_file() and not rel.startswith(("tests/", "ci/", ".github/")) and rel != "dvc.lock":
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PARAMS if rel == "params.yaml" else REPO / rel, dest / rel)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("bisect") / "repo"
    repo.mkdir()
    project_copy(repo)
    (repo / "text").mkdir()
    (repo / "text" / "tiny.txt").write_text(tiny_text(20000))
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params.update(profile="cpu", seed=TINY_SEED)
    params["data"].update(source="file", path="text/tiny.txt")
    params["tokenizer"]["vocab_size"] = 300
    params["model"].update(TINY_MODEL)
    params["train"].update({**TINY_TRAIN, "cpu_threads": 1})
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(repo, "git", "init", "-q")
    sh(repo, "dvc", "repro", "export")
    sh(
        repo,
        sys.executable,
        "-m",
        "registry",
        "bless",
        "--golden",
        "--reason",
        "golden of the scratch history",
    )
    c = {"good": commit(repo, "good: tiny config with its golden")}
    c["docs"] = commit(repo, "docs: a note", doc="one\n")
    c["broken"] = commit(repo, "broken: zero steps", edit_params={"steps": 0})
    c["fixed"] = commit(repo, "fixed: steps back", edit_params={"steps": TINY_TRAIN["steps"]})
    c["planted"] = commit(repo, "planted: warm-up off by one", warmup_bug=True)
    c["bad"] = commit(repo, "docs: another note", doc="two\n")
    sh(repo, "git", "checkout", "-q", "-b", "lr", c["good"])  # the params case, a branch from GOOD
    lr = TINY_TRAIN["lr"]
    c["lr"] = commit(repo, "train: lr up 30 %", edit_params={"lr": lr * 1.3})
    c["lr_docs"] = commit(repo, "docs: a note on lr", doc="lr\n")
    sh(repo, "git", "checkout", "-q", "-")
    return repo, c


def bisect(repo: Path, good: str, bad: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gates", "bisect", good, bad, "--gate", "fresh_train"]
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=ENV)


def test_bisect_names_the_planted_commit_and_skips_the_broken_one(history) -> None:
    repo, c = history
    out = bisect(repo, c["good"], c["bad"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"first bad commit: {c['planted']} planted: warm-up off by one" in out.stdout
    assert "fresh_train: " in out.stdout and "first differing step 1" in out.stdout
    assert f"{c['broken']} broken: zero steps: skip (untestable)" in out.stdout
    assert "dvc repro failed" in out.stdout
    assert "config changed" not in out.stdout  # the code case: the config identity did not move
    assert not (repo / ".git" / "BISECT_LOG").exists()  # the user's repository has no bisect state
    # cached per commit: a second bisect runs no stage and gives the same answer
    again = bisect(repo, c["good"], c["bad"])
    assert again.returncode == 0 and f"first bad commit: {c['planted']}" in again.stdout
    verdicts = (repo / ".git" / "xtrain-bisect").glob("[0-9a-f]*.json")  # not the cache's marker
    assert len(list(verdicts)) == 6


def test_a_bad_that_passes_is_exit_1_and_a_bad_good_is_exit_2(history) -> None:
    repo, c = history
    out = bisect(repo, c["good"], c["fixed"])
    assert out.returncode == 1 and "passes at BAD" in out.stdout, out.stdout + out.stderr
    out = bisect(repo, c["planted"], c["bad"])  # GOOD itself fails
    assert out.returncode == 2 and f"GOOD {c['planted']} does not pass (fail)" in out.stderr
    out = bisect(repo, c["bad"], c["good"])
    assert out.returncode == 2 and "is not an ancestor" in out.stderr


def test_a_params_change_is_judged_by_its_own_params_and_named(history) -> None:
    """GOOD's runs are judged against GOOD's params (not the judge's, whose lr may differ); the lr
    commit has no golden for its config, so it is the first bad commit, said plainly."""
    repo, c = history
    out = bisect(repo, c["good"], c["lr_docs"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{c['good']} good: tiny config with its golden: pass [GOOD]" in out.stdout
    assert f"first bad commit: {c['lr']} train: lr up 30 %" in out.stdout
    assert f"config changed at {c['lr']}, no golden: bless it or revert" in out.stdout
