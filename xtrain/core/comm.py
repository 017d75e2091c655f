"""Communicators: how ranks exchange tensors. The train step is the same for all of them.

- `SingleComm`: world 1, every collective a no-op.
- `ThreadComm`: one process, one OS thread per rank. On CPU a reduction is a fixed-order sum,
  computed once (each rank sums one chunk) and copied to every rank, so ranks stay bit-identical.
  On CUDA it uses the single-process multi-GPU NCCL path (`torch.cuda.nccl`).
- `ProcComm`: one process per rank under torchrun (`torch.distributed`, gloo on CPU, NCCL on
  CUDA); gradients go through DistributedDataParallel or one flat all-reduce after backward.

A collective that does not complete within the timeout raises `CollectiveTimeout`; when a peer
thread fails, the others raise `PeerFailed` at their next collective instead of hanging.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import torch
from torch import nn


class CollectiveTimeout(RuntimeError):
    pass


class PeerFailed(RuntimeError):
    pass


class FlatGrads:
    """All gradients as views into one flat buffer: one collective per step, no copies."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        self.params = params
        total = sum(p.numel() for p in params)
        self.buffer = torch.zeros(total, device=params[0].device, dtype=params[0].dtype)
        offset = 0
        for p in params:
            p.grad = self.buffer[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    def zero_(self) -> None:
        self.buffer.zero_()


class Communicator:
    """Base: the collective primitives plus the gradient-sync hooks the train step calls."""

    uses_ddp = False

    def __init__(self, rank: int, world: int, device: torch.device) -> None:
        self.rank, self.world, self.device = rank, world, device

    # -- collectives (in place; every rank ends with identical values) --
    def all_reduce_sum_(self, tensors: list[torch.Tensor]) -> None:
        raise NotImplementedError

    def broadcast_(self, tensors: list[torch.Tensor], src: int = 0) -> None:
        raise NotImplementedError

    def barrier(self) -> None:
        raise NotImplementedError

    def all_reduce_mean_(self, tensors: list[torch.Tensor]) -> None:
        self.all_reduce_sum_(tensors)
        if self.world > 1:
            for t in tensors:
                t.div_(self.world)

    def gather_floats(self, value: float) -> list[float]:
        """Every rank's `value`, on every rank (float64)."""
        slots = torch.zeros(self.world, dtype=torch.float64, device=self.device)
        slots[self.rank] = value
        self.all_reduce_sum_([slots])
        return slots.tolist()

    # -- gradient synchronisation hooks --
    def wrap(self, model: nn.Module) -> nn.Module:
        """The module to call for training forwards (DDP wraps here)."""
        return model

    def no_sync(self, module: nn.Module) -> contextlib.AbstractContextManager[None]:
        """Context for micro-batches that must not synchronise gradients yet."""
        return contextlib.nullcontext()

    def sync_grads(self, grads: FlatGrads | None) -> None:
        """Average gradients over ranks after the last micro-batch (no-op under DDP)."""
        if grads is not None and self.world > 1:
            self.all_reduce_mean_([grads.buffer])

    def close(self) -> None:
        pass

    def progress(self, step: int) -> None:
        """Record that this rank reached `step`, so a hang can name the rank that never arrived."""

    def laggards(self) -> str:
        """After a failure: which ranks never reached the step the others are in ("" if unknown)."""
        return ""


class SingleComm(Communicator):
    def __init__(self, device: torch.device) -> None:
        super().__init__(0, 1, device)

    def all_reduce_sum_(self, tensors: list[torch.Tensor]) -> None:
        pass

    def broadcast_(self, tensors: list[torch.Tensor], src: int = 0) -> None:
        pass

    def barrier(self) -> None:
        pass


class ThreadGroup:
    """State shared by the rank threads of one process: a barrier, exchange slots, abort flag."""

    def __init__(self, world: int, timeout_s: float) -> None:
        self.world, self.timeout_s = world, timeout_s
        self._barrier = threading.Barrier(world)
        self.slots: list[list[torch.Tensor] | None] = [None] * world
        self.partials: list[list[torch.Tensor] | None] = [None] * world
        self.arrivals = [0] * world
        self.failure: str | None = None

    def abort(self, reason: str) -> None:
        """Release every rank waiting in (or later entering) a collective."""
        if self.failure is None:
            self.failure = reason
        self._barrier.abort()

    def wait(self, rank: int, what: str) -> None:
        self.arrivals[rank] += 1
        if self.failure is not None:
            raise PeerFailed(f"rank {rank}: stopped at {what} because {self.failure}")
        try:
            self._barrier.wait(timeout=self.timeout_s)
        except threading.BrokenBarrierError:
            if self.failure is not None:
                raise PeerFailed(f"rank {rank}: stopped at {what} because {self.failure}") from None
            behind = [r for r in range(self.world) if self.arrivals[r] < self.arrivals[rank]]
            reason = f"{what} did not complete within {self.timeout_s:g}s; ranks {behind} never arrived"
            self.abort(f"rank {rank}: {reason}")
            raise CollectiveTimeout(f"rank {rank}: {reason}") from None


class ThreadComm(Communicator):
    def __init__(self, group: ThreadGroup, rank: int, device: torch.device) -> None:
        super().__init__(rank, group.world, device)
        self.group = group

    def barrier(self) -> None:
        self.group.wait(self.rank, "barrier")

    def all_reduce_sum_(self, tensors: list[torch.Tensor]) -> None:
        if self.world == 1 and self.device.type != "cuda":
            return
        g = self.group
        g.slots[self.rank] = tensors
        g.wait(self.rank, "all_reduce")
        if self.device.type == "cuda":
            if self.rank == 0:  # one thread drives the single-process multi-GPU NCCL collective
                for i in range(len(tensors)):
                    torch.cuda.nccl.all_reduce([s[i] for s in g.slots])  # type: ignore[index]
        else:
            # Rank r sums chunk r of every tensor in rank order: each element is summed once, in a
            # fixed order, and the result is copied to all ranks.
            mine = []
            for i in range(len(tensors)):
                chunks = [s[i].view(-1).tensor_split(self.world)[self.rank] for s in g.slots]  # type: ignore[index]
                acc = chunks[0].clone()
                for c in chunks[1:]:
                    acc += c
                mine.append(acc)
            g.partials[self.rank] = mine
        g.wait(self.rank, "all_reduce")
        if self.device.type != "cuda":
            for i, t in enumerate(tensors):
                parts = t.view(-1).tensor_split(self.world)
                for r in range(self.world):
                    parts[r].copy_(g.partials[r][i])  # type: ignore[index]
            g.wait(self.rank, "all_reduce")  # partials are read before anyone reuses them

    def broadcast_(self, tensors: list[torch.Tensor], src: int = 0) -> None:
        if self.world == 1 and self.device.type != "cuda":
            return
        g = self.group
        g.slots[self.rank] = tensors
        g.wait(self.rank, "broadcast")
        if self.device.type == "cuda":
            if self.rank == 0:
                for i in range(len(tensors)):
                    torch.cuda.nccl.broadcast([s[i] for s in g.slots], root=src)  # type: ignore[index]
        elif self.rank != src:
            for t, s in zip(tensors, g.slots[src], strict=True):  # type: ignore[arg-type]
                t.copy_(s)
        g.wait(self.rank, "broadcast")


class ProcComm(Communicator):
    """One process per rank; torch.distributed initialised from torchrun's environment."""

    def __init__(self, rank: int, world: int, device: torch.device, timeout_s: float, grad_sync: str) -> None:
        import torch.distributed as dist

        super().__init__(rank, world, device)
        self.dist = dist
        self.backend = "nccl" if device.type == "cuda" else "gloo"
        # One rank has nothing to average: no DDP reducer, no gradient collective.
        self.uses_ddp = grad_sync == "ddp" and world > 1
        if not dist.is_initialized():
            kwargs = {"device_id": device} if device.type == "cuda" else {}
            dist.init_process_group(self.backend, timeout=timedelta(seconds=timeout_s), **kwargs)
        self.store = _progress_store()

    def progress(self, step: int) -> None:
        if self.store is not None:
            self.store.set(f"step/{self.rank}", str(step))

    def laggards(self) -> str:
        if self.store is None:
            return ""
        try:
            keys = [f"step/{r}" for r in range(self.world)]
            steps = [int(self.store.get(k)) if self.store.check([k]) else -1 for k in keys]
        except (RuntimeError, ValueError):  # the store went away with the job
            return ""
        front = max(steps)
        behind = [r for r, s in enumerate(steps) if s < front]
        if not behind:
            return ""
        last = ", ".join(
            f"rank {r} at step {steps[r]}" if steps[r] >= 0 else f"rank {r} never started" for r in behind
        )
        return f"ranks {behind} never arrived at step {front} (last seen: {last})"

    def all_reduce_sum_(self, tensors: list[torch.Tensor]) -> None:
        for t in tensors:
            self.dist.all_reduce(t)

    def broadcast_(self, tensors: list[torch.Tensor], src: int = 0) -> None:
        for t in tensors:
            self.dist.broadcast(t, src)

    def barrier(self) -> None:
        if self.backend == "nccl":
            self.dist.barrier(device_ids=[self.device.index])
        else:
            self.dist.barrier()

    def wrap(self, model: nn.Module) -> nn.Module:
        if not self.uses_ddp:
            return model
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [self.device.index] if self.device.type == "cuda" else None
        # The only buffers are the RoPE tables, identical on every rank: never broadcast them.
        buffers = [name for name, _ in model.named_buffers()]
        DDP._set_params_and_buffers_to_ignore_for_model(model, buffers)
        return DDP(model, device_ids=ids, gradient_as_bucket_view=True)

    def no_sync(self, module: nn.Module) -> contextlib.AbstractContextManager[None]:
        return module.no_sync() if self.uses_ddp else contextlib.nullcontext()  # type: ignore[operator]

    def sync_grads(self, grads: FlatGrads | None) -> None:
        if not self.uses_ddp:
            super().sync_grads(grads)

    def close(self) -> None:
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


def _progress_store() -> Any:
    """A client of torchrun's rendezvous store (MASTER_ADDR:MASTER_PORT), or None outside torchrun."""
    import torch.distributed as dist

    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port:
        return None
    store = dist.TCPStore(addr, int(port), is_master=False, timeout=timedelta(seconds=10))
    return dist.PrefixStore(f"xtrain-progress/{os.environ.get('TORCHELASTIC_RUN_ID', '')}/", store)


@contextlib.contextmanager
def cuda_device(device: torch.device) -> Iterator[None]:
    if device.type == "cuda":
        with torch.cuda.device(device):
            yield
    else:
        yield
