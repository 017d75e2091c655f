"""Scaling gate: every world measured, speedup above its floor (one-sided), launchers within a band."""

from __future__ import annotations

from typing import Any

from gates.artifacts import Artifacts
from gates.outcome import Outcome, failed, passed


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
    floors = {int(w): f for w, f in profiles[profile]["floors"].items()}
    band = profiles[profile]["band"]
    problems, notes = [], []
    for launcher, by_world in sorted(s["results"].items()):
        missing = [w for w in s["worlds"] if str(w) not in by_world]
        if missing:
            problems.append(f"{launcher}: world {', '.join(map(str, missing))} missing from the table")
        for w, r in sorted(by_world.items(), key=lambda kv: int(kv[0])):
            floor = floors.get(int(w))
            if floor is not None and r["speedup"] < floor:
                problems.append(
                    f"{launcher} world {w}: speedup {r['speedup']:.2f}x below floor {floor:.2f}x "
                    f"({r['tokens_per_s']:,.0f} tok/s, spread {100 * r['spread']:.0f}%)"
                )
    worst_band = 0.0
    if {"thread", "proc"} <= set(s["results"]):
        for w in s["worlds"]:
            t, p = s["results"]["thread"].get(str(w)), s["results"]["proc"].get(str(w))
            if t and p:
                gap = abs(t["tokens_per_s"] - p["tokens_per_s"]) / max(t["tokens_per_s"], p["tokens_per_s"])
                worst_band = max(worst_band, gap)
                if gap > band:
                    problems.append(
                        f"world {w}: thread {t['tokens_per_s']:,.0f} vs proc {p['tokens_per_s']:,.0f} "
                        f"tok/s differ by {100 * gap:.0f}% (band {100 * band:.0f}%)"
                    )
    else:
        notes.append("one launcher measured: no thread/proc band check")
    top = max(s["worlds"])
    best = {launcher: r[str(top)]["speedup"] for launcher, r in s["results"].items() if str(top) in r}
    measured = " ".join(f"{k} {v:.2f}x" for k, v in sorted(best.items())) + f" @{top}"
    threshold = ", ".join(f"{w}:{f:g}x" for w, f in sorted(floors.items())) + f"; band {100 * band:.0f}%"
    if problems:
        return failed(
            measured,
            threshold,
            "; ".join(problems) + ". Next: bench/scaling.png and python -m "
            "xtrain.scaling for the windows; where the time goes: all-reduce vs compute",
        )
    return passed(
        measured,
        threshold,
        f"{profile} on {s['device']}: worlds {s['worlds']} measured, floors met, "
        f"launchers within {100 * worst_band:.0f}%" + (f"; {notes[0]}" if notes else ""),
    )
