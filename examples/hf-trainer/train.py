"""Train a tiny Qwen3 with transformers.Trainer and record the run for the gates (runrecord).

    python train.py --tokens data/tokens.safetensors --vocab-size V --run-dir runs/single
    torchrun --nproc-per-node 2 train.py ... --run-dir runs/proc      # the same global batch over 2 ranks

The global batch is fixed (`--global-batch`); each rank gets global_batch / world per step, so one
device and DDP consume the same samples per step. Every rank uses the same seed: Trainer seeds the
shared sampler, and DDP must not change what is sampled.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch.utils.data import Dataset
from transformers import Qwen3Config, Qwen3ForCausalLM, Trainer, TrainingArguments, default_data_collator

from runrecord import RunRecorder
from runrecord.hf import INDEX_KEY, IndexedCollator, RecordingCallback


class Chunks(Dataset):
    """Non-overlapping seq_len windows of a token stream, in one seeded order (shuffled once, here:
    Trainer's own random sampler seeds differently under torchrun than on one device, so one device
    and DDP would read other samples). `indexed` adds each window's index for the recorder."""

    def __init__(
        self,
        tokens: torch.Tensor,
        seq_len: int,
        indexed: bool,
        seed: int | None = None,
        limit: int | None = None,
    ) -> None:
        self.tokens, self.seq_len, self.indexed = tokens.long(), seq_len, indexed
        n = min(tokens.numel() // seq_len, limit or tokens.numel())
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        self.order = torch.randperm(n, generator=gen).tolist() if gen else list(range(n))

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: int) -> dict:
        w = self.order[i]
        x = self.tokens[w * self.seq_len : (w + 1) * self.seq_len]
        item = {"input_ids": x, "labels": x.clone()}
        if self.indexed:
            item[INDEX_KEY] = w
        return item


# DDP mistakes users make; the gates must fail each (tests/test_byo_trainer.py).
MISTAKES = {
    "eval_first": "trainer.evaluate() before train(): on CPU (transformers 5.24, accelerate 1.15) the model "
    "is then never wrapped in DDP and every rank trains alone",
    "whole_batch": "per-device batch = the global batch: every rank reads a whole batch (world x the samples)",
    "rank_seed": "a seed per rank: each rank shuffles the data its own way",
}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", required=True)
    p.add_argument("--vocab-size", type=int, required=True)
    p.add_argument("--run-dir", required=True)
    p.add_argument("--save", help="save_pretrained folder (rank 0)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--global-batch", type=int, default=8)
    p.add_argument("--grad-accum", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--eval-every", type=int, default=4)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--eval-chunks", type=int, default=32, help="validation windows per evaluation")
    p.add_argument(
        "--mistake", choices=sorted(MISTAKES), help="make a DDP mistake users make (negative controls)"
    )
    return p.parse_args()


def config(a: argparse.Namespace) -> dict:
    model = {
        "hidden_size": a.dim,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 2 * a.dim,
        "head_dim": a.dim // 4,
        "vocab_size": a.vocab_size,
        "max_position_embeddings": a.seq_len,
        "tie_word_embeddings": True,
    }
    train = {
        "steps": a.steps,
        "global_batch": a.global_batch,
        "grad_accum": a.grad_accum,
        "seq_len": a.seq_len,
        "lr": a.lr,
        "eval_every": a.eval_every,
        "schedule": "linear",
        "warmup_steps": 0,
    }
    return {"seed": a.seed, "model": model, "train": train}


def main() -> None:
    a = parse()
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    cfg = config(a)
    data_seed = a.seed + rank if a.mistake == "rank_seed" else a.seed
    cpu_ddp = world > 1 and not torch.cuda.is_available()
    per_device = a.global_batch // (a.grad_accum * (1 if a.mistake == "whole_batch" else world))
    tokens = load_file(a.tokens)
    torch.manual_seed(a.seed)
    model = Qwen3ForCausalLM(Qwen3Config(**cfg["model"]))
    args = TrainingArguments(
        output_dir=str(Path(a.run_dir).parent / f".{Path(a.run_dir).name}.trainer"),
        max_steps=a.steps,
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=a.grad_accum,
        learning_rate=a.lr,
        lr_scheduler_type="linear",
        warmup_steps=0,
        seed=a.seed,
        data_seed=a.seed,
        logging_strategy="steps",
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=a.eval_every,
        per_device_eval_batch_size=8,
        save_strategy="no",
        report_to=[],
        dataloader_num_workers=0,
        disable_tqdm=True,
        max_grad_norm=1.0,
        weight_decay=0.0,
        remove_unused_columns=False,
        train_sampling_strategy="sequential",
        # CPU under torchrun needs both, or accelerate makes no process group and each rank trains alone
        use_cpu=cpu_ddp,
        ddp_backend="gloo" if cpu_ddp else None,
    )
    recorder = RunRecorder(cfg, tokens_per_step=a.global_batch * a.seq_len, precision="fp32")
    collator = IndexedCollator(default_data_collator)
    trainer = Trainer(
        model=model,
        args=args,
        data_collator=collator,
        train_dataset=Chunks(tokens["train"], a.seq_len, indexed=True, seed=data_seed),
        eval_dataset=Chunks(tokens["val"], a.seq_len, indexed=False, limit=a.eval_chunks),
        callbacks=[RecordingCallback(recorder, collator)],
    )
    if a.mistake == "eval_first":
        trainer.evaluate()
    trainer.train()
    recorder.finish(trainer.model, a.run_dir)
    if a.save and recorder.rank == 0:
        trainer.model.save_pretrained(a.save)


if __name__ == "__main__":
    main()
