"""transformers.Trainer adapter: a callback for the per-step facts, a collator for the sample indices.

A TrainerCallback cannot see the batch, so the training dataset yields each example's index under
`sample_index` and `IndexedCollator` queues it before the base collator builds the batch (an
example without the key, e.g. the eval set's, is not recorded). The callback takes one queued
micro-batch per `on_substep_end`/`on_step_end`, in order: accelerate's loader fetches one batch
ahead, so the collator runs before the step that consumes its batch. The loss, grad norm (before
clipping) and learning rate come from Trainer's own log, so `logging_steps` must be 1; Trainer
already averages the logged loss over ranks.

At `on_train_begin` the callback gives the recorder the model (`RunRecorder.watch`: train mode per
step, dropout seeded per sample or switched off) and, where masks are seeded, a forward pre-hook that
tells them the rows of each training forward (the front of the collator's queue). The eval set must
not carry `sample_index` (its batches would be recorded as training samples: refused at the first
evaluation), and one that does not divide by the world size is padded under DDP (a warning: the
eval loss then differs from one device's).
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from typing import Any

import torch
from transformers import TrainerCallback

from runrecord.arguments import RunRecordError
from runrecord.recorder import RunRecorder

INDEX_KEY = "sample_index"


class IndexedCollator:
    """Wraps a data collator: strips `sample_index` from every feature and records it."""

    def __init__(self, base: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> None:
        self.base = base
        self.queue: deque[list[int]] = deque()  # one entry per training micro-batch, in fetch order

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        if features and INDEX_KEY in features[0]:
            self.queue.append([int(f[INDEX_KEY]) for f in features])
        return self.base([{k: v for k, v in f.items() if k != INDEX_KEY} for f in features])


class RecordingCallback(TrainerCallback):
    """Closes one recorded step per optimizer step from Trainer's logs; eval losses from evaluate()."""

    def __init__(self, recorder: RunRecorder, collator: IndexedCollator) -> None:
        self.recorder, self.collator = recorder, collator
        self.eval_checked = False

    def _consumed(self) -> None:
        if not self.collator.queue:
            raise RuntimeError("runrecord: a micro-batch was consumed that IndexedCollator did not see")
        self.recorder.samples(self.collator.queue.popleft())

    def on_train_begin(self, args, state, control, **kwargs):
        if args.logging_steps != 1 or args.logging_strategy != "steps":
            raise ValueError("runrecord: set TrainingArguments(logging_strategy='steps', logging_steps=1)")
        if args.remove_unused_columns:
            raise ValueError(
                "runrecord: set TrainingArguments(remove_unused_columns=False) (keeps sample_index)"
            )
        if args.dataloader_num_workers:
            raise ValueError("runrecord: dataloader_num_workers must be 0 (the collator records in-process)")
        model = kwargs.get("model")
        if model is not None and self.recorder.watched is None:
            self.recorder.watch(model)
        if model is not None and self.recorder.seeds_masks:
            model.register_forward_pre_hook(self._rows_before_forward)
        return control

    def _rows_before_forward(self, module: torch.nn.Module, _args: Any) -> None:
        """A training forward: its rows are the oldest queued micro-batch (consumed at its substep end)."""
        if module.training and torch.is_grad_enabled() and self.collator.queue:
            self.recorder.next_rows(self.collator.queue[0])

    def _check_eval_set(self, eval_dataloader: Any) -> None:
        """Once, at the first evaluation: an eval set with sample_index is refused, one that does not
        divide by the world size draws a warning."""
        dataset = getattr(eval_dataloader, "dataset", None)
        if self.eval_checked or dataset is None:
            return
        self.eval_checked = True
        first = dataset[0] if len(dataset) else {}
        if isinstance(first, dict) and INDEX_KEY in first:
            raise RunRecordError(
                "RecordingCallback",
                "eval_dataset",
                f"its examples carry {INDEX_KEY!r}: IndexedCollator would record its batches as training "
                "samples",
                f"only the training set yields {INDEX_KEY}",
            )
        world = self.recorder.world
        if len(dataset) % world:
            sys.stderr.write(
                f"runrecord: warning: the eval set has {len(dataset)} examples, not a multiple of world "
                f"{world}: under DDP the Trainer pads it with repeated examples, so the eval loss differs "
                "from one device's (loss_match fails on the eval losses alone); use a multiple of the world\n"
            )

    def on_prediction_step(self, args, state, control, **kwargs):
        self._check_eval_set(kwargs.get("eval_dataloader"))
        return control

    def on_substep_end(self, args, state, control, **kwargs):
        self._consumed()
        return control

    def on_step_end(self, args, state, control, **kwargs):
        self._consumed()
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" in logs and "grad_norm" in logs:
            self.recorder.step(logs["loss"], logs["grad_norm"], logs["learning_rate"])
        return control

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self._check_eval_set(kwargs.get("eval_dataloader"))
        if metrics and "eval_loss" in metrics:
            self.recorder.eval(state.global_step, metrics["eval_loss"])
        return control
