"""Closed loop: transformers must load our export and compute what our model computes.

    python -m xtrain.verify EXPORT CKPT --text data/corpus.txt --meta data/corpus.json --report reports/closed_loop.json

For fixed prompts cut from the validation split (as text, so the tokenizer round trip is part of
the check), both sides tokenize the prompt, compare logits, and greedily continue it by
`new_tokens`; the continuations must be token-identical. transformers loads the folder with
`AutoModelForCausalLM` / `AutoTokenizer`, local files only, and must report no missing or
unexpected keys.

Negative control, every run: the same check on a copy of the export with one tensor perturbed must
fail. The report records both, so a check that cannot fail shows up as a failed closed loop.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from xtrain.checkpoint import load_model_tensors, load_weights, read_state
from xtrain.checkpoint_dir import resolve_checkpoint
from xtrain.config import ModelConfig
from xtrain.corpus import load_split
from xtrain.export import DTYPES
from xtrain.fileio import atomic_write_json, md5_file
from xtrain.model import Transformer
from xtrain.validate import load_json

REPORT_FORMAT = "xtrain-closed-loop/1"
PERTURBED_TENSOR = "model.layers.0.mlp.down_proj.weight"


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
    return model.to(DTYPES[dtype]).eval(), Tokenizer.from_file(str(ckpt / "tokenizer.json"))


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


@torch.no_grad()
def compare(
    export_dir: Path,
    ours: Transformer,
    our_tok: Any,
    prompts: list[str],
    new_tokens: int,
    atol: float,
    dtype: str,
) -> dict[str, Any]:
    """One closed-loop check of `export_dir` against our model; returns its measured result."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf, info = AutoModelForCausalLM.from_pretrained(
        export_dir, local_files_only=True, output_loading_info=True, dtype=DTYPES[dtype]
    )
    hf.eval()
    hf_tok = AutoTokenizer.from_pretrained(export_dir, local_files_only=True)
    max_diff, tokens_compared, token_mismatches, tokenizer_mismatches, cached_same = 0.0, 0, 0, 0, 0
    samples = []
    for text in prompts:
        ids = our_tok.encode(text).ids
        hf_ids = hf_tok(text)["input_ids"]
        tokenizer_mismatches += int(ids != hf_ids)
        x = torch.tensor([ids])
        diff = (ours(x).float() - hf(x).logits.float()).abs().max().item()
        max_diff = max(max_diff, diff)
        ours_new = greedy(ours, ids, new_tokens)
        # Gated: generation without a KV cache, the same computation as ours. A cache changes the
        # matmul shapes, and in bf16 a near-tie argmax can then flip (seen on an H200-trained model:
        # 2 of 4 prompts after 22 and 25 tokens, with logits equal to the bit).
        hf_new = hf_generate(hf, hf_ids, new_tokens, hf_tok.pad_token_id, use_cache=False)
        cached_same += int(hf_generate(hf, hf_ids, new_tokens, hf_tok.pad_token_id, use_cache=True) == hf_new)
        tokens_compared += new_tokens
        mismatch = next((i for i, (a, b) in enumerate(zip(ours_new, hf_new, strict=False)) if a != b), None)
        if mismatch is None and len(ours_new) != len(hf_new):
            mismatch = min(len(ours_new), len(hf_new))
        token_mismatches += int(mismatch is not None)
        samples.append(
            {
                "prompt": text,
                "prompt_ids": ids,
                "logits_max_abs_diff": diff,
                "ours": ours_new,
                "transformers": hf_new,
                "first_mismatch": mismatch,
                "ours_text": our_tok.decode(ours_new),
                "transformers_text": hf_tok.decode(hf_new),
            }
        )
    keys = {k: sorted(info.get(k, [])) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    failures = []
    if max_diff >= atol:
        failures.append(f"logits max abs diff {max_diff:.3g} >= {atol:g}")
    if token_mismatches:
        failures.append(f"greedy continuations differ for {token_mismatches}/{len(prompts)} prompts")
    if tokenizer_mismatches:
        failures.append(f"tokenizer ids differ for {tokenizer_mismatches}/{len(prompts)} prompts")
    if any(keys.values()):
        failures.append(f"loading reported {keys}")
    return {
        "passed": not failures,
        "failures": failures,
        "logits_max_abs_diff": max_diff,
        "logits_atol": atol,
        "tokens_compared": tokens_compared,
        "prompts_with_token_mismatch": token_mismatches,
        "prompts_with_tokenizer_mismatch": tokenizer_mismatches,
        "kv_cache_prompts_identical": cached_same,  # information only: transformers with its KV cache
        **keys,
        "samples": samples,
    }


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


def closed_loop(
    export_dir: Path,
    ckpt: Path,
    val_text: str,
    n_prompts: int,
    prompt_tokens: int,
    new_tokens: int,
    atol: dict[str, float],
) -> dict[str, Any]:
    import transformers

    manifest = load_json(str(export_dir / "manifest.json"))
    dtype = manifest["dtype"]
    ours, our_tok = load_ours(ckpt, dtype)
    prompts = prompts_from_text(val_text, our_tok, n_prompts, prompt_tokens)
    check = compare(export_dir, ours, our_tok, prompts, new_tokens, atol[dtype], dtype)
    with tempfile.TemporaryDirectory() as tmp:
        bad = perturbed_copy(export_dir, Path(tmp) / "perturbed", PERTURBED_TENSOR)
        control = compare(bad, ours, our_tok, prompts, new_tokens, atol[dtype], dtype)
    control_summary = {k: v for k, v in control.items() if k != "samples"}
    passed = check["passed"] and not control["passed"]
    reasons = list(check["failures"])
    if control["passed"]:
        reasons.append(f"negative control passed: perturbing {PERTURBED_TENSOR} went unnoticed")
    return {
        "format": REPORT_FORMAT,
        "passed": passed,
        "failures": reasons,
        "dtype": dtype,
        "export_files": {name: md5_file(export_dir / name) for name in sorted(manifest["files"])},
        "checkpoint_model_md5": md5_file(ckpt / "model.safetensors"),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "prompts": len(prompts),
        "new_tokens": new_tokens,
        "check": check,
        "negative_control": {"perturbed_tensor": PERTURBED_TENSOR, **control_summary},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m xtrain.verify",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("export_dir")
    ap.add_argument("checkpoint", help="checkpoint (or run) directory the export was made from")
    ap.add_argument("--text", default="data/corpus.txt")
    ap.add_argument("--meta", default="data/corpus.json")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=24)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--atol-fp32", type=float, default=1e-4)
    ap.add_argument("--atol-bf16", type=float, default=1e-2)
    ap.add_argument("--report", default="reports/closed_loop.json")
    args = ap.parse_args(argv)
    val = load_split(Path(args.text), load_json(args.meta), "val")
    report = closed_loop(
        Path(args.export_dir),
        resolve_checkpoint(args.checkpoint),
        val,
        args.prompts,
        args.prompt_tokens,
        args.new_tokens,
        {"fp32": args.atol_fp32, "bf16": args.atol_bf16},
    )
    atomic_write_json(args.report, report)
    print_summary(report)
    return 0 if report["passed"] else 1


def print_summary(report: dict[str, Any]) -> None:
    c, n = report["check"], report["negative_control"]
    print(
        f"closed loop ({report['dtype']}, transformers {report['transformers_version']}): "
        f"{'PASS' if report['passed'] else 'FAIL'}"
    )
    print(
        f"  export:           logits max abs diff {c['logits_max_abs_diff']:.3g} (atol {c['logits_atol']:g}), "
        f"{c['tokens_compared']} greedy tokens, {c['prompts_with_token_mismatch']} prompts differ"
    )
    print(
        f"  negative control: {n['perturbed_tensor']} perturbed -> logits diff {n['logits_max_abs_diff']:.3g}, "
        f"{'caught' if not n['passed'] else 'NOT CAUGHT'}"
    )
    for f in report["failures"]:
        print(f"  failure: {f}")


if __name__ == "__main__":
    sys.exit(main())
