"""Dropout a DDP gate can judge: one mask per sample, keyed by (seed, step, sample, site), as xtrain does.

torch's `nn.Dropout` draws each mask from the global RNG in batch order, so a rank holding half the
batch draws other masks than one device holding all of it, and correct DDP code fails the DDP gate
(step 0 already differs). `RunRecorder(model=..., dropout="seed")` (the default) replaces every
`nn.Dropout` of the model with `SeededDropout`: row i of a batch gets its mask from a generator
seeded from (the config's seed, the optimizer step, the row's dataset index, the module's site), so
a sample gets the same mask whichever rank or micro-batch holds it, and activation recompute
replays the same bits. The recorder tells the modules the rows of the next forward (`samples()`).

What it cannot seed it refuses, naming it: dropout drawn inside torch's kernels from the global RNG
(`nn.MultiheadAttention`'s attention dropout, any float attribute `*drop*` a module passes to a
kernel, a Hugging Face config's attention dropout, `nn.Dropout1d/2d/3d`, `AlphaDropout`). For those,
`dropout="off"` is the documented switch: every dropout of the model is set to 0 for these runs, and
the record says so (`metrics.json dropout.masks: "off"`), so the gates say the masks were not
compared instead of claiming the runs drew none. `dropout="replicas"` keeps it as torch draws it
(`masks: "unseeded"`): the statistical tier judges such runs from replicas (docs/statistical-tier.md).

The fingerprint (the sum of 32-bit hashes of the mask seeds drawn, per step, summed over ranks) counts
each row's mask once per forward: a sample held twice in one batch counts twice on every side, a
recompute replay of the same forward not at all (the set of (mask seed, occurrence) resets per
micro-batch).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from runrecord.arguments import RunRecordError
from xtrain.core.fingerprint import MAX_TERMS, hash32

MODES = ("seed", "off", "replicas")
# Hugging Face config keys of attention dropout applied inside the attention kernel (functional).
HF_ATTENTION_DROPOUT = ("attn_pdrop", "attention_dropout", "attention_probs_dropout_prob")
_MASK64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser (64 bits)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def mask_seed(seed: int, step: int, row: int, site: int) -> int:
    """The generator seed of one sample's mask at one site and step (63 bits)."""
    z = _mix(seed & _MASK64)
    for part in (step, row, site):
        z = _mix(z ^ (part & _MASK64))
    return z >> 1


