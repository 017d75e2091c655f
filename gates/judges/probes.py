"""The model_probes gate: the model's feature paths keep their identities (runs/probes.json).

Why its own gate: dropout is 0 in every profile and the pilot judges launchers against each other,
so a bug in a feature path that every launcher shares passes every other gate (issue #24's campaign:
the attention-dropout path tiling kv heads, dropout without its 1/(1-p) rescale). Judged here from
the raw numbers of xtrain/core/probes.py:
- attention: the explicit (dropout) path at p = 0 equals torch's SDPA to fp32 rounding;
- dropout on ones: the mean stays 1 and a fraction p is dropped, as z-scores of a binomial draw.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from gates.judges.gate import Gate, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, fmt, inconclusive, passed
from gates.reading.measurements import PROBES as REL
from gates.reading.measurements import ProbeRecords, read_probes, read_probes_for_picture

# fp32 attention in two summation orders differs by a few ulps of the output: 1e-5 of its scale.
ATTN_RTOL, ATTN_ATOL = 1e-5, 1e-6
# z-scores of one seeded binomial draw: a correct dropout lies within Z_PASS (p ~ 6e-7 to exceed);
# a wrong rescale or rate lies hundreds of sigmas out. Between the two: say so, do not guess.
Z_PASS, Z_FAIL = 5.0, 8.0
THRESHOLD = (
    f"attention |diff| <= {ATTN_ATOL:g} + {ATTN_RTOL:g}*max|ref|; dropout z < {Z_PASS:g} (fail > {Z_FAIL:g})"
)


def attention_problem(r: dict[str, Any]) -> str | None:
    bound = ATTN_ATOL + ATTN_RTOL * r["max_abs_ref"]
    if r["max_abs_diff"] <= bound:
        return None
    return (
        f"the attention-dropout path at p=0 differs from SDPA by {fmt(r['max_abs_diff'])} > {fmt(bound)} "
        f"({r['n_heads']} heads, {r['n_kv_heads']} kv heads): its kv-head expansion, scale or mask "
        f"(xtrain/core/model.py Attention._attention_with_dropout)"
    )


def dropout_z(r: dict[str, Any]) -> tuple[float, float]:
    """z of the mean of dropout(ones) against 1, and of the dropped count against n*p."""
    n, p = r["n"], r["p"]
    z_mean = abs(r["sum_out"] / n - 1.0) / math.sqrt(p / ((1.0 - p) * n))
    z_drop = abs(r["dropped"] - n * p) / math.sqrt(n * p * (1.0 - p))
    return z_mean, z_drop


def model_probes(r: ProbeRecords) -> Outcome:
    return judge(r.data)


def judge(data: dict[str, Any]) -> Outcome:
    """The verdict on runs/probes.json's raw numbers (validated, finite)."""
    attn, drop = data["attention_paths"], data["dropout_mean"]
    z_mean, z_drop = dropout_z(drop)
    worst = max(z_mean, z_drop)
    measured = f"attention {fmt(attn['max_abs_diff'])}, dropout z {z_mean:.1f} / {z_drop:.1f}"
    dropout_text = (
        f"dropout p={drop['p']:g} on {drop['n']} ones: mean {drop['sum_out'] / drop['n']:.5f} (z {z_mean:.1f}), "
        f"dropped {drop['dropped']} (z {z_drop:.1f})"
    )
    problems = [x for x in (attention_problem(attn),) if x]
    if worst > Z_FAIL:
        problems.append(f"{dropout_text}: not inverted dropout at rate p (xtrain/core/model.py Dropout)")
    if problems:
        return failed(measured, THRESHOLD, "; ".join(problems))
    if worst > Z_PASS:
        return inconclusive(measured, THRESHOLD, f"{dropout_text}: between z {Z_PASS:g} and {Z_FAIL:g}")
    return passed(
        measured,
        THRESHOLD,
        f"attention-dropout path at p=0 = SDPA within {fmt(attn['max_abs_diff'])}; {dropout_text}",
    )


def model_probes_picture(r: ProbeRecords, t: Thresholds) -> Picture:
    """The raw numbers against their bounds (read without refusing a NaN: it is drawn)."""
    data = r.data
    attn, drop = data["attention_paths"], data["dropout_mean"]
    z_mean, z_drop = dropout_z(drop)
    bound = ATTN_ATOL + ATTN_RTOL * attn["max_abs_ref"]
    within = f"< {Z_PASS:g} (fail > {Z_FAIL:g})"
    rows = [
        ("attention-dropout path at p=0 vs SDPA: max |diff|", attn["max_abs_diff"], f"<= {bound:.3g}"),
        ("dropout(ones) mean, z", z_mean, within),
        ("dropout(ones) dropped count, z", z_drop, within),
    ]
    body = "".join(f"<tr><td>{escape(k)}</td><td>{v:.3g}</td><td>{escape(b)}</td></tr>" for k, v, b in rows)
    return Picture(
        f"<table class='files'><tr><th>probe</th><th>measured</th><th>pass</th></tr>{body}</table>",
        f"Raw numbers of {REL} ({attn['n_heads']} heads, {attn['n_kv_heads']} kv heads; dropout "
        f"p={drop['p']:g} on {drop['n']} ones). Pass: every row within its bound.",
    )


GATE = Gate(
    id="model_probes",
    checks="runs/probes.json: the attention-dropout path at p=0 equals SDPA (GQA) to fp32 rounding; "
    "dropout on ones keeps the mean 1 and drops a fraction p (binomial z-scores)",
    threshold=lambda t: THRESHOLD,
    judge=lambda r, t: model_probes(r),
    why="dropout is 0 in every profile and the pilot compares launchers with each other: a feature-path "
    "bug every launcher shares passes every other gate (issue #24's campaign found two)",
    investigate="python -m pipeline.probes --out /tmp/p.json; the message names the path "
    "(xtrain/core/model.py Attention._attention_with_dropout or Dropout)",
    takes=(),
    picture=model_probes_picture,
    read=read_probes,
    read_for_picture=read_probes_for_picture,
)
