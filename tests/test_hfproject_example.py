"""examples/hf-trainer as a DVC project of its own (issue #25): the cheap, torch-free parts.

The runs themselves are judged in tests/test_byo_trainer.py; here: the example's params.yaml is one
the gates accept, the run record's config identity equals the one the gates derive from it, and the
gates read the dvc.lock of the project they judge when it is a subdirectory of the git repository.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

from conftest import REPO
from gates.dvclock import DvcLock
from params.config import load_params
from params.identity import config_identity as config_hash

EXAMPLE = REPO / "examples" / "hf-trainer"


def hfconfig():
    spec = importlib.util.spec_from_file_location("hfconfig", EXAMPLE / "hfconfig.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_record_carries_the_config_identity_the_gates_expect() -> None:
    params = load_params(EXAMPLE / "params.yaml")  # the gates' own validation
    hf = hfconfig()
    for vocab in (300, 2048):
        want = params.run_config(vocab).config_hash()
        assert config_hash(hf.record_config(hf.load(EXAMPLE / "params.yaml"), vocab)) == want
    changed = hf.load(EXAMPLE / "params.yaml")
    changed["train"]["grad_accum"] = 2  # negative control: a changed knob changes the identity
    assert config_hash(hf.record_config(changed, 2048)) != params.run_config(2048).config_hash()


def test_a_knob_the_trainer_cannot_honour_is_refused() -> None:
    hf = hfconfig()
    p = hf.load(EXAMPLE / "params.yaml")
    p["model"]["dropout"] = 0.1
    try:
        hf.refuse_unsupported(p)
    except hf.ParamsError as e:
        assert "model.dropout" in str(e)
    else:
        raise AssertionError("dropout 0.1 was accepted, but Qwen3 has no residual dropout")


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_a_subdirectory_project_reads_its_own_committed_lock(tmp_path: Path) -> None:
    """HEAD:dvc.lock names the repository root's lock: its stages looked 'removed' from the example's."""
    sub = tmp_path / "examples" / "hf"
    sub.mkdir(parents=True)
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n  train@thread: {}\n")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (sub / "dvc.lock").write_text("schema: '2.0'\nstages:\n  train@proc: {}\n")
    (sub / "dvc.yaml").write_text("stages: {}\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert DvcLock.read(sub).committed == {"train@proc"}
    assert not DvcLock.read(sub).removed("train@thread")
    assert DvcLock.read(tmp_path).committed == {"train@thread"}
