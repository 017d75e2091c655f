"""Scaling gate, recomputed from the raw tokens/s windows of bench/scaling.json.

A measurement (one launcher at one world) is every window of every round it took (a noisy one
re-measures: xtrain/bench/remeasure.py). Its figures are those of the faster half of its windows
(contracts.perf_record.faster_half: interference only slows windows): tokens/s = their median,
speedup(w) = tokens/s(world w) / tokens/s(world 1) of the same launcher, spread = (max - min) /
median; the file's own figures are only cross-checked.
Thread and proc at one world measure the same step: their gap is judged by the confidence interval
of thread/proc from both sets of windows (contracts.perf_record.shift_ci), so two noisy ten-second
measurements that merely may differ by more than the band are inconclusive, not a fail.
The worlds and launchers come from the resolved params (scaling.worlds capped by the devices
present, as the scaling stage does), not from the file. A window spread above max_spread makes the
verdict inconclusive (rerun on a quiet machine), never a pass.
"""

from __future__ import annotations

import math
from typing import Any

from contracts.perf_record import band_check, judged_spread
from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, inconclusive, passed
from gates.reading.artifacts import Artifacts
from params.config import Params

Table = dict[str, dict[int, dict[str, float]]]  # launcher -> world -> recomputed figures


def shape_problems(s: dict[str, Any], params: Params) -> list[str]:
    """bench/scaling.json against what params.yaml says was measured (scaling.sets applied)."""
    sc, t = params["scaling"], params.scaling_workload()["train"]
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
            out += round_problems(f"{launcher} world {w}", r, sc)
    return out


def round_problems(what: str, r: dict[str, Any], sc: dict[str, Any]) -> list[str]:
    """A measurement's windows come in whole rounds of scaling.windows, at most scaling.max_rounds."""
    rounds, cap = r.get("rounds", 1), sc.get("max_rounds", 1)
    if len(r["windows"]) != rounds * sc["windows"]:
        return [
            f"{what}: {len(r['windows'])} windows, {rounds} rounds of params.yaml scaling.windows {sc['windows']}"
        ]
    if rounds > cap:
        return [f"{what}: {rounds} rounds, params.yaml scaling.max_rounds {cap}"]
    return []


def recompute(s: dict[str, Any]) -> tuple[Table, list[str]]:
    """Figures from the windows, and every claimed figure that disagrees with them."""
    table: Table = {}
    wrong = []
    for launcher, by_world in sorted(s["results"].items()):
        judged = {int(w): judged_spread(r["windows"]) for w, r in by_world.items()}
        base = judged[1][0] if 1 in judged else None
        table[launcher] = {}
        for w, r in sorted(by_world.items(), key=lambda kv: int(kv[0])):
            med, spread = judged[int(w)]
            fig = {
                "tokens_per_s": med,
                "speedup": med / base if base else math.nan,
                "spread": spread,
            }
            table[launcher][int(w)] = fig
            for key, value in fig.items():
                close = math.isclose(  # pragma: no mutate -- equivalent: rel_tol=1e-9 is the default
                    r[key], value, rel_tol=1e-9, abs_tol=1e-12
                )
                if not close:
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
    """(gaps surely beyond the band, gaps that may be, the worst median gap) of thread vs proc,
    judged on the faster half of each measurement's windows (contracts.perf_record.band_check)."""
    sure, unsure, worst = [], [], 0.0
    results = s["results"]
    for w in sorted(set(results.get("thread", {})) & set(results.get("proc", {})), key=int):
        t, p = results["thread"][w]["windows"], results["proc"][w]["windows"]
        where, change, low, high = band_check(t, p, band)
        tm, pm = judged_spread(t)[0], judged_spread(p)[0]
        worst = max(worst, abs(tm - pm) / max(tm, pm))
        text = (
            f"world {w}: thread {tm:,.0f} vs proc {pm:,.0f} tok/s, thread/proc {100 * change:+.0f}% "
            f"(95% CI {100 * low:+.0f}% to {100 * high:+.0f}%; band {100 * band:.0f}%)"
        )
        if where == "beyond":
            sure.append(f"{text}: the launchers differ")
        elif where == "straddles":
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
    rounds = rounds_text(s, a.params["scaling"])
    noisy = [
        f"{launcher} world {w} spread {100 * fig['spread']:.0f}% (faster half of "
        f"{len(s['results'][launcher][str(w)]['windows'])} windows)"
        for launcher, by_world in table.items()
        for w, fig in by_world.items()
        if fig["spread"] > th["max_spread"]
    ]
    if noisy:
        return inconclusive(
            measured,
            threshold,
            f"{', '.join(noisy)} above {100 * th['max_spread']:.0f}% after re-measuring ({rounds}): "
            f"too noisy to judge, rerun on a quiet machine (dvc repro -f scaling)",
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
            measured,
            threshold,
            "; ".join(unsure) + f" ({rounds}): too noisy to judge, rerun on a quiet machine",
        )
    return passed(
        measured,
        threshold,
        f"{profile} on {s['device']}: worlds {s['worlds']} recomputed from the windows, floors met, "
        f"launchers within {100 * worst:.0f}%; {rounds}",
    )


