"""Scaling gate, recomputed from the raw tokens/s windows and contention readings of bench/scaling.json.

Every measurement (one launcher at one world) ran in its own process, all at once, and their windows
were taken in turn: window i of every measurement in cycle i (xtrain/bench/conductor.py). Beside each
window the record keeps what else ran meanwhile (xtrain/bench/contention.py). The gate:
- recomputes the figures (faster half of the windows: tokens/s, speedup, spread) and cross-checks the
  file's own; refuses windows that are not whole rounds, or not taken in turn;
- finds the quiet windows itself: other processes held at most `max_contention` of the measured CPUs
  (contracts.perf_record.others_share; a producer's flag is never read);
- compares on quiet pairs of windows of the same cycle: thread vs proc at each world against the band,
  and each launcher's world w vs its world 1 against the floor, by the ~95% interval of the paired
  ratio (contracts.perf_record.paired_shift): wholly beyond the bound fails, across it is
  inconclusive. A comparison with fewer quiet pairs than a round has is inconclusive and names the
  contention measured: a neighbour's burst never fails correct code.
The worlds and launchers come from the resolved params (scaling.worlds capped by the devices present,
as the scaling stage does), not from the file. Quiet windows spread above max_spread are inconclusive
(rerun on a quiet machine), never a pass.
"""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

from contracts.perf_record import Judged, judge_measurements, judged_spread, others_share, waited_share
from gates.judges.gate import Gate, NoPicture, Picture, Thresholds
from gates.judges.outcome import Outcome, failed, inconclusive, passed
from gates.reading.measurements import MeasuredWith, ScalingRecords, read_scaling

Table = dict[str, dict[int, dict[str, float]]]  # launcher -> world -> recomputed figures


