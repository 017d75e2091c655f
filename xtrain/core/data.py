"""Token data and the seeded, sharded batch sampler.

Every rank draws the same global batch for a step (seeded from the step number) and keeps the
sequences with global index i % world == rank inside each micro-batch. The union over ranks is
the single-device batch, so averaged DDP gradients equal the single-device gradient up to float
summation order.

Each step also yields a fingerprint of the samples this rank consumed: the row count and the sum of
32-bit hashes of the rows' start offsets. Summed over ranks it is exact in float64 and independent
of order, so it equals the single-device step's fingerprint exactly when the ranks' shards are
disjoint and their union is the single-device batch (the loss_match gate checks this per step).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from xtrain.core.determinism import derive_seed
from xtrain.core.fingerprint import MAX_TERMS, hash32
from xtrain.core.tokenizer import load_tokens, require_fit


@dataclass
class TokenData:
    train: torch.Tensor  # int64 [N] on the rank's device
    val: torch.Tensor

    @classmethod
    def from_tensors(cls, train: torch.Tensor, val: torch.Tensor, device: torch.device | str) -> TokenData:
        return cls(train.to(device=device, dtype=torch.long), val.to(device=device, dtype=torch.long))

    @classmethod
    def load(cls, path: str, device: torch.device | str) -> TokenData:
        t = load_tokens(path)
        return cls.from_tensors(t["train"], t["val"], device)

    def splits(self) -> dict[str, torch.Tensor]:
        return {"train": self.train, "val": self.val}

    def require_fit(self, seq_len: int, source: str) -> None:
        require_fit(self.splits(), seq_len, source)


def sample_starts(n_tokens: int, seq_len: int, batch: int, seed: int) -> torch.Tensor:
    if n_tokens <= seq_len + 1:
        raise ValueError(f"split has {n_tokens} tokens, fewer than seq_len+1={seq_len + 1}")
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, n_tokens - seq_len - 1, (batch,), generator=g)


def gather(tokens: torch.Tensor, starts: torch.Tensor, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    if tokens.is_cuda:
        # Pinned + non_blocking: a pageable copy would wait for the GPU to drain every step.
        starts = starts.pin_memory().to(tokens.device, non_blocking=True)
    offsets = torch.arange(seq_len + 1, device=tokens.device)
    rows = tokens[starts[:, None] + offsets[None, :]]
    return rows[:, :-1], rows[:, 1:]


def shard_rows(global_rows: range, rank: int, world: int) -> list[int]:
    return [i for i in global_rows if i % world == rank]


@dataclass
class StepBatch:
    """This rank's part of one training step's global batch."""

    micro: list[tuple[torch.Tensor, torch.Tensor]]  # (inputs, targets) per micro-batch
    rows: list[list[int]]  # per micro-batch: the global batch indices of its rows (dropout masks)
    count: int  # rows consumed by this rank in this step
    hash_sum: int  # sum of hash32 over the start offsets of those rows


def step_batch(
    data: TokenData,
    seed: int,
    step: int,
    global_batch: int,
    grad_accum: int,
    seq_len: int,
    rank: int,
    world: int,
) -> StepBatch:
    """This rank's micro-batches of training step `step`, with their global rows and fingerprint."""
    if global_batch >= MAX_TERMS:
        raise ValueError(f"train.global_batch={global_batch}: the sample fingerprint needs < {MAX_TERMS}")
    starts = sample_starts(data.train.numel(), seq_len, global_batch, derive_seed(seed, "batch", step))
    per_micro = global_batch // grad_accum
    batch = StepBatch([], [], 0, 0)
    for m in range(grad_accum):
        keep = shard_rows(range(m * per_micro, (m + 1) * per_micro), rank, world)
        mine = starts[keep]
        offsets = mine.tolist()  # the fingerprint is taken from the very rows gathered below
        batch.micro.append(gather(data.train, mine, seq_len))
        batch.rows.append(keep)
        batch.count += len(offsets)
        batch.hash_sum += sum(hash32(o) for o in offsets)
    return batch


def micro_batches(
    data: TokenData,
    seed: int,
    step: int,
    global_batch: int,
    grad_accum: int,
    seq_len: int,
    rank: int,
    world: int,
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """This rank's (inputs, targets) for each micro-batch of training step `step`."""
    return step_batch(data, seed, step, global_batch, grad_accum, seq_len, rank, world).micro


def eval_batches(
    data: TokenData, seed: int, n_batches: int, global_batch: int, seq_len: int, rank: int, world: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Fixed validation batches (the same at every eval), sharded like training batches."""
    out = []
    for j in range(n_batches):
        starts = sample_starts(data.val.numel(), seq_len, global_batch, derive_seed(seed, "eval", j))
        out.append(gather(data.val, starts[shard_rows(range(global_batch), rank, world)], seq_len))
    return out
