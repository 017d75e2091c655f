"""Scaling gate, recomputed from the raw tokens/s windows of bench/scaling.json.

tokens/s = median of a measurement's windows, speedup(w) = median(world w) / median(world 1) of
the same launcher, spread = (max - min) / median; the file's own figures are only cross-checked.
Thread and proc at one world measure the same step: their gap is judged by the confidence interval
of thread/proc from both sets of windows (contracts.perf_record.shift_ci), so two noisy ten-second
measurements that merely may differ by more than the band are inconclusive, not a fail.
The worlds and launchers come from the resolved params (scaling.worlds capped by the devices
present, as the scaling stage does), not from the file. A window spread above max_spread makes the
verdict inconclusive (rerun on a quiet machine), never a pass.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from contracts.perf_record import shift_ci
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


def floor_problems(table: Table, floors: dict[int, float]) -> list[str]:
    """Every launcher and world whose median speedup is below its floor."""
    problems = []
    for launcher, by_world in table.items():
        for w, fig in by_world.items():
            floor = floors.get(w)
            if floor is not None and not fig["speedup"] >= floor:
                problems.append(
                    f"{launcher} world {w}: speedup {fig['speedup']:.2f}x below floor {floor:.2f}x "
                    f"({fig['tokens_per_s']:,.0f} tok/s, spread {100 * fig['spread']:.0f}%)"
                )
    return problems


def launcher_gaps(s: dict[str, Any], band: float) -> tuple[list[str], list[str], float]:
    """(gaps surely beyond the band, gaps that may be, the worst median gap) of thread vs proc.

    Within the band means thread/proc in [1 - band, 1 / (1 - band)]: |t - p| / max(t, p) <= band.
    """
    sure, unsure, worst = [], [], 0.0
    results = s["results"]
    low_ok, high_ok = -band, 1 / (1 - band) - 1 if band < 1 else math.inf
    for w in sorted(set(results.get("thread", {})) & set(results.get("proc", {})), key=int):
        t, p = results["thread"][w]["windows"], results["proc"][w]["windows"]
        change, low, high = shift_ci(t, p)
        tm, pm = statistics.median(t), statistics.median(p)
        worst = max(worst, abs(tm - pm) / max(tm, pm))
        text = (
            f"world {w}: thread {tm:,.0f} vs proc {pm:,.0f} tok/s, thread/proc {100 * change:+.0f}% "
            f"(95% CI {100 * low:+.0f}% to {100 * high:+.0f}%; band {100 * band:.0f}%)"
        )
        if high < low_ok or low > high_ok:
            sure.append(f"{text}: the launchers differ")
        elif low < low_ok or high > high_ok:
            unsure.append(f"{text}: may differ by more than the band")
    return sure, unsure, worst


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
    sure, unsure, worst = launcher_gaps(s, th["band"])
    problems = floor_problems(table, floors) + sure
    if problems:
        return failed(
            measured,
            threshold,
            "; ".join(problems) + ". Next: bench/scaling.png and python -m "
            "pipeline.scaling for the windows; where the time goes: all-reduce vs compute",
        )
    if unsure:
        return inconclusive(
            measured, threshold, "; ".join(unsure) + ": too noisy to judge, rerun on a quiet machine"
        )
    return passed(
        measured,
        threshold,
        f"{profile} on {s['device']}: worlds {s['worlds']} recomputed from the windows, floors met, "
        f"launchers within {100 * worst:.0f}%",
    )
