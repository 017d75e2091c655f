"""A plain PyTorch loop (single device, or DDP under torchrun) recorded for the gates with runrecord.

    python train.py --tokens tokens.safetensors --vocab-size V --run-dir runs/single
    torchrun --nproc-per-node 2 train.py ... --run-dir runs/proc

The runrecord calls are marked `# runrecord`; everything else is an ordinary loop. Each step draws
the same seeded global batch of window indices on every rank and keeps rows i % world == rank. The
config holds what determines the numbers; its train.steps and train.eval_every are the run's shape
the gates check (evaluations at step 0, every eval_every steps and after the last: rec.eval_due).
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from runrecord import RunRecorder


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x)
        return self.head(h + self.mlp(h))


def windows(tokens: torch.Tensor, ids: list[int], seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = torch.stack([tokens[i * seq_len : i * seq_len + seq_len + 1] for i in ids]).long()
    return rows[:, :-1], rows[:, 1:]


def val_loss(model: nn.Module, tokens: torch.Tensor, seq_len: int) -> float:
    with torch.no_grad():
        vx, vy = windows(tokens, list(range(8)), seq_len)
        return F.cross_entropy(model(vx).flatten(0, 1), vy.flatten()).item()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, kind, default in (
        ("tokens", str, None),
        ("vocab-size", int, None),
        ("run-dir", str, None),
        ("steps", int, 12),
        ("global-batch", int, 8),
        ("seq-len", int, 32),
        ("lr", float, 1e-2),
        ("seed", int, 1234),
        ("eval-every", int, 4),
    ):
        p.add_argument(f"--{name}", type=kind, default=default, required=default is None)
    a = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    tokens = load_file(a.tokens)
    torch.manual_seed(a.seed)
    model = TinyLM(a.vocab_size, 32)
    n_windows = (tokens["train"].numel() - 1) // a.seq_len
    cfg = {
        "seed": a.seed,
        "model": {"kind": "TinyLM", "dim": 32, "vocab_size": a.vocab_size},
        "train": {
            "steps": a.steps,
            "eval_every": a.eval_every,
            "global_batch": a.global_batch,
            "seq_len": a.seq_len,
            "lr": a.lr,
        },
    }
    # runrecord: before DDP wraps the model (train mode per step, dropout seeded per sample)
    rec = RunRecorder(cfg, tokens_per_step=a.global_batch * a.seq_len, model=model, run_dir=a.run_dir)
    ddp = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    if rec.eval_due(0):  # runrecord: the validation loss before training
        rec.eval(0, val_loss(model, tokens["val"], a.seq_len))
    for step in range(a.steps):
        gen = torch.Generator().manual_seed(a.seed * 1000 + step)
        batch = torch.randint(0, n_windows, (a.global_batch,), generator=gen).tolist()
        mine = batch[rank::world]
        rec.samples(mine)  # runrecord: the dataset indices this rank consumes, before the forward
        x, y = windows(tokens["train"], mine, a.seq_len)
        loss = F.cross_entropy(ddp(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        mean = loss.detach().clone()
        if world > 1:
            dist.all_reduce(mean)
            mean /= world
        rec.step(mean.item(), norm.item(), a.lr)  # runrecord: mean loss over ranks, norm before clipping
        if rec.eval_due(step + 1):  # runrecord: every eval_every steps and after the last
            rec.eval(step + 1, val_loss(model, tokens["val"], a.seq_len))
    rec.finish()  # runrecord: every rank; rank 0 writes the run folder (metrics.json, final weights)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
