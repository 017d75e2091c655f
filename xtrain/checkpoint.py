"""Checkpoints: safetensors for tensors (never pickle), JSON for the rest, written atomically.

Layout of one checkpoint directory:
    model.safetensors      weights by Hugging Face name (tied lm_head stored once, as the embedding)
    optimizer.safetensors  AdamW state by parameter name: `<name>.exp_avg`, `<name>.exp_avg_sq`, `<name>.step`
    state.json             step, seed, run config and its hash, RNG scheme, parameter digest, history
    tokenizer.json         the tokenizer the model was trained with (self-contained for export)

Where checkpoint directories live is xtrain.checkpoint_dir (torch-free).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save
from torch import nn

from xtrain.fileio import atomic_directory, canonical_json, md5_file
from xtrain.validate import load_json

FORMAT = "xtrain-checkpoint/1"


def model_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """State dict on CPU, fp32, contiguous; a tied lm_head is dropped (it is the embedding)."""
    sd = model.state_dict()
    tied = getattr(getattr(model, "cfg", None), "tie_embeddings", False)
    return {
        k: v.detach().to("cpu", torch.float32).contiguous()
        for k, v in sd.items()
        if not (tied and k == "lm_head.weight")
    }


def param_digest(model: nn.Module) -> str:
    """sha256 over every stored tensor's name and bytes, in name order: equal digests = equal weights."""
    h = hashlib.sha256()
    for name, t in sorted(model_tensors(model).items()):
        h.update(name.encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def load_model_tensors(model: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    tied = getattr(getattr(model, "cfg", None), "tie_embeddings", False)
    missing = [k for k in missing if not (tied and k == "lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"checkpoint does not match the model: missing {missing}, unexpected {unexpected}")


def optimizer_tensors(model: nn.Module, opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    names = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for p, state in opt.state.items():
        for key, value in state.items():
            if torch.is_tensor(value):
                out[f"{names[id(p)]}.{key}"] = value.detach().to("cpu").contiguous()
    return out


def ensure_optimizer_state(model: nn.Module, opt: torch.optim.Optimizer) -> None:
    """Allocate AdamW state the way its first step would, so a checkpoint can be loaded into it."""
    for _, p in model.named_parameters():
        st = opt.state[p]
        if not st:
            st["step"] = torch.zeros(
                (), dtype=torch.float32, device=p.device if _step_on_device(opt) else "cpu"
            )
            st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)


def _step_on_device(opt: torch.optim.Optimizer) -> bool:
    g = opt.param_groups[0]
    return bool(g.get("fused") or g.get("capturable"))


def load_optimizer_tensors(
    model: nn.Module, opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor]
) -> None:
    ensure_optimizer_state(model, opt)
    for name, p in model.named_parameters():
        for key, value in opt.state[p].items():
            src = tensors.get(f"{name}.{key}")
            if src is None:
                raise ValueError(f"optimizer checkpoint has no tensor {name}.{key}")
            value.copy_(src)


def save_checkpoint(
    path: Path,
    model: nn.Module,
    opt: torch.optim.Optimizer | None,
    state: dict[str, Any],
    tokenizer: Path | None,
) -> None:
    with atomic_directory(path) as tmp:
        (tmp / "model.safetensors").write_bytes(save(model_tensors(model), metadata={"format": "pt"}))
        if opt is not None:
            (tmp / "optimizer.safetensors").write_bytes(
                save(optimizer_tensors(model, opt), metadata={"format": "pt"})
            )
        if tokenizer is not None:
            shutil.copyfile(tokenizer, tmp / "tokenizer.json")
        full = {"format": FORMAT, **state, "model_md5": md5_file(tmp / "model.safetensors")}
        (tmp / "state.json").write_text(canonical_json(full), encoding="utf-8")


def read_state(path: Path) -> dict[str, Any]:
    state = load_json(str(Path(path) / "state.json"))
    if state.get("format") != FORMAT:
        raise ValueError(f"{path}/state.json: format is {state.get('format')!r}, expected {FORMAT!r}")
    return state


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(Path(path) / "model.safetensors"))


def load_optimizer(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(Path(path) / "optimizer.safetensors"))
