"""Logic bugs for the tests' negative controls, patched into the training stack from outside it.

xtrain knows nothing of these: it holds failpoints for process faults only (xtrain/core/failpoints.py).
Each bug here is the fast, every-rank form of a mutant of the catalogue (gates/campaigns/mutants.yaml, `mutant`):
the catalogue's text edit is the bug as a developer would write it, applied to a scratch copy by
`python -m gates mutate`; this layer makes the same mistake by wrapping the named functions, so a
negative control need not copy the tree, and reaches every rank: thread ranks through `inject` (this
process), torchrun workers and stage subprocesses through `bug_env` (XTRAIN_TEST_PATCH, read by the
sitecustomize.py beside this file once the subprocess imports xtrain.core.launch).

    XTRAIN_TEST_PATCH=<bug>@<rank|*>:<from step>     e.g. grad_sum@*:0, same_shard@3:7

A bug acts on that rank (every rank for `*`) from that step on; `world > 1` bugs only under DDP.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ENV = "XTRAIN_TEST_PATCH"
LAYER = Path(__file__).resolve().parent  # on a subprocess's PYTHONPATH: its sitecustomize.py installs
EVERY_RANK = -1
Setter = Callable[[Any, str, Any], None]  # setattr, or pytest's monkeypatch.setattr (undone after the test)


@dataclass(frozen=True)
class Armed:
    bug: str
    rank: int  # EVERY_RANK for `*`
    step: int

    def on(self, rank: int, step: int) -> bool:
        """Whether the bug acts on (rank, step): that rank (or every rank), from its step on."""
        return self.rank in (EVERY_RANK, rank) and step >= self.step


def parse(text: str) -> Armed:
    try:
        bug, where = text.split("@")
        rank, step = where.split(":")
        armed = Armed(bug, EVERY_RANK if rank == "*" else int(rank), int(step))
    except ValueError:
        raise ValueError(f"{ENV}={text!r}: expected BUG@RANK:STEP, e.g. grad_sum@*:0") from None
    if armed.bug not in BUGS:
        raise ValueError(f"{ENV}={text!r}: the bug must be one of {', '.join(sorted(BUGS))}")
    return armed


# ---- where a rank is: its rank and world (its communicator), the step it trains (Trainer.step) ----

_here = threading.local()  # one per rank: thread ranks share the process


def rank() -> int:
    return getattr(_here, "rank", 0)


def world() -> int:
    return getattr(_here, "world", 1)


def step() -> int:
    return getattr(_here, "step", 0)


def _track_ranks(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
    comm, train = m["comm"].Communicator, m["train"].Trainer
    init, train_one = comm.__init__, train.step

    def tracked_init(self: Any, r: int, w: int, device: Any) -> None:
        init(self, r, w, device)
        _here.rank, _here.world, _here.step = r, w, 0

    def tracked_step(self: Any, s: int) -> Any:
        _here.step = s
        return train_one(self, s)

    put(comm, "__init__", tracked_init)
    put(train, "step", tracked_step)


# ---- the bugs: each wraps one function of the stack, as a bug in it would behave -------------------


class _ScaledSync:
    """The rank's communicator, whose gradient sync leaves the gradients `factor` times too large."""

    def __init__(self, comm: Any, model: Any, factor: float) -> None:
        self._comm, self._model, self._factor = comm, model, factor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._comm, name)

    def sync_grads(self, grads: Any) -> None:
        import torch

        self._comm.sync_grads(grads)
        torch._foreach_mul_([p.grad for p in self._model.parameters()], self._factor)


