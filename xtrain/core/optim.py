"""AdamW with decoupled weight decay on matrices only, and the warmup + cosine LR schedule."""

from __future__ import annotations

import math

import torch
from torch import nn

from params.config import TrainConfig


def build_optimizer(model: nn.Module, t: TrainConfig) -> torch.optim.AdamW:
    decay, no_decay = [], []
    for _, p in model.named_parameters():  # tied embedding appears once
        (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {"fused": True} if t.fused_adamw else {"foreach": True}
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), eps=t.adam_eps, **kwargs)


def lr_at(step: int, t: TrainConfig) -> float:
    """Linear warmup to lr over warmup_steps, then cosine decay to min_lr at the last step."""
    if t.warmup_steps and step < t.warmup_steps:
        return t.lr * (step + 1) / t.warmup_steps
    span = max(1, t.steps - t.warmup_steps)
    progress = min(1.0, (step - t.warmup_steps) / span)
    return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + math.cos(math.pi * progress))


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for g in opt.param_groups:
        g["lr"] = lr
