"""transformers.Trainer adapter: a callback for the per-step facts, a collator for the sample indices.

A TrainerCallback cannot see the batch, so the training dataset yields each example's index under
`sample_index` and `IndexedCollator` queues it before the base collator builds the batch (an
example without the key, e.g. the eval set's, is not recorded). The callback takes one queued
micro-batch per `on_substep_end`/`on_step_end`, in order: accelerate's loader fetches one batch
ahead, so the collator runs before the step that consumes its batch. The loss, grad norm (before
clipping) and learning rate come from Trainer's own log, so `logging_steps` must be 1; Trainer
already averages the logged loss over ranks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

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
        if metrics and "eval_loss" in metrics:
            self.recorder.eval(state.global_step, metrics["eval_loss"])
        return control
