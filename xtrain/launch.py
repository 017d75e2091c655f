"""Launchers: how ranks start. They differ only in that; every rank runs `rank_main`.

    python -m xtrain.launch single [--run-dir runs/single]
    python -m xtrain.launch thread --world 2
    torchrun --standalone --nproc-per-node 2 -m xtrain.launch proc

Multi-node (the proc launcher, unchanged code):
    torchrun --nnodes 2 --node-rank {0,1} --nproc-per-node 8 --rdzv-backend c10d \
             --rdzv-endpoint HOST:29500 --rdzv-id JOB -m xtrain.launch proc

A rank that raises, or a collective that times out, makes the launcher exit non-zero with a
message naming the rank and the error; no thread or process is left waiting.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from xtrain import determinism
from xtrain.comm import Communicator, PeerFailed, ProcComm, SingleComm, ThreadComm, ThreadGroup, cuda_device
from xtrain.config import Params, load_params
from xtrain.data import TokenData
from xtrain.env import fingerprint
from xtrain.model import build_model
from xtrain.train import RankResult, RunSpec, metrics_dict, train_rank, write_metrics
from xtrain.validate import ValidationError

LAUNCHERS = ("single", "thread", "proc")


class RankFailed(RuntimeError):
    def __init__(self, rank: int, error: BaseException, tb: str = "") -> None:
        self.rank, self.error, self.tb = rank, error, tb
        super().__init__(f"rank {rank} failed: {type(error).__name__}: {error}")


def torchrun_cmd(nproc: int, module: str, *args: str) -> list[str]:
    """A one-node torchrun invocation of `python -m module args` with `nproc` workers, no restarts."""
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


def _fresh_run_dir(spec: RunSpec) -> None:
    if spec.run_dir is None or spec.resume:
        return
    run_dir = Path(spec.run_dir)
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    for name in ("metrics.json", "summary.json", "loss.csv", "eval.csv"):
        (run_dir / name).unlink(missing_ok=True)


def run_single(spec: RunSpec) -> RankResult:
    device = device_for(spec.run.train.device, 0)
    spec = _prepare_process(spec, device, 1)
    _fresh_run_dir(spec)
    with cuda_device(device):
        return rank_main(spec, SingleComm(device))


def run_threads(
    spec: RunSpec, world: int, timeout_s: float, target: Callable[[RunSpec, Communicator], Any] = rank_main
) -> list[Any]:
    """One OS thread per rank in this process; the first real failure is raised as RankFailed."""
    devices = [device_for(spec.run.train.device, r) for r in range(world)]
    spec = _prepare_process(spec, devices[0], world)
    _fresh_run_dir(spec)
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
    device = device_for(spec.run.train.device, local_rank)
    spec = _prepare_process(spec, device, local_world)
    if rank == 0:
        _fresh_run_dir(spec)
    with cuda_device(device):
        comm = ProcComm(rank, world, local_rank, device, timeout_s, grad_sync)
        comm.barrier()  # rank 0 has cleaned the run directory before anyone writes
        result = target(spec, comm)
        # Only a healthy group is torn down: destroying one whose peer hung blocks forever.
        comm.close()
        return result


def build_spec(
    params: Params, launcher: str, run_dir: str | None, tokens: str, tokenizer: str | None, resume: bool
) -> RunSpec:
    from tokenizers import Tokenizer

    if not Path(tokens).exists():
        raise ValidationError(
            tokens, "", "token file not found", "run the tokenizer stage first (dvc repro tokenizer)"
        )
    if tokenizer is None or not Path(tokenizer).exists():
        raise ValidationError(str(tokenizer), "", "tokenizer file not found", "run the tokenizer stage first")
    vocab = Tokenizer.from_file(tokenizer).get_vocab_size()
    return RunSpec(
        run=params.run_config(vocab),
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
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a params.yaml value (validated like the file)",
    )
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
    rank = int(os.environ.get("RANK", "0"))
    try:
        params = load_params(args.params, args.overrides)
        run_dir = args.run_dir or f"runs/{args.launcher}"
        spec = build_spec(params, args.launcher, run_dir, args.tokens, args.tokenizer, args.resume)
        launchers = params["launchers"]
        if args.launcher == "single":
            run_single(spec)
        elif args.launcher == "thread":
            run_threads(spec, args.world or launchers["thread"]["world"], launchers["timeout_s"])
        else:
            if "RANK" not in os.environ:
                raise SystemExit(
                    "the proc launcher runs under torchrun: "
                    "torchrun --standalone --nproc-per-node N -m xtrain.launch proc"
                )
            run_proc_rank(spec, launchers["timeout_s"], launchers["grad_sync"])
    except ValidationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RankFailed as e:
        print(e.tb, file=sys.stderr, end="")
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        if args.launcher == "proc":
            traceback.print_exc()
            print(f"error: rank {rank} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            sys.stdout.flush()
            # Leave now: interpreter shutdown would wait on the broken process group's threads.
            os._exit(1)
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
