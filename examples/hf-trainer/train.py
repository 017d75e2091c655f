"""Train a tiny Qwen3 with transformers.Trainer and record the run for the gates (runrecord).

    python train.py --run-dir runs/single --save exports/hf --probe runs/single/probe.safetensors
    torchrun --nproc-per-node 2 train.py --run-dir runs/proc     # the same global batch over 2 ranks

Model and optimisation come from the example's own params.yaml (qwen3:, trainer:; hfconfig.py maps
them onto Qwen3Config and TrainingArguments and builds the run record's config from them); the corpus
and tokenizer are the main project's (data/, built by the corpus and tokenizer stages). The global batch is fixed: each rank gets global_batch / (world x grad_accum)
rows per micro-batch, so one device and DDP consume the same samples per step. Every rank uses the
same seed: the data order is one seeded permutation, and DDP must not change what is sampled.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import hfconfig
import torch
from safetensors.torch import load_file, save_file
from torch.utils.data import DataLoader, Dataset
from transformers import (
    PrinterCallback,
    Qwen3Config,
    Qwen3ForCausalLM,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    default_data_collator,
)

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


# DDP mistakes users make; the gates must fail each (tests/process/test_byo_trainer.py).
MISTAKES = {
    "eval_first": "trainer.evaluate() before train(): on CPU (transformers 5.24, accelerate 1.15) the model "
    "is then never wrapped in DDP and every rank trains alone",
    "whole_batch": "per-device batch = the global batch: every rank reads a whole batch (world x the samples)",
    "rank_seed": "a seed per rank: each rank shuffles the data its own way",
    "same_shard": "a DataLoader of one's own (get_train_dataloader overridden, not prepared by accelerate): "
    "every rank reads the whole dataset in the same order, so all ranks train on the same rows",
}


class EvalAtEnd(TrainerCallback):
    """Evaluate after the last step too (Trainer evaluates only every eval_steps): the record's evals are
    then the steps its config's eval_every implies (0, every eval_every, the last), as the gates check."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == state.max_steps:
            control.should_evaluate = True
        return control


class UnshardedTrainer(Trainer):
    """The `same_shard` mistake: a plain DataLoader, so accelerate never shards it over the ranks."""

    def get_train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_dataset, batch_size=self._train_batch_size, collate_fn=self.data_collator
        )


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--params", default=str(hfconfig.HERE / "params.yaml"))
    p.add_argument("--tokens", default="data/tokens.safetensors")
    p.add_argument("--vocab-size", type=int, help="default: data/tokens.json vocab_size")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--save", help="save_pretrained folder (rank 0)")
    p.add_argument("--probe", help="rank 0: logits and greedy tokens of the trained model (closed loop)")
    p.add_argument("--steps", type=int, help="override trainer.steps")
    p.add_argument("--grad-accum", type=int, help="override trainer.grad_accum")
    p.add_argument(
        "--torchrun", action="store_true", help="start torchrun at params torchrun.world (no shell)"
    )
    p.add_argument("--mistake", choices=sorted(MISTAKES), help="make a DDP mistake users make (controls)")
    return p.parse_args()


def resolved(a: argparse.Namespace) -> tuple[dict, int]:
    p = hfconfig.load(a.params)
    for key, value in (("steps", a.steps), ("grad_accum", a.grad_accum)):
        if value is not None:
            p["trainer"][key] = value
    vocab = a.vocab_size or json.loads((Path(a.tokens).parent / "tokens.json").read_text())["vocab_size"]
    return p, vocab


