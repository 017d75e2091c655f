"""Launchers: how ranks start. They differ only in that; every rank runs `rank_main`.

    run_single(spec)                               # one rank in this process
    run_threads(spec, world, timeout_s)            # one OS thread per rank in this process
    run_proc_rank(spec, timeout_s, grad_sync)      # the body of one torchrun worker (rank from its env)

The command line is pipeline/train.py (`python -m pipeline.train single|thread|proc`), which starts
torchrun for the proc launcher, single-node or multi-node (docs/ddp-parity.md).

A rank that raises, or a collective that times out, makes the launcher exit non-zero with a
message naming the rank and the error; no thread or process is left waiting.

Nothing is touched before the inputs are validated and loaded; a run trains in a staging
directory that replaces the run directory only when it succeeds (xtrain.core.rundir).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from contracts.errors import XtrainError, moved, one_line
from params.config import LaunchConfig, check_world
from xtrain.core import determinism, proctree, rundir
from xtrain.core.comm import (
    Communicator,
    PeerFailed,
    ProcComm,
    SingleComm,
    ThreadComm,
    ThreadGroup,
    cuda_device,
)
from xtrain.core.data import TokenData
from xtrain.core.env import fingerprint
from xtrain.core.launch_plan import RunSpec
from xtrain.core.model import build_model
from xtrain.core.train import RankResult, metrics_dict, train_rank, write_metrics


class RankFailed(XtrainError, RuntimeError):
    """A rank's failure; `run`: the index of the run that failed when a launcher trains several
    (run_proc_many), else None."""

    def __init__(
        self, rank: int, error: BaseException, tb: str = "", note: str = "", run: int | None = None
    ) -> None:
        self.rank, self.error, self.tb, self.run = rank, error, tb, run
        tail = f"; {note}" if note else ""
        super().__init__(f"rank {rank} failed: {type(error).__name__}: {one_line(error)}{tail}")


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
    cfg = spec.run.model
    model = build_model(cfg, spec.run.seed, comm.device)
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
def staged(spec: RunSpec, writer: bool, commit: bool = True, kept: bool | None = None) -> Iterator[RunSpec]:
    """The spec, writing into the staging directory; it replaces the run directory if the body succeeds
    (with commit=False the caller's launcher does that: xtrain/core/proctree.py).

    Only the writer (rank 0) creates, commits or discards it; the other ranks read it to resume.
    `kept` given: the launcher prepared it already (stage_launch) and says whether it holds an
    interrupted run's checkpoints.
    """
    if spec.run_dir is None:
        yield spec
        return
    if kept is None:
        kept = writer and rundir.resumes_partial(spec.run_dir, spec.resume)  # never discarded on failure
        staging = rundir.prepare(spec.run_dir, spec.resume) if writer else rundir.partial_dir(spec.run_dir)
    else:
        staging = rundir.partial_dir(spec.run_dir)
    start = rundir.latest_name(staging)
    try:
        yield dataclasses.replace(spec, run_dir=str(staging))
    except BaseException:
        if writer and not kept:
            rundir.discard_unless_progressed(staging, start)
        raise
    if writer and commit:
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

    threads_each = torch.get_num_threads()  # _prepare_process's share per rank

    def body(rank: int) -> None:
        try:
            torch.set_num_threads(threads_each)  # this rank's OpenMP team; the main thread has one thread
            with cuda_device(devices[rank]):
                results[rank] = target(spec, ThreadComm(group, rank, devices[rank]))
        except BaseException as e:
            failures.append((time.monotonic(), rank, e, traceback.format_exc()))
            group.abort(f"rank {rank} failed: {type(e).__name__}: {e}")

    threads = [
        threading.Thread(target=body, args=(r,), name=f"xtrain-rank{r}", daemon=True) for r in range(world)
    ]
    with determinism.serial_torch():
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
    kept: bool | None = None,
) -> Any:
    """Body of one torchrun worker: rank and world come from torchrun's environment; `kept`: see staged."""
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    check_world(spec.run.train, world, "torchrun --nproc-per-node (WORLD_SIZE)")
    device = device_for(spec.run.train.device, local_rank)
    spec = _prepare_process(spec, device, local_world)
    commit = not proctree.launcher_commits()
    with staged(spec, writer=rank == 0, commit=commit, kept=kept) as spec, cuda_device(device):
        comm = ProcComm(rank, world, device, timeout_s, grad_sync)
        comm.barrier()  # rank 0 has prepared the staging directory before anyone reads it
        try:
            result = target(spec, comm)
        except Exception as e:
            raise RankFailed(rank, e, traceback.format_exc(), comm.laggards()) from e
        # Only a healthy group is torn down: destroying one whose peer hung blocks forever.
        comm.close()
        return result


def run_proc_many(
    specs: list[RunSpec],
    timeout_s: float,
    grad_sync: str,
    started: Callable[[int], None] | None = None,
) -> None:
    """One torchrun worker training several runs in turn over one process group (the pilot stage:
    one torchrun start for every cell instead of one per run). `started(i)` is called before run i;
    a run that fails raises RankFailed with `run` = i."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    device = device_for(specs[0].run.train.device, local_rank)
    comm: ProcComm | None = None
    with cuda_device(device):
        for i, spec in enumerate(specs):
            if started is not None:
                started(i)
            check_world(spec.run.train, world, "torchrun --nproc-per-node (WORLD_SIZE)")
            spec = _prepare_process(spec, device, local_world)
            if device.type == "cuda":  # each run's own peak (the recompute cell compares them)
                torch.cuda.reset_peak_memory_stats(device)
            comm = comm or ProcComm(rank, world, device, timeout_s, grad_sync)
            with staged(spec, writer=rank == 0) as staged_spec:
                comm.barrier()  # rank 0 has prepared the staging directory before anyone reads it
                try:
                    rank_main(staged_spec, comm)
                except Exception as e:
                    raise RankFailed(rank, e, traceback.format_exc(), comm.laggards(), run=i) from e
            comm.barrier()  # rank 0 has committed the run before the next one starts
    if comm is not None:
        comm.close()


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


def run_local(spec: RunSpec, launcher: str, cfg: LaunchConfig, world: int | None = None) -> None:
    """The single or thread launcher in this process; `world` overrides launchers.thread.world."""
    if launcher == "single":
        run_single(spec)
    else:
        run_threads(spec, cfg.thread_world if world is None else world, cfg.timeout_s)


if __name__ == "__main__":  # the command line is pipeline/train.py
    moved(__spec__.name, "pipeline/train.py")
