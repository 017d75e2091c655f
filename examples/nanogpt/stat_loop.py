"""nanoGPT's training arithmetic over its own model.py, small, for the statistical tier's campaign.

train.py's loop as upstream has it (seed 1337 + rank before init, the DDP wrap broadcasting rank 0's
weights, gradient_accumulation_steps divided by the world, `require_backward_grad_sync` on the last
micro-step only, the loss divided by the local accumulation, clipping at 1.0, AdamW from
`configure_optimizers` (fused on CUDA), warmup + cosine lr, bf16 autocast on CUDA), with the model's
dropout inside `scaled_dot_product_attention` left as torch draws it. Changed for the gate: the step's
global batch comes from a dedicated generator seeded from (seed, step) and each rank takes its share
(the same samples on every world size), the loss logged is the mean over ranks, evals run on every rank,
and the runrecord lines (RunRecorder(dropout="replicas"), reseed, samples, step, eval, finish).

One run is `train(job)` in a process (world from torch.distributed); `MISTAKES` plants one classic
DDP mistake on the DDP side.
"""

from __future__ import annotations

import math
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model import GPT, GPTConfig

from runrecord import RunRecorder

MISTAKES = ("none", "unsynced_gradients", "per_rank_init", "lr_ahead", "accum_undivided", "rank0_loss")
SIZES = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 64, "bias": False}
TRAIN = {"steps": 40, "eval_every": 10, "batch_size": 4, "gradient_accumulation_steps": 4, "lr": 3e-3}
TRAIN_ROWS, EVAL_ROWS = 60_000, 16
_CORPUS: dict[int, torch.Tensor] = {}


def corpus(vocab: int) -> torch.Tensor:
    """A fixed token stream a small model can learn: each token has 4 likely successors, 10 % noise."""
    if vocab not in _CORPUS:
        g = torch.Generator().manual_seed(0)
        succ = torch.randint(vocab, (vocab, 4), generator=g)
        pick, rand = (
            torch.randint(4, (TRAIN_ROWS,), generator=g),
            torch.randint(vocab, (TRAIN_ROWS,), generator=g),
        )
        noisy = (torch.rand(TRAIN_ROWS, generator=g) < 0.1).tolist()
        out, t = [0] * TRAIN_ROWS, 0
        for i, (p, r, n) in enumerate(zip(pick.tolist(), rand.tolist(), noisy, strict=True)):
            t = r if n else int(succ[t, p])
            out[i] = t
        _CORPUS[vocab] = torch.tensor(out)
    return _CORPUS[vocab]


def get_lr(it: int, lr: float, steps: int) -> float:
    """nanoGPT's schedule: linear warmup, cosine decay to lr / 10 at the last step."""
    warmup, min_lr = max(1, steps // 8), lr / 10
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    ratio = min(1.0, (it - warmup) / max(1, steps - warmup))
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def rows(
    data: torch.Tensor, offsets: torch.Tensor, block: int, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.stack([data[i : i + block] for i in offsets.tolist()])
    y = torch.stack([data[i + 1 : i + 1 + block] for i in offsets.tolist()])
    return x.to(device), y.to(device)


def global_batch(seed: int, step: int, count: int, limit: int) -> torch.Tensor:
    """The step's global batch offsets from a dedicated generator: the same on every world size."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    return torch.randint(limit, (count,), generator=g)


def config_of(job: dict[str, Any]) -> dict[str, Any]:
    train = {**TRAIN, **job.get("train", {})}
    return {"seed": job["seed"], "model": {**SIZES, "dropout": job["dropout"]}, "train": train}


def train(job: dict[str, Any]) -> dict[str, Any] | None:
    """One run: job = {seed, replica, mistake, dropout, device, run_dir, [train]}; rank 0 returns the record."""
    world, rank = (dist.get_world_size(), dist.get_rank()) if dist.is_initialized() else (1, 0)
    config, device, mistake = config_of(job), job["device"], job["mistake"]
    tr, cfg = config["train"], GPTConfig(**config["model"])
    bf16 = device == "cuda"
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else nullcontext()
    torch.manual_seed(1337 + rank)  # nanoGPT: seed 1337 + seed_offset
    raw = GPT(cfg).to(device)
    rec = RunRecorder(
        config,
        tr["batch_size"] * tr["gradient_accumulation_steps"] * cfg.block_size,
        precision="bf16" if bf16 else "fp32",
        model=raw,
        dropout="replicas",
        run_dir=job["run_dir"],
    )
    model = DDP(raw) if world > 1 else raw  # broadcasts rank 0's weights
    if mistake == "per_rank_init" and world > 1:  # each rank re-initialises after the wrap
        torch.manual_seed(1337 + rank)
        raw.load_state_dict(GPT(cfg).to(device).state_dict())
    optimizer = raw.configure_optimizers(0.1, tr["lr"], (0.9, 0.95), "cuda" if bf16 else "cpu")
    rec.reseed(job["replica"])  # init and data order fixed: only the kernel dropout differs now
    data = corpus(cfg.vocab_size)
    held = TRAIN_ROWS - 4 * cfg.block_size * EVAL_ROWS
    ev = rows(data, torch.arange(EVAL_ROWS) * 2 * cfg.block_size + held, cfg.block_size, device)

    def evaluate() -> float:
        model.eval()
        with torch.no_grad(), ctx:
            loss = raw(*ev)[1].item()
        model.train()
        return loss

    if rec.eval_due(0):
        rec.eval(0, evaluate())
    accum = tr["gradient_accumulation_steps"] // world  # nanoGPT divides it by the world size
    b = tr["batch_size"]
    for step in range(tr["steps"]):
        lr = get_lr(step + (1 if mistake == "lr_ahead" and rank == 1 else 0), tr["lr"], tr["steps"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        offsets = global_batch(
            job["seed"], step, b * tr["gradient_accumulation_steps"], held - cfg.block_size - 1
        )
        lossf = 0.0
        for micro in range(accum):
            mine = offsets[(rank * accum + micro) * b : (rank * accum + micro + 1) * b]
            rec.samples(mine)
            if world > 1:
                model.require_backward_grad_sync = micro == accum - 1 and mistake != "unsynced_gradients"
            with ctx:
                _, loss = model(*rows(data, mine, cfg.block_size, device))
            divide = 1 if (mistake == "accum_undivided" and rank == 1) else accum
            (loss / divide).backward()
            lossf += loss.item() / accum
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if world > 1 and mistake != "rank0_loss":
            t = torch.tensor([lossf], device=device)
            dist.all_reduce(t)
            lossf = t.item() / world
        rec.step(lossf, norm.item(), lr)
        if rec.eval_due(step + 1):
            rec.eval(step + 1, evaluate())
    return rec.finish(checkpoint=False)
