"""What a launcher resolves before any rank starts, without importing torch: the validated run
(RunSpec), the torchrun command, and the launch file from which a proc launcher's workers read the
resolved run instead of argv and params.yaml.

torch is the ranks' business: the proc launcher's own process (pipeline/train.py) and the scaling and
pilot parents that start torchrun import only this, so a torchrun launch starts with two interpreters'
torch imports in series (agent, then worker), not three (2.5 CPU-s each on a 2-core Xeon;
docs/performance.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts import outputs
from contracts.fileio import atomic_write_json
from contracts.validate import ValidationError, load_json
from params.config import LaunchConfig, Params, RunConfig
from xtrain.core import rundir
from xtrain.core.tokenizer import load_token_arrays, load_tokenizer, require_fit, require_ids

LAUNCHERS = ("single", "thread", "proc")
LAUNCH_ENV = "XTRAIN_LAUNCH_FILE"  # a worker of our proc launcher: where its resolved run is
LAUNCH_FORMAT = "xtrain-launch/1"
# the RunSpec fields a launch file carries (stage_launch writes them, read_launch reads them back)
SPEC_KEYS = ("tokens_path", "launcher", "run_dir", "tokenizer_path", "resume")


@dataclass(frozen=True)
class RunSpec:
    """Everything a rank needs to run, identical on every rank."""

    run: RunConfig
    tokens_path: str
    launcher: str
    run_dir: str | None = None  # None: write nothing (tests, benchmarks)
    tokenizer_path: str | None = None
    resume: bool = False
    env: dict[str, Any] = field(default_factory=dict)
    determinism: dict[str, Any] = field(default_factory=dict)
    stop_after: int | None = None  # stop after this step's checkpoint, as if killed (the pilot's resume cell)
    checkpoints: bool = True  # False: no checkpoint is written or resumed (the pilot's other cells)


def torchrun_cmd(nproc: int, module: str, *args: str) -> list[str]:
    """A one-node torchrun invocation of `python -m module args` with `nproc` workers, no restarts."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValidationError("torchrun", "--nproc-per-node", f"{nproc!r} is invalid", "an integer >= 1")
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        "--max-restarts",
        "0",
        "-m",
        module,
        *args,
    ]


def require_cuda(source: str) -> None:
    """A CUDA run on a machine that shows no CUDA device: one line, before anything is touched."""
    import torch  # only a CUDA run pays for torch here; its ranks import it anyway

    if not torch.cuda.is_available():
        raise ValidationError(source, "train.device", "cuda, but no CUDA device is visible", "cpu here")


def build_spec(
    params: Params, launcher: str, run_dir: str | None, tokens: str, tokenizer: str | None, resume: bool
) -> RunSpec:
    """Validate and load every input (tokenizer, tokens, their fit to seq_len) before anything is touched."""
    vocab = load_tokenizer(str(tokenizer)).get_vocab_size()
    run = params.run_config(vocab)
    if run.train.device == "cuda":
        require_cuda(params.source)
    splits = load_token_arrays(tokens)
    require_fit(splits, run.train.seq_len, tokens)
    require_ids(splits, vocab, tokens, str(tokenizer))
    return RunSpec(
        run=run,
        tokens_path=tokens,
        launcher=launcher,
        run_dir=run_dir,
        tokenizer_path=tokenizer,
        resume=resume,
    )


def stage_launch(spec: RunSpec, cfg: LaunchConfig) -> Path:
    """The proc launcher resolves once: it prepares the staging directory and writes the resolved run
    there (outputs.LAUNCH_FILE), and its torchrun workers read that instead of argv and params.yaml."""
    assert spec.run_dir is not None
    kept = rundir.resumes_partial(spec.run_dir, spec.resume)  # before prepare: an interrupted run's
    path = rundir.prepare(spec.run_dir, spec.resume) / outputs.LAUNCH_FILE
    record = {
        "format": LAUNCH_FORMAT,
        "run": spec.run.to_dict(),
        "config_hash": spec.run.config_hash(),
        "launch": dataclasses.asdict(cfg),
        "kept": kept,
        **{k: getattr(spec, k) for k in SPEC_KEYS},
    }
    atomic_write_json(path, record)
    return path


def read_launch(path: str | Path) -> tuple[LaunchConfig, RunSpec, bool]:
    """A worker's view of stage_launch's file: the launch settings, the run spec and `kept`."""
    d = load_json(str(path))
    if not isinstance(d, dict) or d.get("format") != LAUNCH_FORMAT:
        raise ValidationError(
            str(path), "format", f"not a launch file ({LAUNCH_FORMAT})", "written by pipeline/train.py"
        )
    run = RunConfig.from_dict(d["run"])
    if run.config_hash() != d["config_hash"]:  # the JSON round trip must keep the identity
        raise ValidationError(
            str(path), "config_hash", f"{d['config_hash']} read back as {run.config_hash()}"
        )
    spec = RunSpec(run=run, **{k: d[k] for k in SPEC_KEYS})
    return LaunchConfig(**d["launch"]), spec, bool(d["kept"])


def unstage_launch(path: Path) -> None:
    """After the tree: the launch file goes (a run holds only outputs), and with it a staging
    directory that holds nothing else (no worker got to train: as if nothing had been touched)."""
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: checkpoints to resume from, or the finished run
        path.parent.rmdir()
