"""Launchers: how ranks start. They differ only in that; every rank runs `rank_main`.

    python -m xtrain.launch single [--run-dir runs/single]
    python -m xtrain.launch thread --world 2
    torchrun --standalone --nproc-per-node 2 -m xtrain.launch proc

Multi-node (the proc launcher, unchanged code):
    torchrun --nnodes 2 --node-rank {0,1} --nproc-per-node 8 --rdzv-backend c10d \
             --rdzv-endpoint HOST:29500 --rdzv-id JOB -m xtrain.launch proc

A rank that raises, or a collective that times out, makes the launcher exit non-zero with a
message naming the rank and the error; no thread or process is left waiting.

Nothing is touched before the inputs are validated and loaded; a run trains in a staging
directory that replaces the run directory only when it succeeds (xtrain.rundir).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from contracts.errors import XtrainError, debug, one_line, report
from contracts.validate import ValidationError
from xtrain import determinism, rundir
from xtrain.cli import add_params_args
from xtrain.comm import Communicator, PeerFailed, ProcComm, SingleComm, ThreadComm, ThreadGroup, cuda_device
from xtrain.config import Params, check_world, load_params
from xtrain.data import TokenData
from xtrain.env import fingerprint
from xtrain.model import build_model
from xtrain.tokenizer import load_tokenizer
from xtrain.train import RankResult, RunSpec, metrics_dict, train_rank, write_metrics

LAUNCHERS = ("single", "thread", "proc")


class RankFailed(XtrainError, RuntimeError):
    def __init__(self, rank: int, error: BaseException, tb: str = "", note: str = "") -> None:
        self.rank, self.error, self.tb = rank, error, tb
        tail = f"; {note}" if note else ""
        super().__init__(f"rank {rank} failed: {type(error).__name__}: {one_line(error)}{tail}")


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


def device_for(kind: str, local_rank: int) -> torch.device:
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("train.device is cuda but torch.cuda.is_available() is False")
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"rank {local_rank} needs cuda:{local_rank} but only "
                f"{torch.cuda.device_count()} CUDA device(s) are visible"
            )
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def rank_main(spec: RunSpec, comm: Communicator) -> RankResult:
    """Build the model from the seed on this rank's device and train it; rank 0 writes metrics."""
    model = build_model(spec.run.model, spec.run.seed, comm.device)
    data = TokenData.load(spec.tokens_path, comm.device)
    result = train_rank(comm, model, data, spec)
    if comm.rank == 0 and spec.run_dir is not None:
        write_metrics(Path(spec.run_dir), metrics_dict(spec, result, model))
    return result


def _prepare_process(spec: RunSpec, device: torch.device, ranks_on_host: int) -> RunSpec:
    """Process-wide settings (threads, deterministic algorithms) and the env fingerprint."""
    t = spec.run.train
    threads = determinism.threads_per_rank(t.cpu_threads, ranks_on_host)
    determinism.set_cpu_threads(threads)
    applied = determinism.configure(t.deterministic, device.type)
    determinism.seed_everything(spec.run.seed)
    env = fingerprint(device, threads, t.precision)
    return RunSpec(**{**spec.__dict__, "env": env, "determinism": applied})


@contextlib.contextmanager
def staged(spec: RunSpec, writer: bool) -> Iterator[RunSpec]:
    """The spec, writing into the staging directory; it replaces the run directory if the body succeeds.

    Only the writer (rank 0) creates, commits or discards it; the other ranks read it to resume.
    """
    if spec.run_dir is None:
        yield spec
        return
    staging = rundir.prepare(spec.run_dir, spec.resume) if writer else rundir.partial_dir(spec.run_dir)
    start = rundir.latest_name(staging)
    try:
        yield dataclasses.replace(spec, run_dir=str(staging))
    except BaseException:
        if writer:
            rundir.discard_unless_progressed(staging, start)
        raise
    if writer:
        rundir.commit(staging, spec.run_dir)


def run_single(spec: RunSpec) -> RankResult:
    device = device_for(spec.run.train.device, 0)
    spec = _prepare_process(spec, device, 1)
    with staged(spec, writer=True) as spec, cuda_device(device):
        return rank_main(spec, SingleComm(device))


def run_threads(
    spec: RunSpec, world: int, timeout_s: float, target: Callable[[RunSpec, Communicator], Any] = rank_main
) -> list[Any]:
    """One OS thread per rank in this process; the first real failure is raised as RankFailed."""
    check_world(spec.run.train, world, "--world")
    devices = [device_for(spec.run.train.device, r) for r in range(world)]
    spec = _prepare_process(spec, devices[0], world)
    with staged(spec, writer=True) as spec:
        return _thread_ranks(spec, world, timeout_s, devices, target)


