"""The closed_loop gate: recomputes the verdict of reports/closed_loop.json from its raw numbers.

Nothing the producer concluded is trusted: not `passed`, not the negative control's `passed`.
The tolerances come from the resolved params (profile applied), the export's dtype from its
manifest; every logits diff (summary and per prompt) must be finite and under the tolerance, the
gate compares both token lists itself, each engine's negative control must exceed the tolerance,
and the report must cover every file of the export's manifest at the export's current md5.
"""

from __future__ import annotations

import math
from typing import Any

from gates.artifacts import Artifacts
from gates.outcome import Outcome, failed, fmt, passed

MANIFEST = "manifest.json"
# compute dtype per engine: None = the export's dtype (transformers runs it as exported);
# ONNX Runtime always computes in fp32 (xtrain/onnx_engine.py), so the fp32 tolerance applies.
ENGINES: dict[str, str | None] = {"transformers": None, "onnxruntime": "fp32"}
TRANSFORMERS_KEYS = ("missing_keys", "unexpected_keys", "mismatched_keys")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def judge_check(name: str, check: dict[str, Any], tol: float, prompts: int, new_tokens: int) -> list[str]:
    """Problems with one engine's check, recomputed from the per-prompt numbers and token lists."""
    out = []
    samples = check["samples"]
    if len(samples) != prompts:
        out.append(f"{name}: {len(samples)} samples for {prompts} prompts")
    diffs = [check["logits_max_abs_diff"], *(s["logits_max_abs_diff"] for s in samples)]
    if not all(_finite(d) for d in diffs):
        out.append(f"{name}: non-finite logits diff {[d for d in diffs if not _finite(d)][:3]}")
    elif max(diffs) >= tol:
        out.append(f"{name}: logits max abs diff {fmt(max(diffs))} >= {tol:g}")
    for i, s in enumerate(samples):
        if s["ours"] != s["engine"] or len(s["ours"]) != new_tokens:
            first = next(
                (j for j, (a, b) in enumerate(zip(s["ours"], s["engine"], strict=False)) if a != b), None
            )
            out.append(
                f"{name}: prompt {i}: greedy tokens differ (first at {first}, "
                f"{len(s['ours'])} ours vs {len(s['engine'])}, {new_tokens} expected)"
            )
    if name == "transformers":
        for key in TRANSFORMERS_KEYS:
            if check.get(key) != []:
                out.append(f"{name}: loading reported {key} {check.get(key)}")
        if check.get("prompts_with_tokenizer_mismatch") != 0:
            out.append(
                f"{name}: tokenizer ids differ for {check.get('prompts_with_tokenizer_mismatch')} prompts"
            )
    return out


def judge_control(name: str, control: dict[str, Any], tol: float) -> list[str]:
    d = control["logits_max_abs_diff"]
    if _finite(d) and d > tol:
        return []
    return [
        f"{name}: the negative control (perturbed {control['perturbed_tensor']}) moved the logits by "
        f"{d}, not above {tol:g}: the check cannot fail"
    ]


def judge_files(r: dict[str, Any], manifest: dict[str, Any], files: dict[str, str]) -> list[str]:
    out = []
    uncovered = sorted(set(manifest["files"]) - set(r["export_files"]))
    if uncovered:
        out.append(f"the report does not cover {', '.join(uncovered)} of the export's manifest")
    changed = sorted(n for n, md5 in r["export_files"].items() if files.get(n) != md5)
    if changed:
        out.append(
            f"exports/fresh changed since the closed loop verified it ({', '.join(changed)}): "
            f"re-run `dvc repro closed_loop`, or find what rewrote the export"
        )
    if r["dtype"] != manifest["dtype"]:
        out.append(f"report dtype {r['dtype']}, export dtype {manifest['dtype']}")
    return out


def closed_loop(a: Artifacts) -> Outcome:
    r = a.json("reports/closed_loop.json", "closed_loop.schema.json", "closed_loop")
    manifest = a.json(f"exports/fresh/{MANIFEST}", "manifest.schema.json", "export")
    files = a.folder("exports/fresh", "export", exclude=(MANIFEST,))
    cl = a.params["closed_loop"]  # the resolved params the check was given (--params), like every gate
    atol = {"fp32": cl["logits_atol_fp32"], "bf16": cl["logits_atol_bf16"]}
    problems = judge_files(r, manifest, files)
    tols, diffs = {}, []
    for name, compute in ENGINES.items():
        e, tol = r["engines"][name], atol[compute or manifest["dtype"]]
        tols[name] = tol
        problems += judge_check(name, e["check"], tol, r["prompts"], r["new_tokens"])
        problems += judge_control(name, e["negative_control"], tol)
        diffs.append(e["check"]["logits_max_abs_diff"])
    if not r["passed"]:  # a pass is recomputed, never trusted; a failure the producer saw still counts
        problems.append("the producer reported: " + "; ".join(r["failures"]))
    measured = max(diffs) if all(_finite(d) for d in diffs) else math.nan
    threshold = ", ".join(f"{n} < {t:g}" for n, t in tols.items()) + ", tokens equal"
    if problems:
        return failed(
            measured,
            threshold,
            "; ".join(problems) + ". Next: reports/closed_loop.json engines.*.check.samples "
            "(first_mismatch, per-prompt diffs), and config.json vs the model config",
        )
    e = r["engines"]
    return passed(
        measured,
        threshold,
        "; ".join(
            f"{n} {e[n]['version']} reproduces logits (max abs diff {fmt(e[n]['check']['logits_max_abs_diff'])}) "
            f"and {r['prompts'] * r['new_tokens']} greedy tokens, control caught "
            f"(diff {fmt(e[n]['negative_control']['logits_max_abs_diff'])})"
            for n in ENGINES
        ),
    )
