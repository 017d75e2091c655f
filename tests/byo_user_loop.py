"""A user's own training script (not the project's examples), recorded with runrecord: a small GPT with
dropout, SGD with momentum, a LambdaLR warm-up, a hand-rolled gradient all-reduce (or torch DDP), run
on one device or under torchrun (CPU, gloo). tests/process/test_byo_dropout.py drives it with the classic DDP
mistakes planted one at a time (`mistake`) and the controls that must pass.

    python byo_user_loop.py --tokens T --vocab-size V --runs runs.json
    torchrun --nproc-per-node 2 byo_user_loop.py --tokens T --vocab-size V --runs runs.json

runs.json: a list of runs, each {"run_dir": ..., and any of OPTIONS}; one process trains them in turn
(one torchrun start for many runs keeps the test fast; each run is what a user's script would do).
"""

from __future__ import annotations

import argparse
import json
import math
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from runrecord import RunRecorder

OPTIONS = {
    "steps": 8,
    "eval_every": 4,
    "global_batch": 8,
    "seq_len": 16,
    "lr": 0.05,
    "dropout": 0.1,
    "grad_accum": 1,
    "ddp": "hand",  # hand: all-reduce the gradients ourselves; torch: DistributedDataParallel
    "threads": 1,
    "eval_batch": 4,
    "eval_rows": 8,
    "dropout_mode": "seed",
    "mistake": None,
    "eval_rank0": False,  # evaluate on rank 0 alone, all of the eval rows (nanoGPT's estimate_loss)
    "eval_at": None,  # the steps to evaluate at (any steps); None: where rec.eval_due says
    "old_eval_rule": False,  # a negative control: runrecord 1.3's finish(), every rank's evals the cadence's
}
MISTAKES = (
    "no_sampler",  # every rank reads the first rows of the batch (no DistributedSampler)
    "rank_init_seed",  # torch.manual_seed(seed + rank) before init, no broadcast
    "rank0_loss",  # logs rank 0's loss instead of the mean over ranks
    "accum_one_side",  # gradient accumulation 2 under torchrun only
    "sched_twice",  # rank 1 steps the LR scheduler twice
    "accum_undivided",  # the micro-batch loss not divided by grad_accum (both sides)
    "eval_mode",  # model.eval() for the step-0 evaluation, never model.train() again
    "eval_pad",  # an eval set that does not divide by the world, padded by repeating rows
)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, p: float) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.attn_drop, self.resid_drop = nn.Dropout(p), nn.Dropout(p)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(p))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        y = (self.attn_drop(att) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.resid_drop(self.proj(y))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, dim: int, seq: int, p: float) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.drop = nn.Dropout(p)
        self.blocks = nn.Sequential(Block(dim, 2, p), Block(dim, 2, p))
        self.head = nn.Linear(dim, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(self.tok(x) + self.pos(torch.arange(x.shape[1])))
        return self.head(self.blocks(h))


def windows(tokens: torch.Tensor, ids: list[int], seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = torch.stack([tokens[i * seq : i * seq + seq + 1] for i in ids]).long()
    return rows[:, :-1], rows[:, 1:]


def evaluate(model: nn.Module, val: torch.Tensor, o: dict, world: int, rank: int) -> float:
    """Each rank evaluates its shard of the eval rows; the mean over every token, all-reduced."""
    model.eval()
    rows = list(range(o["eval_rows"]))
    mine = rows[rank::world]
    if o["mistake"] == "eval_pad" and world > 1:  # pad every shard to one length, repeating a row
        mine = (mine + mine)[: math.ceil(len(rows) / world)]
    total = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for i in range(0, len(mine), o["eval_batch"]):
            x, y = windows(val, mine[i : i + o["eval_batch"]], o["seq_len"])
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum")
            total += torch.tensor([loss.item(), y.numel()], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(total)
    if o["mistake"] != "eval_mode":
        model.train()
    return float(total[0] / total[1])


def train(o: dict, tokens: dict, vocab: int, world: int, rank: int) -> None:
    torch.set_num_threads(o["threads"])
    accum = 2 if o["mistake"] == "accum_one_side" and world > 1 else o["grad_accum"]
    torch.manual_seed(1234 + (rank if o["mistake"] == "rank_init_seed" else 0))
    model = TinyGPT(vocab, 32, o["seq_len"], o["dropout"])
    config = {
        "seed": 1234,
        "model": {"kind": "TinyGPT", "dim": 32, "layers": 2, "heads": 2, "dropout": o["dropout"]},
        "train": {k: o[k] for k in ("steps", "eval_every", "global_batch", "seq_len", "lr")}
        | {"grad_accum": accum, "momentum": 0.9, "warmup": 2, "decay": 0.8},
    }
    rec = RunRecorder(  # runrecord: before DDP wraps the model (it seeds the model's dropout)
        config,
        tokens_per_step=o["global_batch"] * o["seq_len"],
        model=model,
        dropout=o["dropout_mode"],
        run_dir=o["run_dir"],
    )
    if o["old_eval_rule"]:
        plant_old_eval_rule(rec)
    net = nn.parallel.DistributedDataParallel(model) if o["ddp"] == "torch" and world > 1 else model
    opt = torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=0.9)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2) * 0.8**s)
    n_windows = (tokens["train"].numel() - 1) // o["seq_len"]
    if due(o, rec, 0):
        validate(rec, 0, model, tokens["val"], o, world, rank)
    for step in range(o["steps"]):
        gen = torch.Generator().manual_seed(1234 * 1000 + step)
        batch = torch.randint(0, n_windows, (o["global_batch"],), generator=gen).tolist()
        mine = batch[: len(batch) // world] if o["mistake"] == "no_sampler" else batch[rank::world]
        lr = sched.get_last_lr()[0]
        loss_sum = train_step(net, model, opt, tokens["train"], mine, accum, o, rec, world)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if o["mistake"] == "sched_twice" and rank == 1:
            sched.step()
        mean = torch.tensor([loss_sum])
        if world > 1 and o["mistake"] != "rank0_loss":
            dist.all_reduce(mean)
            mean /= world
        rec.step(mean.item(), norm.item(), lr)  # runrecord: mean loss over ranks, norm before clipping
        if due(o, rec, step + 1):
            validate(rec, step + 1, model, tokens["val"], o, world, rank)
    rec.finish()  # runrecord: every rank; rank 0 writes the run folder


def plant_old_eval_rule(rec: RunRecorder) -> None:
    """runrecord 1.3's finish() re-planted: every rank must hold the evals train.eval_every implies."""
    from params.cadence import eval_steps
    from runrecord import RunRecordError

    complete = rec._refuse_incomplete

    def refuse() -> None:
        complete()
        want, got = eval_steps(rec.config["train"]), [e["step"] for e in rec.evals]
        if got != want:
            raise RunRecordError(
                "finish", "eval", f"evals at steps {got}", f"train.eval_every implies {want}"
            )

    rec._refuse_incomplete = refuse  # type: ignore[method-assign]


def due(o: dict, rec: RunRecorder, done: int) -> bool:
    return done in o["eval_at"] if o["eval_at"] is not None else rec.eval_due(done)


def validate(rec: RunRecorder, done: int, model, val, o: dict, world: int, rank: int) -> None:
    """Every rank its shard (all-reduced), or rank 0 alone all of the rows, and rec.eval there."""
    if not o["eval_rank0"]:
        rec.eval(done, evaluate(model, val, o, world, rank))  # runrecord
    elif rank == 0:
        rec.eval(done, evaluate(model, val, o, 1, 0))  # runrecord: on rank 0 only


def train_step(net, model, opt, tokens, mine, accum, o, rec, world) -> float:
    opt.zero_grad()
    total, size = 0.0, len(mine) // accum
    for i in range(accum):
        chunk = mine[i * size : (i + 1) * size]
        rec.samples(chunk)  # runrecord: the dataset indices of this micro-batch, before its forward
        x, y = windows(tokens, chunk, o["seq_len"])
        loss = F.cross_entropy(net(x).flatten(0, 1), y.flatten())
        (loss if o["mistake"] == "accum_undivided" else loss / accum).backward()
        total += loss.item() / accum
    if o["ddp"] == "hand" and world > 1:
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", required=True)
    p.add_argument("--vocab-size", type=int, required=True)
    p.add_argument("--runs", required=True, help="a JSON list of runs: {run_dir, options...}")
    a = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    tokens = load_file(a.tokens)
    with open(a.runs) as f:
        runs = json.load(f)
    for run in runs:
        options = {**OPTIONS, **run}
        assert options["mistake"] in (None, *MISTAKES), options["mistake"]
        train(options, tokens, a.vocab_size, world, rank)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
