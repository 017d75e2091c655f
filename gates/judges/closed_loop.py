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

from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, fmt, passed
from gates.reading.exports import ClosedLoopRecords, read_closed_loop, read_closed_loop_picture

# compute dtype per engine: None = the export's dtype (transformers runs it as exported);
# ONNX Runtime always computes in fp32 (xtrain/export/onnx_engine.py), so the fp32 tolerance applies.
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
            pairs = zip(s["ours"], s["engine"], strict=False)  # pragma: no mutate -- equivalent: the default
            first = next((j for j, (a, b) in enumerate(pairs) if a != b), None)
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


def closed_loop(rec: ClosedLoopRecords) -> Outcome:
    r, manifest, files = rec.report, rec.export.manifest, rec.export.files
    cl = rec.params  # the resolved params' closed_loop section
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


# ---- the picture -----------------------------------------------------------------------------------


def _token_matrix(ax: Any, samples: list[dict[str, Any]], engine: str) -> None:
    """Prompts x generated positions: green where both models chose the same token, red where not."""
    from gates.judges import plots

    width = max(max(len(s["ours"]), len(s["engine"])) for s in samples)
    grid = [
        [i < len(s["ours"]) and i < len(s["engine"]) and s["ours"][i] == s["engine"][i] for i in range(width)]
        for s in samples
    ]
    plots.agreement_grid(ax, grid)
    for row, s in enumerate(samples):
        if s["first_mismatch"] is not None:
            ax.plot(s["first_mismatch"], row, marker="|", color="black", ms=14, mew=2)
    ax.set_xlabel("generated token position")
    ax.set_ylabel("prompt")
    ax.set_yticks(range(len(samples)))
    ax.set_title(f"greedy tokens: ours vs {engine}")


def closed_loop_picture(rec: ClosedLoopRecords, t: Thresholds) -> Picture:
    from gates.judges import plots

    r = rec.report
    engines = sorted(r["engines"])
    fig, axes = plots.figure(len(engines), 2, height=2.6 * len(engines))
    limits = []
    for row, engine in enumerate(engines):
        e = r["engines"][engine]
        c, n = e["check"], e["negative_control"]
        if not c["samples"]:
            raise NoPicture(f"reports/closed_loop.json: {engine} has no samples")
        atol = rec.params[f"logits_atol_{e['compute_dtype']}"] if rec.params is not None else c["logits_atol"]
        limits.append(f"{engine} {atol:g}")
        left, right = axes[2 * row], axes[2 * row + 1]
        names = [str(i) for i in range(len(c["samples"]))] + ["control"]
        values = [s["logits_max_abs_diff"] for s in c["samples"]] + [n["logits_max_abs_diff"]]
        expect = [False] * len(c["samples"]) + [True]
        plots.bars_against_limit(left, names, values, atol, f"atol {atol:g}", expect_over=expect)
        left.set_ylabel(f"max |logit ours − {engine}|")
        left.set_xlabel("prompt")
        left.set_title(f"{engine} logits ({e['compute_dtype']})")
        _token_matrix(right, c["samples"], engine)
    return Picture(
        plots.to_svg(fig),
        f"One row per engine ({', '.join(engines)}). Left: largest absolute logit difference per prompt "
        f"(logit units, log scale; 0 drawn at {plots.ZERO_FLOOR:g}) and the engine's negative control (one "
        f"tensor perturbed), which must reach the line. Right: each generated token, green where the engine "
        f"chose ours, red where not; a black bar marks where the outputs part. Pass: every prompt below its "
        f"atol ({', '.join(limits)}), all green, each control over its line, and the export unchanged since.",
    )


GATE = Gate(
    id="closed_loop",
    checks="transformers and ONNX Runtime reproduce our logits and greedy tokens on exports/fresh, "
    "recomputed from the report's raw numbers; each engine's negative control (one tensor perturbed) "
    "moved the logits beyond the tolerance; the report covers every export file at its current md5",
    threshold=lambda t: "params closed_loop.logits_atol_<dtype> (ONNX Runtime: fp32), tokens identical",
    read=read_closed_loop,
    judge=lambda r, t: closed_loop(r),
    why="independent readers prove the export computes what we trained, not just that it loads",
    investigate="reports/closed_loop.json: engines.<engine>.check.samples[] (first_mismatch, per-prompt "
    "diffs), missing/unexpected keys; dvc repro -f closed_loop (python -m pipeline.closed_loop) reruns it",
    takes=(),
    picture=closed_loop_picture,
    read_for_picture=read_closed_loop_picture,
)