def _scaled_gradients(factor: Callable[[Any, Any], int]) -> Callable[[Armed, Setter, dict], None]:
    """Gradients `factor(comm, t)` times too large after the sync, before clipping and the update."""

    def install(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
        real = m["train"].train_step

        def train_step(module, model, opt, micro, comm, grads, t, *rest, **kw):  # type: ignore[no-untyped-def]
            if armed.on(comm.rank, step()) and (f := factor(comm, t)) != 1:
                comm = _ScaledSync(comm, model, float(f))
            return real(module, model, opt, micro, comm, grads, t, *rest, **kw)

        put(m["train"], "train_step", train_step)

    return install


def _same_shard(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
    real = m["train"].step_batch

    def step_batch(data, seed, s, global_batch, grad_accum, seq_len, r, w):  # type: ignore[no-untyped-def]
        shard = 0 if armed.on(r, s) else r  # rank 0's rows of the global batch, not its own
        return real(data, seed, s, global_batch, grad_accum, seq_len, shard, w)

    put(m["train"], "step_batch", step_batch)


def _dropout_unsync(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
    real = m["train"].derive_seed

    def derive_seed(seed: int, purpose: str, *counters: int) -> int:
        if purpose == "dropout" and len(counters) == 1 and armed.on(rank(), counters[0]):
            return real(seed, purpose, counters[0], 0, rank())  # the old per-rank seed: mixes in the rank
        return real(seed, purpose, *counters)

    put(m["train"], "derive_seed", derive_seed)


def _ddp_eval(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
    real = m["train"].train_step

    def train_step(module, model, opt, micro, comm, *rest, **kw):  # type: ignore[no-untyped-def]
        if comm.world == 1 or not armed.on(comm.rank, step()):
            return real(module, model, opt, micro, comm, *rest, **kw)
        model.eval()  # past the train-mode record: the step trains with dropout off
        try:
            return real(module, model, opt, micro, comm, *rest, **kw)
        finally:
            model.train()

    put(m["train"], "train_step", train_step)


def _ddp_no_dropout(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
    real = m["launch"].build_model

    def build_model(cfg: Any, seed: int, device: Any) -> Any:
        if world() > 1 and armed.on(rank(), 0):  # the DDP path never passes the dropout setting
            cfg = dataclasses.replace(cfg, dropout=0.0, attn_dropout=0.0)
        return real(cfg, seed, device)

    put(m["launch"], "build_model", build_model)


def _ddp_stays_eval(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
    real = m["train"].evaluate

    def evaluate(model: Any, data: Any, spec: Any, comm: Any) -> float:
        loss = real(model, data, spec, comm)
        if comm.world > 1 and armed.on(comm.rank, 0):
            model.eval()  # the loop never calls model.train() again
        return loss

    put(m["train"], "evaluate", evaluate)


class RecomputeDrift:
    """A forward pre-hook on each block: every second training call of a block (the recompute replay
    of non-reentrant checkpointing, which follows its forward) sees its input * (1 + 2**-10), so
    the activations the backward uses differ from the forward's while the loss does not."""

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}

    def __call__(self, module: Any, args: tuple) -> tuple | None:
        if not module.training:
            return None
        n = self.calls.get(id(module), 0)
        self.calls[id(module)] = n + 1
        return (args[0] * (1 + 2**-10), *args[1:]) if n % 2 else None


def _at_build(change: Callable[[Any, Any], None]) -> Callable[[Armed, Setter, dict], None]:
    """`change(model, spec)` on the rank's model before the trainer is built around it."""

    def install(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
        real = m["train"].build_trainer

        def build_trainer(comm: Any, model: Any, data: Any, spec: Any) -> Any:
            if armed.on(comm.rank, 0):
                change(model, spec)
            return real(comm, model, data, spec)

        put(m["train"], "build_trainer", build_trainer)

    return install


def _recompute_drifts(model: Any, spec: Any) -> None:
    if model.cfg.recompute:
        drift = RecomputeDrift()
        for layer in model.model.layers:
            layer.register_forward_pre_hook(drift)


def _bf16_weights(model: Any, spec: Any) -> None:
    import torch

    if spec.run.train.precision == "bf16":
        model.to(torch.bfloat16)  # no fp32 master weights


def _resume_drop_v(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
    real = m["train"].restore

    def restore(path: Any, state: dict, model: Any, opt: Any) -> Any:
        out = real(path, state, model, opt)
        if armed.on(rank(), int(state["step"])):
            for s in opt.state.values():
                s["exp_avg_sq"].zero_()  # Adam's second moment dropped
        return out

    put(m["train"], "restore", restore)


def _fused_lr_frozen(armed: Armed, put: Setter, m: dict[str, ModuleType]) -> None:
    real = m["train"].set_lr

    def set_lr(opt: Any, lr: float) -> None:
        if opt.defaults.get("fused") and armed.on(rank(), step()):
            return  # the schedule never reaches the fused optimizer: it keeps train.lr
        real(opt, lr)

    put(m["train"], "set_lr", set_lr)


@dataclass(frozen=True)
class Bug:
    mutant: str  # the catalogue mutant of the same class (gates/campaigns/mutants.yaml)
    what: str
    install: Callable[[Armed, Setter, dict[str, ModuleType]], None]


BUGS: dict[str, Bug] = {
    "grad_sum": Bug(
        "summed-gradients",
        "the synchronised gradients are the sum over ranks, not the mean",
        _scaled_gradients(lambda comm, t: comm.world),
    ),
    "same_shard": Bug("rank-reads-other-rank-row", "the rank reads rank 0's rows of the batch", _same_shard),
    "dropout_unsync": Bug(
        "dropout-mask-local-row", "the rank's dropout seed mixes in the rank (masks differ)", _dropout_unsync
    ),
    "ddp_eval": Bug("ddp-trains-in-eval-mode", "under DDP the rank trains in eval mode", _ddp_eval),
    "ddp_no_dropout": Bug(
        "ddp-dropout-not-passed", "under DDP the model is built without dropout", _ddp_no_dropout
    ),
    "ddp_stays_eval": Bug(
        "ddp-eval-mode-after-eval", "under DDP an evaluation leaves the rank in eval mode", _ddp_stays_eval
    ),
    "recompute_drift": Bug(
        "recompute-detaches-input",
        "recompute replays each block on other numbers",
        _at_build(_recompute_drifts),
    ),
    "accum_undivided": Bug(
        "accum-loss-not-divided",
        "the micro-batch loss is not divided by grad_accum (its gradients grad_accum x too large)",
        _scaled_gradients(lambda comm, t: t.grad_accum),
    ),
    "resume_drop_v": Bug(
        "resume-drops-adam-second-moment", "a resume restores Adam's exp_avg_sq as zeros", _resume_drop_v
    ),
    "bf16_no_master": Bug(
        "bf16-no-master-weights", "bf16 training casts the weights to bf16", _at_build(_bf16_weights)
    ),
    "fused_lr_frozen": Bug(
        "fused-adamw-misses-schedule", "the fused optimizer never sees the schedule", _fused_lr_frozen
    ),
}

TARGETS = {"comm": "xtrain.core.comm", "train": "xtrain.core.train", "launch": "xtrain.core.launch"}


def install(text: str, put: Setter = setattr) -> Armed:
    """Arm the bug `text` (BUG@RANK:STEP) in this process; xtrain.core.launch is imported here."""
    armed = parse(text)
    modules = {k: importlib.import_module(name) for k, name in TARGETS.items()}
    _track_ranks(armed, put, modules)
    BUGS[armed.bug].install(armed, put, modules)
    return armed


def inject(monkeypatch: Any, text: str) -> Armed:
    """The bug in this process (thread ranks, in-process runs), undone when the test ends."""
    return install(text, monkeypatch.setattr)


def bug_env(text: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) for a subprocess whose every process (torchrun's workers too)
    carries the bug: XTRAIN_TEST_PATCH, and this folder first on PYTHONPATH for its sitecustomize."""
    parse(text)  # a typo fails here, in the test, not in a subprocess
    base = dict(os.environ if env is None else env)
    rest = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(LAYER)]
    return {**base, ENV: text, "PYTHONPATH": os.pathsep.join([str(LAYER), *rest])}
