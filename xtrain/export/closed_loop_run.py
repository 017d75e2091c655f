"""Closed loop: two independent engines must load our export and compute what our model computes.

    python -m pipeline.closed_loop [--export exports/fresh] [--run runs/single] [--report PATH]   # the one CLI (stage closed_loop)

For fixed prompts cut from the validation split (as text, so the tokenizer round trip is part of
the check), each engine's logits are compared with our model's and it greedily continues each
prompt by `new_tokens`; the continuations must be token-identical.
- transformers loads the folder with `AutoModelForCausalLM` / `AutoTokenizer`, local files only,
  in the export's dtype, and must report no missing or unexpected keys;
- ONNX Runtime runs the export as an ONNX graph (xtrain/export/onnx_engine.py) in fp32, against our model
  with the export's weights computed in fp32.

Negative control, every run and every engine: the same check with one tensor perturbed (in a copy of
the export for transformers, in the ONNX graph's initializer for ONNX Runtime) must fail. The report
keeps every raw number (per-prompt logits diffs, both token lists) so the gate recomputes the verdict.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from contracts import artifact_table
from contracts.fileio import md5_file
from params.config import ModelConfig
from xtrain.core.checkpoint import load_model_tensors, load_weights
from xtrain.core.checkpoint_files import read_state
from xtrain.core.corpus import cache_dir
from xtrain.core.model import Transformer
from xtrain.export.onnx_cache import onnx_bytes
from xtrain.export.onnx_engine import OnnxEngine, perturbed

REPORT_FORMAT = "xtrain-closed-loop/2"
PERTURBED_TENSOR = "model.layers.0.mlp.down_proj.weight"
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}  # the export dtypes (hf_folder.DTYPES)


def prompts_from_text(val_text: str, tokenizer: Any, n: int, n_tokens: int) -> list[str]:
    """`n` prompts of `n_tokens` tokens, from evenly spaced line starts of the validation text."""
    out = []
    for i in range(n):
        start = val_text.rfind("\n", 0, int(len(val_text) * i / n)) + 1
        ids = tokenizer.encode(val_text[start : start + 8 * n_tokens]).ids[:n_tokens]
        out.append(tokenizer.decode(ids))
    return out


def load_ours(ckpt: Path, dtype: str) -> tuple[Transformer, Any]:
    from tokenizers import Tokenizer

    state = read_state(ckpt)
    model = Transformer(ModelConfig(**state["config"]["model"]))
    load_model_tensors(model, load_weights(ckpt))
    # The export's dtype is the precision under test: our model in the same dtype on the same device.
    return model.to(TORCH_DTYPES[dtype]).eval(), Tokenizer.from_file(str(ckpt / "tokenizer.json"))


@torch.no_grad()
def rounded_fp32(ckpt: Path, dtype: str) -> Transformer:
    """Our model with the export's weights (rounded to `dtype`) computing in fp32: what a graph built
    from the export in fp32 computes. Only parameters are rounded; the RoPE tables stay fp32."""
    model, _ = load_ours(ckpt, "fp32")
    for p in model.parameters():
        p.copy_(p.to(TORCH_DTYPES[dtype]).float())
    return model


@torch.no_grad()
def greedy(forward: Any, ids: list[int], n: int) -> list[int]:
    seq = list(ids)
    for _ in range(n):
        logits = forward(torch.tensor([seq]))
        seq.append(int(logits[0, -1].argmax()))
    return seq[len(ids) :]


def hf_generate(hf: Any, ids: list[int], n: int, pad_id: int, use_cache: bool) -> list[int]:
    out = hf.generate(
        torch.tensor([ids]),
        max_new_tokens=n,
        min_new_tokens=n,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=pad_id,
        use_cache=use_cache,
    )
    return out[0, len(ids) :].tolist()


@dataclass(frozen=True)
class Engine:
    """What the closed loop needs of an engine: logits for a batch of ids, and greedy continuation."""

    name: str
    logits: Callable[[torch.Tensor], torch.Tensor]
    generate: Callable[[list[int], int], list[int]]


@dataclass(frozen=True)
class Reference:
    """Our model's logits and greedy continuation per prompt. Computed once per model and compared
    with the engine and its negative control (recomputing them was a third of the stage's time)."""

    prompt_ids: list[list[int]]
    logits: list[torch.Tensor]
    tokens: list[list[int]]


@torch.no_grad()
def reference(ours: Transformer, prompt_ids: list[list[int]], new_tokens: int) -> Reference:
    logits = [ours(torch.tensor([ids])).float() for ids in prompt_ids]
    return Reference(prompt_ids, logits, [greedy(ours, ids, new_tokens) for ids in prompt_ids])


def first_mismatch(a: list[int], b: list[int]) -> int | None:
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    return min(len(a), len(b)) if i is None and len(a) != len(b) else i


@torch.no_grad()
def logits_diffs(engine: Engine, ref: Reference) -> list[float]:
    return [
        (want - engine.logits(torch.tensor([ids])).float()).abs().max().item()
        for ids, want in zip(ref.prompt_ids, ref.logits, strict=True)
    ]


def summarise(diffs: list[float], samples_with_mismatch: int, tokens: int) -> dict[str, Any]:
    return {
        "logits_max_abs_diff": max(diffs) if all(math.isfinite(d) for d in diffs) else math.nan,
        "tokens_compared": tokens,
        "prompts_with_token_mismatch": samples_with_mismatch,
    }


@torch.no_grad()
def run_prompts(engine: Engine, ref: Reference, new_tokens: int) -> dict:
    """Logits and greedy tokens of `engine` against our model, prompt by prompt (raw numbers kept)."""
    diffs = logits_diffs(engine, ref)
    samples = []
    for ids, diff, ours_new in zip(ref.prompt_ids, diffs, ref.tokens, strict=True):
        theirs = engine.generate(ids, new_tokens)
        samples.append(
            {
                "prompt_ids": ids,
                "logits_max_abs_diff": diff,
                "ours": ours_new,
                "engine": theirs,
                "first_mismatch": first_mismatch(ours_new, theirs),
            }
        )
    mismatched = sum(s["first_mismatch"] is not None for s in samples)
    return {**summarise(diffs, mismatched, new_tokens * len(samples)), "samples": samples}


def logits_only(engine: Engine, ref: Reference) -> dict:
    """The negative control's measurement: a perturbed tensor must move the logits past the
    tolerance (the gate judges the control by its logits alone, so no tokens are generated)."""
    return summarise(logits_diffs(engine, ref), 0, 0)


def verdict(result: dict[str, Any], atol: float, extra: list[str]) -> dict[str, Any]:
    """Add passed/failures to a measured result (the gate recomputes this from the raw numbers)."""
    failures = list(extra)
    if not result["logits_max_abs_diff"] < atol:  # NaN fails too
        failures.append(f"logits max abs diff {result['logits_max_abs_diff']:.3g} >= {atol:g}")
    if result["prompts_with_token_mismatch"]:
        failures.append(
            f"greedy continuations differ for {result['prompts_with_token_mismatch']}/{len(result['samples'])} prompts"
        )
    return {"passed": not failures, "failures": failures, "logits_atol": atol, **result}


def load_hf(export_dir: Path, dtype: str) -> tuple[Any, Any, dict[str, list[str]]]:
    """transformers loads `export_dir` (local files only): model, tokenizer, and its loading report."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf, info = AutoModelForCausalLM.from_pretrained(
        export_dir, local_files_only=True, output_loading_info=True, dtype=TORCH_DTYPES[dtype]
    )
    hf_tok = AutoTokenizer.from_pretrained(export_dir, local_files_only=True)
    keys = {k: sorted(info.get(k, [])) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    return hf.eval(), hf_tok, keys


def transformers_check(
    export_dir: Path, ref: Reference, our_tok: Any, prompts: list[str], atol: float, dtype: str, control: bool
) -> dict[str, Any]:
    """transformers must reproduce our model: logits, and (unless `control`) greedy tokens."""
    hf, hf_tok, keys = load_hf(export_dir, dtype)
    pad = hf_tok.pad_token_id
    tok_mismatch = sum(ids != hf_tok(t)["input_ids"] for ids, t in zip(ref.prompt_ids, prompts, strict=True))
    # Gated: generation without a KV cache, the same computation as ours. A cache changes the
    # matmul shapes, and in bf16 a near-tie argmax can then flip (seen on an H200-trained model:
    # 2 of 4 prompts after 22 and 25 tokens, with logits equal to the bit).
    engine = Engine(
        "transformers",
        lambda x: hf(x).logits,
        lambda ids, n: hf_generate(hf, ids, n, pad, use_cache=False),
    )
    extra = [f"loading reported {keys}"] if any(keys.values()) else []
    if tok_mismatch:
        extra.append(f"tokenizer ids differ for {tok_mismatch}/{len(prompts)} prompts")
    if control:
        return verdict({**logits_only(engine, ref), **keys}, atol, extra)
    new_tokens = len(ref.tokens[0])
    result = run_prompts(engine, ref, new_tokens)
    cached_same = sum(
        hf_generate(hf, s["prompt_ids"], new_tokens, pad, use_cache=True) == s["engine"]
        for s in result["samples"]
    )
    for s, text in zip(result["samples"], prompts, strict=True):
        s.update(prompt=text, ours_text=our_tok.decode(s["ours"]), engine_text=hf_tok.decode(s["engine"]))
    result.update(keys, prompts_with_tokenizer_mismatch=tok_mismatch, kv_cache_prompts_identical=cached_same)
    return verdict(result, atol, extra)


def onnx_check(model_bytes: bytes, ref: Reference, atol: float, control: bool) -> dict:
    """onnxruntime runs the exported graph and must reproduce our model (fp32 compute)."""
    session = OnnxEngine(model_bytes)
    engine = Engine("onnxruntime", session, lambda ids, n: greedy(session, ids, n))
    if control:
        return verdict(logits_only(engine, ref), atol, [])
    return verdict(run_prompts(engine, ref, len(ref.tokens[0])), atol, [])


def perturbed_copy(export_dir: Path, dest: Path, tensor: str) -> Path:
    """A copy of the export with `tensor` scaled by 1.5 and shifted by 0.05: the check must catch it."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(export_dir, dest)
    tensors = load_file(dest / "model.safetensors")
    if tensor not in tensors:
        raise KeyError(f"negative control: {tensor} is not in the export")
    t = tensors[tensor]
    tensors[tensor] = (t.float() * 1.5 + 0.05).to(t.dtype)
    save_file(tensors, dest / "model.safetensors", metadata={"format": "pt"})
    return dest


def engine_report(name: str, check: dict, control: dict, seconds: float, version: str, compute: str) -> dict:
    """The engine's record: its numbers only. The wall time is printed, not recorded: the report is a
    DVC out, and one that is the same on every run of this environment is restorable from the run
    cache whoever made it (docs/run-cache.md)."""
    print(f"closed loop: {name} {version} ({compute}) in {seconds:.1f} s", flush=True)
    summary = {k: v for k, v in control.items() if k != "samples"}
    return {
        "version": version,
        "compute_dtype": compute,
        "check": check,
        "negative_control": {"perturbed_tensor": PERTURBED_TENSOR, **summary},
    }


def transformers_engine(
    export_dir: Path, ref: Reference, our_tok: Any, prompts: list[str], atol: float, dtype: str
) -> dict:
    import transformers

    t0 = time.perf_counter()
    check = transformers_check(export_dir, ref, our_tok, prompts, atol, dtype, control=False)
    with tempfile.TemporaryDirectory() as tmp:
        bad = perturbed_copy(export_dir, Path(tmp) / "perturbed", PERTURBED_TENSOR)
        control = transformers_check(bad, ref, our_tok, prompts, atol, dtype, control=True)
    seconds = time.perf_counter() - t0
    return engine_report("transformers", check, control, seconds, transformers.__version__, dtype)


def onnx_engine(export_dir: Path, ref: Reference, atol: float) -> dict:
    import onnxruntime

    t0 = time.perf_counter()
    model_bytes = onnx_bytes(export_dir, cache_dir() / "onnx-graphs")
    check = onnx_check(model_bytes, ref, atol, control=False)
    control = onnx_check(perturbed(model_bytes, PERTURBED_TENSOR), ref, atol, control=True)
    seconds = time.perf_counter() - t0
    return engine_report("onnxruntime", check, control, seconds, onnxruntime.__version__, "fp32")


def closed_loop(
    export_dir: Path,
    ckpt: Path,
    val_text: str,
    n_prompts: int,
    prompt_tokens: int,
    new_tokens: int,
    atol: dict[str, float],
) -> dict[str, Any]:
    manifest = artifact_table.read("manifest", export_dir / "manifest.json")
    dtype = manifest["dtype"]
    ours, our_tok = load_ours(ckpt, dtype)
    prompts = prompts_from_text(val_text, our_tok, n_prompts, prompt_tokens)
    prompt_ids = [our_tok.encode(t).ids for t in prompts]
    engines = {
        "transformers": transformers_engine(
            export_dir, reference(ours, prompt_ids, new_tokens), our_tok, prompts, atol[dtype], dtype
        ),
        # ONNX Runtime computes in fp32: the reference is our model with the export's (rounded)
        # weights, computed in fp32, so the fp32 tolerance applies to bf16 exports too.
        "onnxruntime": onnx_engine(
            export_dir, reference(rounded_fp32(ckpt, dtype), prompt_ids, new_tokens), atol["fp32"]
        ),
    }
    failures = []
    for name, e in engines.items():
        failures += [f"{name}: {f}" for f in e["check"]["failures"]]
        if e["negative_control"]["passed"]:
            failures.append(f"{name}: negative control passed: perturbing {PERTURBED_TENSOR} went unnoticed")
    return {
        "format": REPORT_FORMAT,
        "passed": not failures,
        "failures": failures,
        "dtype": dtype,
        "export_files": {name: md5_file(export_dir / name) for name in sorted(manifest["files"])},
        "checkpoint_model_md5": md5_file(ckpt / "model.safetensors"),
        "torch_version": torch.__version__,
        "prompts": len(prompts),
        "new_tokens": new_tokens,
        "engines": engines,
    }


def print_summary(report: dict[str, Any]) -> None:
    print(f"closed loop ({report['dtype']}): {'PASS' if report['passed'] else 'FAIL'}")
    for name, e in report["engines"].items():
        c, n = e["check"], e["negative_control"]
        print(
            f"  {name} {e['version']} ({e['compute_dtype']}): logits max abs diff "
            f"{c['logits_max_abs_diff']:.3g} (atol {c['logits_atol']:g}), {c['tokens_compared']} greedy tokens, "
            f"{c['prompts_with_token_mismatch']} prompts differ; negative control diff "
            f"{n['logits_max_abs_diff']:.3g}, {'caught' if not n['passed'] else 'NOT CAUGHT'}"
        )
    for f in report["failures"]:
        print(f"  failure: {f}")
