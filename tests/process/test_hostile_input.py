"""Hostile input: every bad input is one `error:` line naming the file (and key), a non-zero exit,
no traceback of ours, and nothing lost: the previous run stays byte-identical.

The catalogue below is issue #12's review, case by case, plus the classes the cases stand for.
Each runs the real command line (`pipeline.train`, `pipeline.config`) in-process or as a process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS, REPO, TinyData, tiny_cli
from pipeline.config import main as config_main
from pipeline.train import main as launch_main

# ---- a workspace: copies of the tiny inputs (so a case can break them) and a previous run ---------


@dataclass(frozen=True)
class Workspace:
    root: Path
    data: TinyData
    run_dir: Path


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def previous_run(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("previous") / "run"
    assert launch_main(["single", *tiny_cli(tiny_data, run_dir)]) == 0
    (run_dir / ".gitignore").write_text("/checkpoints\n/metrics.json\n")  # tracked in a real checkout
    return run_dir


@pytest.fixture()
def ws(tiny_data: TinyData, previous_run: Path, tmp_path: Path) -> Workspace:
    data = TinyData(
        tmp_path / "corpus.txt",
        tmp_path / "tokenizer.json",
        tmp_path / "tokens.safetensors",
        tiny_data.vocab_size,
    )
    for src, dst in zip(
        (tiny_data.text, tiny_data.tokenizer, tiny_data.tokens),
        (data.text, data.tokenizer, data.tokens),
        strict=True,
    ):
        shutil.copyfile(src, dst)
    shutil.copytree(previous_run, tmp_path / "run")
    return Workspace(tmp_path, data, tmp_path / "run")


def one_error_line(code: int, err: str) -> str:
    """The command failed with exactly one line on stderr, an `error:` line, and no traceback."""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code != 0
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def launch(ws: Workspace, capfd, *extra: str, launcher: str = "single") -> str:
    before = snapshot(ws.run_dir)
    args = [a for a in extra if a.startswith("--")]
    sets = [a for a in extra if not a.startswith("--")]
    code = launch_main([launcher, *tiny_cli(ws.data, ws.run_dir, *sets), *args])
    line = one_error_line(code, capfd.readouterr().err)
    assert snapshot(ws.run_dir) == before, "the failed run changed the previous run"
    return line


# ---- params: non-finite numbers, floats for integers, values that reach a command -----------------

PARAMS_CASES = [
    ("train.lr=nan", "train.lr: nan is not a finite number"),
    ("train.lr=inf", "train.lr: inf is not a finite number"),
    ("train.lr=-inf", "train.lr: -inf is not a finite number"),
    ("data.val_fraction=nan", "data.val_fraction: nan is not a finite number"),
    ("launchers.timeout_s=nan", "launchers.timeout_s: nan is not a finite number"),
    ("train.grad_clip=nan", "train.grad_clip: nan is not a finite number"),
    ("train.beta2=nan", "train.beta2: nan is not a finite number"),
    ("model.rope_theta=inf", "model.rope_theta: inf is not a finite number"),
    ("train.steps=1e2", "train.steps: 100.0 is a float, not an integer"),
    ("train.steps=160.0", "train.steps: 160.0 is a float, not an integer"),
    ("seed=1e3", "seed: 1000.0 is a float, not an integer"),
    ("train.global_batch=8.5", "train.global_batch: 8.5 is invalid (rule: type integer)"),
    ("launchers.proc.world=0", "launchers.proc.world: 0 is invalid (rule: >= 1)"),
    ("launchers.thread.world=2 --help; touch FILE", "launchers.thread.world"),
]


@pytest.mark.parametrize(("override", "expected"), PARAMS_CASES, ids=[c[0] for c in PARAMS_CASES])
def test_bad_params_are_one_line_and_lose_nothing(ws: Workspace, capfd, override: str, expected: str) -> None:
    line = launch(ws, capfd, override)
    assert expected in line and str(PARAMS) in line, line


def test_a_shell_command_as_world_in_the_params_file_is_refused_before_anything_runs(
    tmp_path: Path, capfd
) -> None:
    """The injection class: a value that would reach a command line must be validated first."""
    raw = yaml.safe_load(PARAMS.read_text())
    raw["launchers"]["proc"]["world"] = f"2 --help; touch {tmp_path / 'FILE'}; echo"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(raw))
    line = one_error_line(
        config_main(["--params", str(params), "get", "launchers.proc.world"]), capfd.readouterr().err
    )
    assert f"{params}: launchers.proc.world:" in line and "rule: type integer" in line, line
    assert not (tmp_path / "FILE").exists()


def test_torchrun_cmd_takes_only_a_positive_integer_world() -> None:
    from contracts.validate import ValidationError
    from xtrain.core.launch_plan import torchrun_cmd

    assert torchrun_cmd(2, "m")[5] == "2"
    for bad in (0, "2 --help", 2.0, True):
        with pytest.raises(ValidationError, match="--nproc-per-node"):
            torchrun_cmd(bad, "m")  # type: ignore[arg-type]


# ---- broken inputs: each names its file ------------------------------------------------------------


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def flip_byte(path: Path, offset: int = -3) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def tiny_tokens(ws: Workspace) -> None:
    import torch
    from safetensors.torch import save_file

    ids = torch.arange(14, dtype=torch.int32)
    save_file({"train": ids, "val": ids.clone()}, str(ws.data.tokens))


INPUT_CASES: list[tuple[str, Callable[[Workspace], None], tuple[str, ...], str]] = [
    (
        "truncated tokens",
        lambda w: truncate(w.data.tokens),
        (),
        "tokens.safetensors: not a valid safetensors",
    ),
    ("tokens are text", lambda w: w.data.tokens.write_text("hello"), (), "tokens.safetensors: not a valid"),
    ("tokens missing", lambda w: w.data.tokens.unlink(), (), "tokens.safetensors: token file not found"),
    (
        "garbage tokenizer",
        lambda w: w.data.tokenizer.write_text('{"a" 1}'),
        (),
        "tokenizer.json: not a valid",
    ),
    (
        "tokenizer missing",
        lambda w: w.data.tokenizer.unlink(),
        (),
        "tokenizer.json: tokenizer file not found",
    ),
    ("corpus too small", tiny_tokens, (), "train.seq_len: the train split has 14 tokens"),
    ("world 3 on a batch of 8", lambda w: None, ("--world=3",), "--world: 3 ranks cannot split"),
    ("world 0", lambda w: None, ("--world=0",), "--world: 0 ranks cannot split"),
]


@pytest.mark.parametrize(
    ("setup", "extra", "expected"), [c[1:] for c in INPUT_CASES], ids=[c[0] for c in INPUT_CASES]
)
def test_broken_inputs_name_the_file_and_lose_nothing(
    ws: Workspace, capfd, setup, extra, expected: str
) -> None:
    setup(ws)
    line = launch(ws, capfd, *extra, launcher="thread" if extra else "single")
    assert expected in line, line


# ---- damaged checkpoints: resume refuses them, naming the file -------------------------------------


def assert_no_staging_left(run_dir: Path) -> None:
    from xtrain.core.rundir import partial_dir

    assert not partial_dir(run_dir).exists()


def latest_checkpoint(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text().strip()


CHECKPOINT_CASES = [
    (
        "flipped byte in the weights",
        "model.safetensors",
        flip_byte,
        "model.safetensors: model_md5: content md5",
    ),
    ("truncated weights", "model.safetensors", truncate, "model.safetensors: model_md5: content md5"),
    (
        "flipped byte in the optimizer",
        "optimizer.safetensors",
        flip_byte,
        "optimizer.safetensors: optimizer_md5",
    ),
    ("weights missing", "model.safetensors", Path.unlink, "model.safetensors: missing"),
    (
        "state.json not JSON",
        "state.json",
        lambda p: p.write_text("{"),
        "state.json: line 1 column 2: not valid JSON",
    ),
]


@pytest.mark.parametrize(
    ("name", "damage", "expected"), [c[1:] for c in CHECKPOINT_CASES], ids=[c[0] for c in CHECKPOINT_CASES]
)
def test_resume_refuses_a_damaged_checkpoint(ws: Workspace, capfd, name: str, damage, expected: str) -> None:
    damage(latest_checkpoint(ws.run_dir) / name)
    line = launch(ws, capfd, "--resume")
    assert expected in line and "next:" in line, line
    assert_no_staging_left(ws.run_dir)


def test_the_recorded_md5_alone_is_not_trusted(ws: Workspace, capfd) -> None:
    """Weights and state.json changed together (md5 recomputed): the parameter digest still refuses it."""
    from safetensors.torch import load_file, save_file

    from contracts.fileio import md5_file

    ckpt = latest_checkpoint(ws.run_dir)
    tensors = load_file(str(ckpt / "model.safetensors"))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1e-3
    save_file(tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    state = json.loads((ckpt / "state.json").read_text())
    state["model_md5"] = md5_file(ckpt / "model.safetensors")
    (ckpt / "state.json").write_text(json.dumps(state))
    line = launch(ws, capfd, "--resume")
    assert "model.safetensors: param_digest: loaded weights digest" in line, line


def test_an_intact_checkpoint_resumes(ws: Workspace, capfd) -> None:
    """The positive control of the cases above: the same checkpoint, undamaged, is accepted."""
    code = launch_main(["single", *tiny_cli(ws.data, ws.run_dir), "--resume"])
    assert code == 0, capfd.readouterr().err
    assert json.loads((ws.run_dir / "metrics.json").read_text())["resumed_from_step"] == 12
    assert (ws.run_dir / ".gitignore").read_text() == "/checkpoints\n/metrics.json\n"  # carried over


# ---- faults while writing: a full disk is one line naming the file; the previous run survives ------


def test_a_write_that_fails_names_the_file_and_keeps_the_previous_run(ws: Workspace) -> None:
    """A real write failure (RLIMIT_FSIZE: the kernel refuses bytes past 20 kB, EFBIG), as a process."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    before = snapshot(ws.run_dir)
    cmd = [sys.executable, "-m", "pipeline.train", "single", *tiny_cli(ws.data, ws.run_dir)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, preexec_fn=limit, timeout=120)
    line = one_error_line(
        proc.returncode, "\n".join(x for x in proc.stderr.splitlines() if "[single" not in x)
    )
    assert "model.safetensors: cannot write: File too large (EFBIG)" in line, line
    assert snapshot(ws.run_dir) == before


def test_a_full_disk_names_the_file(tmp_path: Path) -> None:
    """ENOSPC on a real 64 kB tmpfs (needs mount rights; skipped where there are none)."""
    from contracts.errors import FileWriteError
    from contracts.fileio import atomic_write_bytes

    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        atomic_write_bytes(disk / "a.bin", b"previous")
        with pytest.raises(FileWriteError, match=r"a.bin: cannot write: No space left on device \(ENOSPC\)"):
            atomic_write_bytes(disk / "a.bin", b"x" * 200_000)
        assert (disk / "a.bin").read_bytes() == b"previous" and os.listdir(disk) == ["a.bin"]
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_the_traceback_is_there_with_xtrain_debug(ws: Workspace) -> None:
    cmd = [sys.executable, "-m", "pipeline.config", "--params", str(PARAMS), "show", "--set", "train.lr=nan"]
    quiet = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    loud = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "XTRAIN_DEBUG": "1"}
    )
    assert "Traceback" not in quiet.stderr and quiet.returncode == 2
    assert "Traceback" in loud.stderr and loud.returncode == 2
    assert loud.stderr.strip().splitlines()[-1] == quiet.stderr.strip()