def shape_problems(s: dict[str, Any], params: MeasuredWith) -> list[str]:
    """bench/scaling.json against what params.yaml says was measured (scaling.sets applied)."""
    sc, t = params.scaling, params.train
    want_worlds = [w for w in sc["worlds"] if w <= s["device_count"]]
    claims = {
        "profile": (s["profile"], params.profile),
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
    return out + turn_problems(s)


def round_problems(what: str, r: dict[str, Any], sc: dict[str, Any]) -> list[str]:
    """A measurement's windows come in whole rounds of scaling.windows, at most scaling.max_rounds."""
    rounds, cap = r.get("rounds", 1), sc.get("max_rounds", 1)
    if len(r["windows"]) != rounds * sc["windows"]:
        return [
            f"{what}: {len(r['windows'])} windows, {rounds} rounds of params.yaml scaling.windows {sc['windows']}"
        ]
    if rounds > cap:
        return [f"{what}: {rounds} rounds, params.yaml scaling.max_rounds {cap}"]
    if len(r["readings"]) != len(r["windows"]):
        return [f"{what}: {len(r['readings'])} readings for {len(r['windows'])} windows"]
    return []


def turn_problems(s: dict[str, Any]) -> list[str]:
    """The windows were taken in turn: every measurement has as many as the others, and every window
    of cycle i began before any of cycle i + 1 (window i of each measurement is its cycle i)."""
    starts = {
        f"{launcher} world {w}": [x["start_s"] for x in r["readings"]]
        for launcher, by_world in sorted(s["results"].items())
        for w, r in sorted(by_world.items(), key=lambda kv: int(kv[0]))
    }
    if len({len(v) for v in starts.values()}) > 1:
        sizes = ", ".join(f"{k} {len(v)}" for k, v in starts.items())
        return [f"windows not taken in turn: the measurements have different numbers of readings ({sizes})"]
    n, names = len(next(iter(starts.values()), [])), list(starts)
    cycles = [[v[i] for v in starts.values()] for i in range(n)]  # cycles[i][j]: measurement j's window i
    for i, (now, later) in enumerate(itertools.pairwise(cycles)):
        if not max(now) < min(later):
            last, first = names[now.index(max(now))], names[later.index(min(later))]
            return [
                f"windows not taken in turn: {first} window {i + 2} began at {min(later):.3f} s, "
                f"before {last} window {i + 1} ({max(now):.3f} s)"
            ]
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


Key = tuple[str, int]


def measurements(s: dict[str, Any]) -> tuple[dict[Key, list[float]], dict[Key, list[dict[str, float]]]]:
    """(windows, readings) per (launcher, world)."""
    items = [((la, int(w)), r) for la, by_world in s["results"].items() for w, r in by_world.items()]
    return {k: r["windows"] for k, r in items}, {k: r["readings"] for k, r in items}


def described(j: Judged, windows: dict[Key, list[float]]) -> str:
    """One comparison's finding, e.g. "world 1: thread 4,045 vs proc 8,779 tok/s, thread/proc -54% (95%
    CI -60% to -51% over 10 quiet pairs; band 40%)" or "thread world 2: speedup 0.70x (...) floor 0.80x"."""
    c = j.comparison
    over = f"over {j.pairs} quiet pairs"
    if c.kind == "band":
        tm, pm = judged_spread(windows[c.a])[0], judged_spread(windows[c.b])[0]
        return (
            f"world {c.a[1]}: thread {tm:,.0f} vs proc {pm:,.0f} tok/s, thread/proc {100 * j.change:+.0f}% "
            f"(95% CI {100 * j.low:+.0f}% to {100 * j.high:+.0f}% {over}; band {100 * c.bound:.0f}%)"
        )
    return (
        f"{c.a[0]} world {c.a[1]}: speedup {1 + j.change:.2f}x (95% CI {1 + j.low:.2f}x to "
        f"{1 + j.high:.2f}x {over}; floor {c.bound:.2f}x)"
    )


def crowded(j: Judged, windows: dict[Key, list[float]], need: int) -> str:
    """A comparison with too few quiet pairs, e.g. "world 1 thread vs proc: 2 of 10 pairs quiet (need 5)"."""
    c = j.comparison
    names = f"world {c.a[1]} thread vs proc" if c.kind == "band" else f"{c.a[0]} world {c.a[1]} vs world 1"
    return f"{names}: {j.pairs} of {len(windows[c.a])} pairs quiet (need {need})"


SURE = {"beyond": "the launchers differ", "below": "below floor"}
UNSURE = {"straddles": "may be beyond the bound"}


def contention_text(s: dict[str, Any], judged: list[Judged], th: dict[str, Any]) -> str:
    """What the windows of the contended comparisons saw: those in which other processes held more than
    `max_contention` of the CPUs ("other processes held 72% of the 2 CPUs (median of 14 windows above
    the 60% limit), up to 6 tasks runnable, the measured threads waited 61% of their runnable time"),
    and the pairs whose two windows saw shares further apart than `max_contention_gap`."""
    _, readings = measurements(s)
    limit = float(th.get("max_contention", math.inf))
    gap = float(th.get("max_contention_gap", math.inf))
    contended = [j.comparison for j in judged if j.verdict == "contended"]
    keys = sorted({k for c in contended for k in (c.a, c.b)})
    busy = [r for k in keys for r in readings[k] if not others_share(r, s["cpus"]) <= limit]
    said = []
    if busy:
        held = statistics.median(others_share(r, s["cpus"]) for r in busy)
        waited = statistics.median(waited_share(r) for r in busy)
        said.append(
            f"other processes held {100 * held:.0f}% of the {s['cpus']} CPUs (median of {len(busy)} windows "
            f"above the {100 * limit:.0f}% limit), up to {max(r['runnable'] for r in busy)} tasks runnable, "
            f"the measured threads waited {100 * waited:.0f}% of their runnable time"
        )
    shares = {k: [others_share(r, s["cpus"]) for r in readings[k]] for k in keys}
    pairs = [(x, shares[c.b][i]) for c in contended for i, x in enumerate(shares[c.a])]
    apart = [abs(x - y) for x, y in pairs if max(x, y) <= limit and abs(x - y) > gap]
    if apart:
        said.append(
            f"in {len(apart)} pairs the two windows saw other processes' shares {100 * min(apart):.0f}-"
            f"{100 * max(apart):.0f} points apart (limit {100 * gap:.0f})"
        )
    return "; ".join(said) or "too few windows (none above the contention limits)"


def verdicts(s: dict[str, Any], th: dict[str, Any], need: int) -> tuple[list[str], list[str], list[str]]:
    """(sure failures, doubts, contended comparisons with what held the CPUs) from the raw windows."""
    windows, readings = measurements(s)
    judged, spreads = judge_measurements(windows, readings, s["cpus"], th, need)
    sure = [f"{described(j, windows)}: {SURE[j.verdict]}" for j in judged if j.verdict in SURE]
    unsure = [f"{described(j, windows)}: {UNSURE[j.verdict]}" for j in judged if j.verdict in UNSURE]
    unsure += [
        f"{la} world {w} spread {100 * spread:.0f}% (faster half of its quiet windows) above "
        f"{100 * th['max_spread']:.0f}%"
        for (la, w), spread in sorted(spreads.items())
        if spread > th["max_spread"]
    ]
    contended = [crowded(j, windows, need) for j in judged if j.verdict == "contended"]
    if contended:
        contended.append(contention_text(s, judged, th))
    return sure, unsure, contended


def scaling(r: ScalingRecords, profiles: dict[str, Any]) -> Outcome:
    """The verdict on bench/scaling.json's windows against the floors of its profile."""
    s = r.table
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
    if "max_contention" in th:
        threshold += f"; contention <= {100 * th['max_contention']:.0f}%"
    if "max_contention_gap" in th:
        threshold += f", pairs within {100 * th['max_contention_gap']:.0f} points"
    table, wrong = recompute(s)
    params = r.params.get()
    refused = shape_problems(s, params) + wrong
    top = max(s["worlds"])
    measured = (
        " ".join(f"{k} {v[top]['speedup']:.2f}x" for k, v in sorted(table.items()) if top in v) + f" @{top}"
    )
    if refused:
        return failed(
            measured, threshold, "bench/scaling.json: " + "; ".join(refused) + ". Rerun: dvc repro scaling"
        )
    sc = params.scaling
    rounds = rounds_text(s, sc)
    sure, unsure, contended = verdicts(s, th, sc["windows"])
    if sure:
        return failed(
            measured,
            threshold,
            "; ".join(sure) + f" ({rounds}). Next: bench/scaling.png and python -m "
            "pipeline.scaling for the windows; where the time goes: all-reduce vs compute",
        )
    if contended or unsure:
        said = (["contention: " + "; ".join(contended)] if contended else []) + unsure
        return inconclusive(
            measured,
            threshold,
            "; ".join(said) + f" ({rounds}): not judged, rerun on a quiet machine (dvc repro -f scaling)",
        )
    return passed(
        measured,
        threshold,
        f"{profile} on {s['device']}: worlds {s['worlds']} recomputed from the windows, floors met and "
        f"launchers within the band on quiet pairs of windows taken in turn; {rounds}",
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


def scaling_picture(r: ScalingRecords, t: Thresholds) -> Picture:
    from gates.judges import plots

    s = r.table
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
    judge=lambda r, t: scaling(r, t["scaling"]),
    why="a change that keeps numerics but loses throughput at scale is still a regression",
    investigate="bench/scaling.png; rerun one launcher/world with python -m pipeline.scaling; on GPU profile "
    "the step (python -m pipeline.bench) and the all-reduce overlap",
    takes=("scaling",),
    picture=scaling_picture,
    read=read_scaling,
)
