"""A user's transformers.Trainer script (not the examples): a tiny GPT-2 with dropout 0.1, recorded by
runrecord's Trainer adapter, on one device or under torchrun (CPU, gloo). tests/process/test_byo_hf.py drives it.

    python byo_user_trainer.py --tokens T --vocab-size V --run-dir runs/single [--attn-pdrop P] [--dropout off]
"""

from __future__ import annotations

import argparse
import os

import torch
from safetensors.torch import load_file
from torch.utils.data import Dataset
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    PrinterCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)
from transformers import default_data_collator as collate

from runrecord import RunRecorder
from runrecord.hf import INDEX_KEY, IndexedCollator, RecordingCallback

STEPS, EVAL_EVERY, BATCH, SEQ = 6, 3, 8, 16


class Windows(Dataset):
    def __init__(self, tokens: torch.Tensor, n: int, indexed: bool) -> None:
        self.tokens, self.n, self.indexed = tokens.long(), n, indexed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        x = self.tokens[i * SEQ : (i + 1) * SEQ]
        return {"input_ids": x, "labels": x.clone(), **({INDEX_KEY: i} if self.indexed else {})}


class EvalAtEnd(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        control.should_evaluate = control.should_evaluate or state.global_step == state.max_steps
        return control


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", required=True)
    p.add_argument("--vocab-size", type=int, required=True)
    p.add_argument("--run-dir", required=True)
    p.add_argument("--attn-pdrop", type=float, default=0.0)
    p.add_argument("--dropout", default="seed")
    p.add_argument("--eval-rows", type=int, default=8)
    p.add_argument("--indexed-eval", action="store_true")
    a = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.set_num_threads(1)
    tokens = load_file(a.tokens)
    torch.manual_seed(1234)
    gpt = dict(n_embd=32, n_layer=2, n_head=2, n_positions=SEQ, resid_pdrop=0.1, embd_pdrop=0.1)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=a.vocab_size, attn_pdrop=a.attn_pdrop, **gpt))
    args = TrainingArguments(
        output_dir=f"{a.run_dir}.trainer",
        max_steps=STEPS,
        per_device_train_batch_size=BATCH // world,
        per_device_eval_batch_size=4,
        learning_rate=3e-3,
        logging_strategy="steps",
        logging_steps=1,
        eval_strategy="steps",
        eval_steps=EVAL_EVERY,
        eval_on_start=True,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        train_sampling_strategy="sequential",
        use_cpu=True,
        ddp_backend="gloo" if world > 1 else None,
        seed=1234,
    )
    config = {
        "seed": 1234,
        "model": gpt | {"attn_pdrop": a.attn_pdrop},
        "train": {"steps": STEPS, "eval_every": EVAL_EVERY, "batch": BATCH},
    }
    rec = RunRecorder(config, tokens_per_step=BATCH * SEQ, dropout=a.dropout, run_dir=a.run_dir)
    collator = IndexedCollator(collate)
    trainer = Trainer(
        model=model,
        args=args,
        data_collator=collator,
        train_dataset=Windows(tokens["train"], 64, indexed=True),
        eval_dataset=Windows(tokens["val"], a.eval_rows, indexed=a.indexed_eval),
        callbacks=[RecordingCallback(rec, collator), EvalAtEnd()],
    )
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    rec.finish(trainer.model)


if __name__ == "__main__":
    main()
