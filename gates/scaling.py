"""Scaling gate, recomputed from the raw tokens/s windows of bench/scaling.json.

tokens/s = median of a measurement's windows, speedup(w) = median(world w) / median(world 1) of
the same launcher, spread = (max - min) / median; the file's own figures are only cross-checked.
The worlds and launchers come from the resolved params (scaling.worlds capped by the devices
present, as the scaling stage does), not from the file. A window spread above max_spread makes the
verdict inconclusive (rerun on a quiet machine), never a pass.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from gates.artifacts import Artifacts
from gates.outcome import Outcome, failed, inconclusive, passed

Table = dict[str, dict[int, dict[str, float]]]  # launcher -> world -> recomputed figures


def shape_problems(s: dict[str, Any], params: Any) -> list[str]:
    """bench/scaling.json against what params.yaml says was measured."""
    sc, t = params["scaling"], params["train"]
    want_worlds = [w for w in sc["worlds"] if w <= s["device_count"]]
    claims = {
        "profile": (s["profile"], params["profile"]),
        "worlds_requested": (s["worlds_requested"], sc["worlds"]),
        "worlds": (s["worlds"], want_worlds),
        "launchers": (sorted(s["results"]), sorted(sc["launchers"])),
        "per_rank_batch": (s["per_rank_batch"], sc["per_rank_batch"]),
        "seq_len": (s["seq_len"], t["seq_len"]),
        "precision": (s["precision"], t["precision"]),
    }
    out = [f"{k} {got}, params.yaml gives {want}" for k, (got, want) in claims.items() if got != want]
    for launcher, by_world in sorted(s["results"].items()):
        missing = [w for w in want_worlds if str(w) not in by_world]
        if missing:
            out.append(f"{launcher}: world {', '.join(map(str, missing))} missing from the table")
        for w, r in by_world.items():
            if len(r["windows"]) != sc["windows"]:
                out.append(
                    f"{launcher} world {w}: {len(r['windows'])} windows, params.yaml scaling.windows {sc['windows']}"
                )
    return out


def recompute(s: dict[str, Any]) -> tuple[Table, list[str]]:
    """Figures from the windows, and every claimed figure that disagrees with them."""
    table: Table = {}
    wrong = []
    for launcher, by_world in sorted(s["results"].items()):
        rates = {int(w): statistics.median(r["windows"]) for w, r in by_world.items()}
        base = rates.get(1)
        table[launcher] = {}
        for w, r in sorted(by_world.items(), key=lambda kv: int(kv[0])):
            med = rates[int(w)]
            fig = {
                "tokens_per_s": med,
                "speedup": med / base if base else math.nan,
                "spread": (max(r["windows"]) - min(r["windows"])) / med,
            }
            table[launcher][int(w)] = fig
            for key, value in fig.items():
                if not math.isclose(r[key], value, rel_tol=1e-9, abs_tol=1e-12):
                    wrong.append(
                        f"{launcher} world {w}: {key} {r[key]:.6g} claimed, the windows give {value:.6g}"
                    )
    return table, wrong


def verdicts(table: Table, floors: dict[int, float], band: float) -> tuple[list[str], float]:
    """Floor and band problems of the recomputed table, and the worst thread/proc gap."""
    problems, worst = [], 0.0
    for launcher, by_world in table.items():
        for w, fig in by_world.items():
            floor = floors.get(w)
            if floor is not None and not fig["speedup"] >= floor:
                problems.append(
                    f"{launcher} world {w}: speedup {fig['speedup']:.2f}x below floor {floor:.2f}x "
                    f"({fig['tokens_per_s']:,.0f} tok/s, spread {100 * fig['spread']:.0f}%)"
                )
    for w in sorted(set(table.get("thread", {})) & set(table.get("proc", {}))):
        t, p = table["thread"][w]["tokens_per_s"], table["proc"][w]["tokens_per_s"]
        gap = abs(t - p) / max(t, p)
        worst = max(worst, gap)
        if gap > band:
            problems.append(
                f"world {w}: thread {t:,.0f} vs proc {p:,.0f} tok/s differ by {100 * gap:.0f}% (band {100 * band:.0f}%)"
            )
    return problems, worst


def scaling(a: Artifacts, profiles: dict[str, Any]) -> Outcome:
    s = a.json("bench/scaling.json", "scaling.schema.json", "scaling")
    profile = s["profile"]
    if profile not in profiles:
        return failed(
            None,
            None,
            f"bench/scaling.json was measured on profile {profile!r}, which has no floors "
            f"in params.yaml gates.scaling (known: {', '.join(sorted(profiles))})",
        )
    th = profiles[profile]
    floors = {int(w): f for w, f in th["floors"].items()}
    threshold = ", ".join(f"{w}:{f:g}x" for w, f in sorted(floors.items()))
    threshold += f"; band {100 * th['band']:.0f}%; spread <= {100 * th['max_spread']:.0f}%"
    table, wrong = recompute(s)
    refused = shape_problems(s, a.params) + wrong
    top = max(s["worlds"])
    measured = (
        " ".join(f"{k} {v[top]['speedup']:.2f}x" for k, v in sorted(table.items()) if top in v) + f" @{top}"
    )
    if refused:
        return failed(
            measured, threshold, "bench/scaling.json: " + "; ".join(refused) + ". Rerun: dvc repro scaling"
        )
    noisy = [
        f"{launcher} world {w} spread {100 * fig['spread']:.0f}%"
        for launcher, by_world in table.items()
        for w, fig in by_world.items()
        if fig["spread"] > th["max_spread"]
    ]
    if noisy:
        return inconclusive(
            measured,
            threshold,
            f"{', '.join(noisy)} above {100 * th['max_spread']:.0f}%: too noisy to judge, "
            f"rerun on a quiet machine (dvc repro -f scaling)",
        )
    problems, worst = verdicts(table, floors, th["band"])
    if problems:
        return failed(
            measured,
            threshold,
            "; ".join(problems) + ". Next: bench/scaling.png and python -m "
            "pipeline.scaling for the windows; where the time goes: all-reduce vs compute",
        )
    return passed(
        measured,
        threshold,
        f"{profile} on {s['device']}: worlds {s['worlds']} recomputed from the windows, floors met, "
        f"launchers within {100 * worst:.0f}%",
    )