def training_args(p: dict, a: argparse.Namespace, world: int) -> TrainingArguments:
    t = p["trainer"]
    per_device = t["global_batch"] // (t["grad_accum"] * (1 if a.mistake == "whole_batch" else world))
    cpu_ddp = world > 1 and not torch.cuda.is_available()
    return TrainingArguments(
        output_dir=str(Path(a.run_dir).parent / f".{Path(a.run_dir).name}.trainer"),
        **hfconfig.training_kwargs(p, per_device),
        logging_strategy="steps",
        logging_steps=1,
        eval_strategy="steps",
        eval_on_start=a.mistake != "eval_first",  # step 0's val loss, after DDP wrapping
        per_device_eval_batch_size=t["global_batch"],
        save_strategy="no",
        report_to=[],
        dataloader_num_workers=0,
        disable_tqdm=True,
        remove_unused_columns=False,
        train_sampling_strategy="sequential",
        # CPU under torchrun needs both, or accelerate makes no process group and each rank trains alone
        use_cpu=cpu_ddp or not torch.cuda.is_available(),
        ddp_backend="gloo" if cpu_ddp else None,
        ddp_find_unused_parameters=False,
    )


def probe(model: Qwen3ForCausalLM, val: torch.Tensor, cl: dict, path: str) -> None:
    """Prompts cut from the validation split; their logits and `new_tokens` greedy tokens (fp32)."""
    n, k = cl["prompts"], cl["prompt_tokens"]
    starts = [i * (val.numel() - k) // max(1, n) for i in range(n)]
    prompts = torch.stack([val[s : s + k].long() for s in starts])
    model.eval()
    with torch.no_grad():
        logits = model(prompts).logits.float()
        ids = prompts
        for _ in range(cl["new_tokens"]):
            ids = torch.cat([ids, model(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    tensors = {"prompts": prompts, "logits": logits.contiguous(), "tokens": ids[:, k:].contiguous()}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(path).with_suffix(".tmp")
    save_file(tensors, str(tmp))
    tmp.replace(path)


def torchrun(a: argparse.Namespace) -> int:
    """Run this script under torchrun at torchrun.world, an int read from params (argv list, no shell)."""
    try:
        world = hfconfig.load(a.params)["torchrun"]["world"]
    except hfconfig.ParamsError as e:
        hfconfig.exit_2(e)
    if not 1 <= world <= 1024:
        sys.exit(f"error: {a.params}: torchrun.world: {world!r} is not a world size (1..1024)")
    args = [x for x in sys.argv[1:] if x != "--torchrun"]
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}"]
    return subprocess.run([*launch, str(Path(__file__).resolve()), *args], check=False).returncode


def main() -> None:
    a = parse()
    if a.torchrun and "WORLD_SIZE" not in os.environ:
        sys.exit(torchrun(a))
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    try:
        p, vocab = resolved(a)
    except hfconfig.ParamsError as e:
        hfconfig.exit_2(e)
    t = p["trainer"]
    torch.set_num_threads(max(1, t["cpu_threads"] // world))
    data_seed = p["seed"] + rank if a.mistake == "rank_seed" else p["seed"]
    tokens = load_file(a.tokens)
    torch.manual_seed(p["seed"])
    model = Qwen3ForCausalLM(Qwen3Config(**hfconfig.qwen3_kwargs(p, vocab)))
    args = training_args(p, a, world)  # initialises the process group under torchrun
    recorder = RunRecorder(
        hfconfig.record_config(p, vocab), tokens_per_step=t["global_batch"] * t["seq_len"], precision="fp32"
    )
    collator = IndexedCollator(default_data_collator)
    trainer = (UnshardedTrainer if a.mistake == "same_shard" else Trainer)(
        model=model,
        args=args,
        data_collator=collator,
        train_dataset=Chunks(tokens["train"], t["seq_len"], indexed=True, seed=data_seed),
        eval_dataset=Chunks(
            tokens["val"], t["seq_len"], indexed=False, limit=t["eval_batches"] * t["global_batch"]
        ),
        callbacks=[RecordingCallback(recorder, collator), EvalAtEnd()],
    )
    trainer.remove_callback(PrinterCallback)  # the run record holds every logged number
    if a.mistake == "eval_first":
        trainer.evaluate()
    trainer.train()
    recorder.finish(trainer.model, a.run_dir, checkpoint=True)
    if recorder.rank == 0 and a.save:
        trainer.model.save_pretrained(a.save)  # safetensors
    if recorder.rank == 0 and a.probe:
        probe(trainer.model, tokens["val"], p["reload"], a.probe)


if __name__ == "__main__":
    main()