def _thread_ranks(
    spec: RunSpec,
    world: int,
    timeout_s: float,
    devices: list[torch.device],
    target: Callable[[RunSpec, Communicator], Any],
) -> list[Any]:
    group = ThreadGroup(world, timeout_s)
    results: list[Any] = [None] * world
    failures: list[tuple[float, int, BaseException, str]] = []

    def body(rank: int) -> None:
        try:
            with cuda_device(devices[rank]):
                results[rank] = target(spec, ThreadComm(group, rank, devices[rank]))
        except BaseException as e:
            failures.append((time.monotonic(), rank, e, traceback.format_exc()))
            group.abort(f"rank {rank} failed: {type(e).__name__}: {e}")

    threads = [
        threading.Thread(target=body, args=(r,), name=f"xtrain-rank{r}", daemon=True) for r in range(world)
    ]
    for th in threads:
        th.start()
    # Wait for every rank; once one has failed, give the others a grace period to reach a
    # collective and stop, then leave (daemon threads never keep the process alive).
    grace_deadline: float | None = None
    while any(th.is_alive() for th in threads):
        for th in threads:
            th.join(timeout=0.2)
        if failures and grace_deadline is None:
            grace_deadline = time.monotonic() + min(10.0, timeout_s)
        if grace_deadline is not None and time.monotonic() > grace_deadline:
            break
    if failures:
        failures.sort(key=lambda f: (isinstance(f[2], PeerFailed), f[0]))  # root cause first
        _, rank, err, tb = failures[0]
        raise RankFailed(rank, err, tb)
    return results


def run_proc_rank(
    spec: RunSpec,
    timeout_s: float,
    grad_sync: str,
    target: Callable[[RunSpec, Communicator], Any] = rank_main,
) -> Any:
    """Body of one torchrun worker: rank and world come from torchrun's environment."""
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    check_world(spec.run.train, world, "torchrun --nproc-per-node (WORLD_SIZE)")
    device = device_for(spec.run.train.device, local_rank)
    spec = _prepare_process(spec, device, local_world)
    with staged(spec, writer=rank == 0) as spec, cuda_device(device):
        comm = ProcComm(rank, world, device, timeout_s, grad_sync)
        comm.barrier()  # rank 0 has prepared the staging directory before anyone reads it
        try:
            result = target(spec, comm)
        except Exception as e:
            raise RankFailed(rank, e, traceback.format_exc(), comm.laggards()) from e
        # Only a healthy group is torn down: destroying one whose peer hung blocks forever.
        comm.close()
        return result


def die_with_parent() -> None:
    """A torchrun worker (its own session) must not outlive its agent: SIGKILL when the parent dies.

    PR_SET_PDEATHSIG on Linux; elsewhere a thread that watches the parent id.
    """
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0) == 0:  # PR_SET_PDEATHSIG
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
            return

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="xtrain-parent-watch", daemon=True).start()


def build_spec(
    params: Params, launcher: str, run_dir: str | None, tokens: str, tokenizer: str | None, resume: bool
) -> RunSpec:
    """Validate and load every input (tokenizer, tokens, their fit to seq_len) before anything is touched."""
    vocab = load_tokenizer(str(tokenizer)).get_vocab_size()
    run = params.run_config(vocab)
    TokenData.load(tokens, "cpu").require_fit(run.train.seq_len, tokens)
    return RunSpec(
        run=run,
        tokens_path=tokens,
        launcher=launcher,
        run_dir=run_dir,
        tokenizer_path=tokenizer,
        resume=resume,
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m xtrain.launch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("launcher", choices=LAUNCHERS)
    add_params_args(ap)
    ap.add_argument("--run-dir", default=None, help="default: runs/<launcher>")
    ap.add_argument(
        "--world", type=int, default=None, help="thread launcher: ranks (default: launchers.thread.world)"
    )
    ap.add_argument("--tokens", default="data/tokens.safetensors")
    ap.add_argument("--tokenizer", default="data/tokenizer.json")
    ap.add_argument("--resume", action="store_true", help="continue from <run-dir>/checkpoints/latest")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.launcher == "proc":
        return proc_main(args)
    try:
        params = load_params(args.params, args.overrides)
        spec = build_spec(
            params,
            args.launcher,
            args.run_dir or f"runs/{args.launcher}",
            args.tokens,
            args.tokenizer,
            args.resume,
        )
        launchers = params["launchers"]
        if args.launcher == "single":
            run_single(spec)
        else:
            world = launchers["thread"]["world"] if args.world is None else args.world
            run_threads(spec, world, launchers["timeout_s"])
    except RankFailed as e:
        if debug():
            print(e.tb, file=sys.stderr, end="")
        return report(e)
    except (XtrainError, OSError) as e:
        return report(e)
    return 0


def proc_main(args: argparse.Namespace) -> int:
    """A torchrun worker: dies with its agent; a failure is one line naming the rank, then a hard exit."""
    if "RANK" not in os.environ:
        raise SystemExit(
            "error: the proc launcher runs under torchrun: "
            "torchrun --standalone --nproc-per-node N -m xtrain.launch proc"
        )
    die_with_parent()
    rank = int(os.environ["RANK"])
    try:
        params = load_params(args.params, args.overrides)
        spec = build_spec(
            params, "proc", args.run_dir or "runs/proc", args.tokens, args.tokenizer, args.resume
        )
        launchers = params["launchers"]
        run_proc_rank(spec, launchers["timeout_s"], launchers["grad_sync"])
    except ValidationError as e:  # the same on every rank: rank 0 says it
        code = report(e) if rank == 0 else e.exit_code
        os._exit(code)
    except (XtrainError, OSError) as e:
        code = report(e, prefix="" if isinstance(e, RankFailed) else f"rank {rank}: ")
        sys.stdout.flush()
        # Leave now: interpreter shutdown would wait on the broken process group's threads.
        os._exit(code)
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
