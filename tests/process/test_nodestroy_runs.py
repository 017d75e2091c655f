"""Runs never destroy (issue #27, worst 5 and 9): a run folder replaces only a previous run; a refused
--resume keeps the interrupted run it refused; --resume without a checkpoint is an error;
checkpoints/latest cannot lead out of the run; one writer per run directory (a lock).
Real `python -m pipeline.train single` on the tiny config, in scratch folders.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_nodestroy_outputs import previous_run, tree

from conftest import REPO, TinyData, tiny_cli

ONE_LINE_EXIT_2 = 2


def env(**extra: str) -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO)), **extra}
    out.pop("XTRAIN_DEBUG", None)
    return out


def train(data: TinyData, run_dir: Path, *extra: str, cwd: Path | None = None, **environ: str):
    cmd = [sys.executable, "-m", "pipeline.train", "single", *tiny_cli(data, run_dir), *extra]
    cwd = cwd or data.tokens.parent  # never the checkout: cwd comes first on sys.path, PYTHONPATH decides
    return subprocess.run(cmd, cwd=cwd, env=env(**environ), capture_output=True, text=True, timeout=600)


def one_line(proc: subprocess.CompletedProcess, *words: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == ONE_LINE_EXIT_2, (proc.returncode, err[-3000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


def unlocked(root: Path) -> dict[str, object]:
    """tree(root) less the run locks (a lock file holds its last holder's pid)."""
    return {k: v for k, v in tree(root).items() if not k.endswith(".lock")}


def partial(run_dir: Path) -> Path:
    return run_dir.parent / f".{run_dir.name}.partial"


# ---- the run folder: only a previous run is replaced ------------------------------------------------


@pytest.mark.parametrize("case", ["foreign folder", "file", "working directory", "symlink out"])
def test_a_run_never_replaces_what_it_did_not_make(tiny_data: TinyData, tmp_path: Path, case: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "metrics.json").write_text('{"someone": "else"}')
    target = {
        "foreign folder": ws / "notes",
        "file": ws / "params.yaml",
        "working directory": ws,
        "symlink out": ws / "link",
    }[case]
    (ws / "notes").mkdir()
    (ws / "notes" / "metrics.json").write_text('{"mine": true}')  # a run would replace this name
    (ws / "notes" / "todo.txt").write_text("keep me\n")
    (ws / "params.yaml").write_text("seed: 1\n")
    (ws / "link").symlink_to(tmp_path / "elsewhere")
    before = tree(tmp_path)
    one_line(train(tiny_data, target, cwd=ws), str(target), "refusing to write the run")
    assert tree(tmp_path) == before


def test_a_run_replaces_a_previous_run_and_marks_its_folder(tiny_data: TinyData, tmp_path: Path) -> None:
    """Positive control: a run folder from before markers (outputs and .gitignore only) is replaced,
    the .gitignore carried over, the marker written; the next run replaces the marked folder."""
    run_dir = tmp_path / "runs" / "single"
    previous_run(run_dir)
    for _ in range(2):
        proc = train(tiny_data, run_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((run_dir / ".xtrain-output.json").read_text()) == {"kind": "run"}
    assert (run_dir / ".gitignore").read_text() == "/checkpoints\n/metrics.json\n"
    assert json.loads((run_dir / "metrics.json").read_text())["launcher"] == "single"


# ---- resume never destroys -------------------------------------------------------------------------


def test_a_refused_resume_keeps_the_interrupted_run(tiny_data: TinyData, tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "single"
    crashed = train(tiny_data, run_dir, XTRAIN_FAULT="raise@0:9")
    assert crashed.returncode != 0 and partial(run_dir).is_dir(), crashed.stderr[-3000:]
    ckpt = partial(run_dir) / "checkpoints" / "step_000006"
    good = (ckpt / "model.safetensors").read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF
    (ckpt / "model.safetensors").write_bytes(bytes(damaged))
    before = unlocked(tmp_path)
    one_line(train(tiny_data, run_dir, "--resume"), "model.safetensors: model_md5", "next:")
    assert unlocked(tmp_path) == before, "the refused resume changed the interrupted run"
    # the error's advice can be followed: the checkpoint put right, the same command resumes
    (ckpt / "model.safetensors").write_bytes(good)
    resumed = train(tiny_data, run_dir, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((run_dir / "metrics.json").read_text())["resumed_from_step"] == 6


def test_resume_without_a_checkpoint_is_an_error(tiny_data: TinyData, tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "single"
    one_line(train(tiny_data, run_dir, "--resume"), str(run_dir), "no checkpoint to resume from")
    assert not run_dir.exists() and not partial(run_dir).exists()


@pytest.fixture(scope="module")
def finished_run(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One complete run (12 steps, checkpoints at 6 and 12), copied by the tests that edit it."""
    run_dir = tmp_path_factory.mktemp("finished") / "runs" / "single"
    proc = train(tiny_data, run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


@pytest.mark.parametrize("pointer", ["absolute", "dotdot"])
def test_latest_cannot_lead_out_of_the_run(
    finished_run: Path, tiny_data: TinyData, tmp_path: Path, pointer: str
) -> None:
    """A checkpoint outside the run (an intact one: following it would resume happily) is refused."""
    run_dir = tmp_path / "runs" / "single"
    shutil.copytree(finished_run, run_dir, symlinks=True)
    outside = tmp_path / "outside" / "step_000012"
    shutil.copytree(run_dir / "checkpoints" / "step_000012", outside)
    name = str(outside) if pointer == "absolute" else "../../../outside/step_000012"
    (run_dir / "checkpoints" / "latest").write_text(name + "\n")
    before = unlocked(tmp_path)
    one_line(
        train(tiny_data, run_dir, "--resume"), "checkpoints/latest", "not a checkpoint folder of this run"
    )
    assert unlocked(tmp_path) == before
    export = subprocess.run(
        [sys.executable, "-m", "pipeline.export", str(run_dir), str(tmp_path / "export")],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    one_line(export, "checkpoints/latest")


# ---- one writer per run directory --------------------------------------------------------------------


def test_a_second_writer_of_a_run_fails_at_once_naming_the_first(tiny_data: TinyData, tmp_path: Path) -> None:
    """The first run is stopped (SIGSTOP) while it holds the lock and writes: the second is refused
    inside that window however loaded the box, then the first goes on and finishes whole."""
    run_dir = tmp_path / "runs" / "single"
    short = ("--set", "train.steps=24", "--set", "train.eval_every=12", "--set", "train.ckpt_every=4")
    first = subprocess.Popen(
        [sys.executable, "-m", "pipeline.train", "single", *tiny_cli(tiny_data, run_dir), *short],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not partial(run_dir).exists():  # the first holds the lock and has begun writing
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.01)
        os.kill(first.pid, signal.SIGSTOP)
        assert first.poll() is None, "the first run finished before it was stopped: lengthen it"
        second = train(tiny_data, run_dir, *short)
        one_line(second, str(run_dir), f"pid {first.pid}")
        assert first.poll() is None  # still stopped, still holding the lock
    finally:
        os.kill(first.pid, signal.SIGCONT)
        err = first.communicate(timeout=600)[1]
    assert first.returncode == 0, err[-3000:]
    ckpts = run_dir / "checkpoints"
    latest = ckpts / (ckpts / "latest").read_text().strip()
    assert latest.name == "step_000024"
    assert sorted(f.name for f in latest.iterdir()) == [
        "model.safetensors",
        "optimizer.safetensors",
        "state.json",
        "tokenizer.json",
    ]


# ---- what an interrupted launcher says of its run folder is what is on disk (issue #51 item 4) -------


def test_the_launchers_last_word_on_its_run_folder_is_what_is_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main said "runs/proc is unchanged" of a folder `dvc repro -f` had emptied before it started."""
    from xtrain.core import rundir

    monkeypatch.delenv("DVC_STAGE", raising=False)
    run = tmp_path / "runs" / "proc"
    assert rundir.snapshot(run) is None
    absent = "holds no run: it was already absent when this launcher started"
    assert rundir.describe(run, None) == f"{run} {absent}"
    monkeypatch.setenv("DVC_STAGE", "train@proc")
    assert rundir.describe(run, None) == (
        f"{run} {absent} (DVC removes a stage's outputs before it runs it; `dvc checkout train@proc` "
        "restores them)"
    )
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.json").write_text("{}")
    os.symlink("elsewhere", run / "link")
    before = rundir.snapshot(run)
    assert before is not None and sorted(before) == ["link", "metrics.json"]
    assert (
        rundir.describe(run, before)
        == f"{run} is unchanged: it holds the previous run, as when this launcher started"
    )
    (run / "metrics.json").write_text('{"other": 1}')
    assert rundir.describe(run, before) == (
        f"{run} changed while this launcher ran (not by it: it writes only {tmp_path / 'runs' / '.proc.partial'})"
    )
    shutil.rmtree(run)
    assert rundir.describe(run, before) == f"{run} is gone: it was removed while this launcher ran"
    run.mkdir()
    (run / ".gitignore").write_text("/metrics.json\n")
    empty = rundir.snapshot(run)
    (tmp_path / "runs" / ".proc.partial" / "checkpoints" / "step_000004").mkdir(parents=True)
    (tmp_path / "runs" / ".proc.partial" / "checkpoints" / "latest").write_text("step_000004\n")
    (tmp_path / "runs" / ".proc.partial" / "checkpoints" / "step_000004" / "state.json").write_text("{}")
    assert rundir.describe(run, empty) == (
        f"{run} is unchanged: it holds no run, as when this launcher started; the interrupted run's "
        f"checkpoints are in {tmp_path / 'runs' / '.proc.partial'} (--resume continues from them)"
    )