def seed_of(config_seed: Any) -> int:
    """An integer seed from the config's `seed` (hashed when it is not an int)."""
    if isinstance(config_seed, int) and not isinstance(config_seed, bool):
        return config_seed
    text = json.dumps(config_seed, sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


@dataclass
class MaskState:
    """What every SeededDropout of one model shares: the step, the rows of the next forward, and the
    fingerprint of the masks drawn since the recorder last took it."""

    seed: int
    step: int = 0
    rows: list[int] | None = None
    drawn: int = 0
    terms: int = 0
    seen: set[tuple[int, int]] = field(default_factory=set)

    def next_rows(self, rows: list[int]) -> None:
        self.rows, self.seen = list(rows), set()

    def take(self) -> int:
        drawn, self.drawn, self.terms = self.drawn, 0, 0
        return drawn


class SeededDropout(nn.Dropout):
    """nn.Dropout with one mask per sample from (seed, step, the row's dataset index, site)."""

    def __init__(self, p: float, inplace: bool, state: MaskState, site: int) -> None:
        super().__init__(p, inplace)
        self.state, self.site = state, site
        self._generators: dict[torch.device, torch.Generator] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        rows = self.state.rows
        if rows is None or len(rows) != x.shape[0]:
            raise RunRecordError(
                "SeededDropout",
                f"site {self.site}",
                f"a batch of {x.shape[0]} rows, but samples() named {len(rows or [])} for this forward",
                "call rec.samples(indices) before each training forward, one index per batch row, batch "
                "first; evaluate in eval mode",
            )
        if self.p >= 1.0:
            return x * 0.0
        g = self._generators.setdefault(x.device, torch.Generator(device=x.device))
        keep = torch.empty(x.shape, device=x.device, dtype=torch.float32)
        occurrence: Counter[int] = Counter()
        for i, row in enumerate(rows):
            seed = mask_seed(self.state.seed, self.state.step, row, self.site)
            g.manual_seed(seed)
            keep[i].bernoulli_(1.0 - self.p, generator=g)
            key = (seed, occurrence[seed])
            occurrence[seed] += 1
            if key not in self.state.seen:
                self.state.seen.add(key)
                self.state.drawn += hash32(seed)
                self.state.terms += 1
        if self.state.terms > MAX_TERMS:
            raise RunRecordError("SeededDropout", "masks", f"more than {MAX_TERMS} in one step")
        return x * keep.to(x.dtype) / (1.0 - self.p)


def _functional(model: nn.Module) -> list[tuple[str, float]]:
    """Dropout drawn inside torch's kernels (global RNG), which no module replacement can seed."""
    out = []
    for name, m in model.named_modules():
        if isinstance(m, nn.modules.dropout._DropoutNd) and type(m) not in (nn.Dropout, SeededDropout):
            out.append((f"{name} ({type(m).__name__})", float(m.p)))
            continue
        for attr, value in vars(m).items():
            if "drop" in attr and isinstance(value, float) and not attr.startswith("_"):
                out.append((f"{name or 'model'}.{attr} ({type(m).__name__})", value))
    config = getattr(model, "config", None)
    for key in HF_ATTENTION_DROPOUT:
        value = getattr(config, key, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append((f"config.{key} (attention dropout inside the attention kernel)", float(value)))
    return [(where, p) for where, p in out if p > 0]


def _dropouts(model: nn.Module) -> list[tuple[nn.Module, str, nn.Dropout]]:
    """(parent, attribute, module) for every nn.Dropout child with p > 0, in module order."""
    return [
        (parent, attr, child)
        for _, parent in model.named_modules(remove_duplicate=False)
        for attr, child in list(parent._modules.items())
        if type(child) is nn.Dropout and child.p > 0
    ]


def install(model: nn.Module, mode: str, config_seed: Any) -> tuple[dict[str, Any], MaskState | None]:
    """Seed (or switch off) the model's dropout; returns metrics.json `dropout` and the shared state
    (None unless masks are seeded). Refuses, naming it, what it cannot seed."""
    functional = _functional(model)
    found = _dropouts(model)
    p_values = sorted({float(m.p) for _, _, m in found} | {p for _, p in functional})
    if mode == "replicas":  # left as torch draws it: the statistical tier judges replicas (reseed_noise)
        return {"masks": "unseeded", "modules": len(found) + len(functional), "p": p_values}, None
    if mode == "off":
        for _, _, m in found:
            m.p = 0.0
        _switch_off_functional(model)
        return {"masks": "off", "modules": len(found) + len(functional), "p": p_values}, None
    if functional:
        where, p = functional[0]
        raise RunRecordError(
            "RunRecorder",
            "dropout",
            f"{where} is dropout {p:g} drawn inside torch's kernels from the global RNG"
            + (f" (and {len(functional) - 1} more)" if len(functional) > 1 else "")
            + ": runrecord cannot seed its masks per sample, so DDP could never match one device",
            "RunRecorder(..., dropout='replicas') and rec.reseed(replica) for the statistical tier, "
            "dropout='off' for the exact tier without dropout, or set that dropout to 0",
        )
    if not found:
        return {"masks": "none", "modules": 0, "p": []}, None
    state = MaskState(seed_of(config_seed))
    replaced: dict[int, SeededDropout] = {}
    for parent, attr, m in found:
        if id(m) not in replaced:  # a module used in two places keeps one site
            replaced[id(m)] = SeededDropout(m.p, m.inplace, state, site=len(replaced))
            replaced[id(m)].train(m.training)
        setattr(parent, attr, replaced[id(m)])
    return {"masks": "seeded", "modules": len(replaced), "p": p_values}, state


def _switch_off_functional(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.p = 0.0
        for attr, value in list(vars(m).items()):
            if "drop" in attr and isinstance(value, float) and not attr.startswith("_"):
                setattr(m, attr, 0.0)


def noise_seed(config_seed: Any, replica: int, rank: int, world: int) -> int:
    """The global RNG seed of one replica's rank: distinct for every (replica, rank, world), so no DDP
    rank repeats a single-device replica's noise stream (63 bits)."""
    return mask_seed(seed_of(config_seed) ^ 0x5EED_0F_A11, replica, rank, world)


def reseed_noise(config_seed: Any, replica: int, rank: int, world: int) -> int:
    """Seed torch's global RNGs (CPU and every CUDA device) for the noise left once the init and the
    data order are fixed: kernel dropout. Returns the seed."""
    seed = noise_seed(config_seed, replica, rank, world)
    torch.manual_seed(seed)  # seeds the CPU generator and every CUDA device's
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return seed
