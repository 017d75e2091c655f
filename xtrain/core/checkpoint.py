"""Checkpoints: safetensors for tensors (never pickle), JSON for the rest, written atomically.

Layout of one checkpoint directory:
    model.safetensors      weights by Hugging Face name (tied lm_head stored once, as the embedding)
    optimizer.safetensors  AdamW state by parameter name: `<name>.exp_avg`, `<name>.exp_avg_sq`, `<name>.step`
    state.json             step, seed, run config and its hash, RNG scheme, parameter digest, history
    tokenizer.json         the tokenizer the model was trained with (self-contained for export)

Where checkpoint directories live is contracts.checkpoint_dir (torch-free).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save
from torch import nn

from contracts import outputs
from contracts.fileio import canonical_json, md5_file
from xtrain.core.checkpoint_files import FORMAT, CheckpointDamaged, load_verified


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


def param_shapes_digest(model: nn.Module) -> str:
    """sha256 over every parameter's name and shape, in name order: equal digests = the same model shape."""
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        h.update(f"{name}:{list(p.shape)};".encode())
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
    with outputs.staged_folder(path, outputs.CHECKPOINT) as tmp:
        _write(tmp / "model.safetensors", save(model_tensors(model), metadata={"format": "pt"}))
        if opt is not None:
            _write(
                tmp / "optimizer.safetensors", save(optimizer_tensors(model, opt), metadata={"format": "pt"})
            )
        if tokenizer is not None:
            shutil.copyfile(tokenizer, tmp / "tokenizer.json")
        full = {"format": FORMAT, **state, "model_md5": md5_file(tmp / "model.safetensors")}
        if opt is not None:
            full["optimizer_md5"] = md5_file(tmp / "optimizer.safetensors")
        (tmp / "state.json").write_text(canonical_json(full), encoding="utf-8")


def _write(path: Path, data: bytes) -> None:
    """Write a file of a checkpoint directory; a failure names the file (write(2) errors do not)."""
    try:
        path.write_bytes(data)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from e


def load_weights(path: Path, state: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
    return load_verified(path, "model.safetensors", state or {}, "model_md5", load_file)


def load_optimizer(path: Path, state: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
    return load_verified(path, "optimizer.safetensors", state or {}, "optimizer_md5", load_file)


def restore(path: Path, state: dict[str, Any], model: nn.Module, opt: torch.optim.Optimizer) -> None:
    """Load a checkpoint into model and optimizer, refusing one whose files or weights were damaged."""
    device = next(model.parameters()).device
    weights = load_weights(path, state)
    try:
        load_model_tensors(model, {k: v.to(device) for k, v in weights.items()})
    except (ValueError, RuntimeError) as e:
        raise CheckpointDamaged(Path(path) / "model.safetensors", "", " ".join(str(e).split())[:300]) from e
    if "param_digest" in state and (digest := param_digest(model)) != state["param_digest"]:
        raise CheckpointDamaged(
            Path(path) / "model.safetensors",
            "param_digest",
            f"loaded weights digest {digest[:16]}... differs from the recorded {state['param_digest'][:16]}...",
        )
    try:
        load_optimizer_tensors(model, opt, load_optimizer(path, state))
    except (ValueError, RuntimeError) as e:
        raise CheckpointDamaged(
            Path(path) / "optimizer.safetensors", "", " ".join(str(e).split())[:300]
        ) from e