def rounds_text(s: dict[str, Any], sc: dict[str, Any]) -> str:
    """How many rounds of windows each measurement took, e.g. "rounds thread 1/2/3, proc 1/1 of
    at most 3 (worlds 1/2)"."""
    worlds = sorted(int(w) for by_world in s["results"].values() for w in by_world)
    per = [
        f"{launcher} " + "/".join(str(by_world[str(w)].get("rounds", 1)) for w in sorted(map(int, by_world)))
        for launcher, by_world in sorted(s["results"].items())
    ]
    names = "/".join(map(str, sorted(set(worlds))))
    return f"rounds {', '.join(per)} of at most {sc.get('max_rounds', 1)} (worlds {names})"


# ---- the picture -----------------------------------------------------------------------------------


def _throughput_panel(ax: Any, s: dict[str, Any]) -> list[str]:
    """tokens/s per world and launcher, whiskers from the slowest to the fastest window."""
    from gates.judges import plots

    missing = []
    for launcher, by_world in sorted(s["results"].items()):
        missing += [f"{launcher} world {w}" for w in s["worlds"] if str(w) not in by_world]
        worlds = sorted(int(w) for w in by_world)
        rows = [by_world[str(w)] for w in worlds]
        tps = [r["tokens_per_s"] for r in rows]
        # max(0, ...): a hand-edited table may put tokens/s outside its windows; draw it, don't fail
        low = [max(0.0, r["tokens_per_s"] - min(r["windows"], default=r["tokens_per_s"])) for r in rows]
        high = [max(0.0, max(r["windows"], default=r["tokens_per_s"]) - r["tokens_per_s"]) for r in rows]
        ax.errorbar(worlds, tps, yerr=[low, high], marker="o", capsize=3, label=launcher)
    ax.set_xlabel("world (ranks)")
    ax.set_ylabel("tokens/s (faster half's median)")
    ax.set_xticks(s["worlds"])
    ax.set_title("throughput")
    plots.legend(ax)
    return missing


def scaling_picture(a: Artifacts, t: Thresholds) -> Picture:
    from gates.judges import plots

    s = a.json("bench/scaling.json", "scaling.schema.json", "scaling")
    profile = t["scaling"].get(s["profile"])
    if profile is None:
        raise NoPicture(f"profile {s['profile']!r} has no floors in params.yaml gates.scaling")
    floors = {int(w): f for w, f in profile["floors"].items()}
    fig, (left, right) = plots.figure(1, 2, height=2.9)
    missing = _throughput_panel(left, s)
    for launcher, by_world in sorted(s["results"].items()):
        points = [(w, by_world[str(w)]["speedup"]) for w in sorted(int(w) for w in by_world)]
        right.plot([w for w, _ in points], [x for _, x in points], "o-", label=launcher)
        low = [(w, x) for w, x in points if w in floors and x < floors[w]]
        if low:
            right.plot([w for w, _ in low], [x for _, x in low], "x", color=plots.BAD, ms=10, mew=2)
    right.plot(
        sorted(floors),
        [floors[w] for w in sorted(floors)],
        "_",
        color=plots.LIMIT,
        ms=24,
        mew=2.5,
        label="floor",
    )
    right.plot(s["worlds"], s["worlds"], ":", color="#9e9e9e", label="linear")
    right.set_xlabel("world (ranks)")
    right.set_ylabel("speedup over world 1 (×)")
    right.set_xticks(s["worlds"])
    for ax in (left, right):
        ax.set_xlim(min(s["worlds"]) - 0.4, max(s["worlds"]) + 0.4)
    right.set_title(f"speedup ({s['profile']} profile)")
    plots.legend(right)
    gone = f" Missing from the table: {', '.join(missing)}." if missing else ""
    return Picture(
        plots.to_svg(fig),
        f"Left: tokens per second per world and launcher on {s['device']} (median window; whiskers: "
        f"slowest to fastest window). Right: speedup over world 1 against its floor (orange bars), "
        f"below-floor points marked ×. Pass: every world measured for each launcher, every speedup on or "
        f"above its floor, thread and proc within {100 * profile['band']:.0f}% of each other.{gone}",
    )


GATE = Gate(
    id="scaling",
    checks="bench/scaling.json: every world present for each launcher, speedup(w) >= floor(w), "
    "thread and proc throughput within a band",
    threshold=lambda t: "speedup floors and band of the measured profile (" + ", ".join(t["scaling"]) + ")",
    run=lambda a, t: scaling(a, t["scaling"]),
    why="a change that keeps numerics but loses throughput at scale is still a regression",
    investigate="bench/scaling.png; rerun one launcher/world with python -m pipeline.scaling; on GPU profile "
    "the step (python -m pipeline.bench) and the all-reduce overlap",
    takes=("scaling",),
    picture=scaling_picture,
)
