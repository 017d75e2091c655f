"""The threshold tables of README.md and docs/, generated from params.yaml: they cannot drift from it.

`python -m gates docs` says which marked section differs from what params.yaml gives (exit 1), `--write`
rewrites them. A section is the text between

    <!-- generated: NAME (python3 -m gates docs --write) -->
    <!-- end generated -->

and holds one Markdown table. Its threshold cells are generated for each profile of params.yaml with the
values a run of that profile uses: only its device's tier, every prefix as min(prefix_steps, steps) of
that profile's runs (the gates judge the same way: gates/judges/ddp.py `min(prefix_steps, steps)`), and
each gate's own threshold text from the catalogue (`python -m gates list`) except scaling and
closed_loop, whose catalogue text names no value. Cells the generator leaves to people (what a gate
checks, what a bound was measured from) are kept from the document, matched by the row's first cell and
the column's title.
Dated measurements outside the marked sections stay as they are.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import XtrainError
from contracts.fileio import atomic_write_text
from gates.judges import catalogue, ddp, fresh_train, pilot
from params.config import Params, load_params

START = "<!-- generated: {name} (python3 -m gates docs --write) -->"
END = "<!-- end generated -->"
SECTION = re.compile(
    r"<!-- generated: (?P<name>[\w-]+) \(python3 -m gates docs --write\) -->\n(?P<body>.*?)" + re.escape(END),
    re.S,
)
OPENED = re.compile(r"<!-- generated: ")
PROSE = None  # a cell kept from the document (the row matched by its first cell)


class DocsError(XtrainError):
    exit_code = 2


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]  # each row's first cell is its key; None: kept from the doc


def cap(prefix: int | None, steps: int) -> int:
    """The steps a prefix bound judges: every step (None), or the first `prefix` of `steps`."""
    return steps if prefix is None else min(prefix, steps)


def capped(tier: dict[str, Any], steps: int) -> dict[str, Any]:
    """A device tier with its prefix as a run of `steps` steps judges it: min(prefix_steps, steps). The one
    place the docs read a tolerance key (tests/process/test_house_gates.py BUILDERS); a tier without a prefix
    (fresh_train's cpu tier judges every step by itself) is left as it is."""
    if "prefix_steps" not in tier:
        return tier
    return {**tier, "prefix_steps": cap(tier["prefix_steps"], steps)}


def capped_for_run(params: Params) -> dict[str, Any]:
    """params.yaml `gates:` with this config's device tiers capped as its runs are judged (every tier
    kept): what `python -m gates list` prints for a params file that describes runs."""
    device, steps = params["train"]["device"], params["train"]["steps"]
    t = copy.deepcopy(params.thresholds)
    lm, pl, approx = t["loss_match"], t["pilot"], t["fresh_train"]["approx"]
    if device in lm:
        lm[device] = capped(lm[device], steps)
    if device in pl:
        pl[device] = capped(pl[device], params["pilot"]["steps"])
    if device in approx:
        approx[device] = capped(approx[device], steps)
    return t


def effective(params: Params) -> dict[str, Any]:
    """params.yaml `gates:` as a run of this profile is judged: its device's tier only, prefixes capped."""
    device, profile = params["train"]["device"], params["profile"]
    t = capped_for_run(params)
    lm, pl, approx = t["loss_match"], t["pilot"], t["fresh_train"]["approx"]
    for tiers in (lm, pl, approx, t["perf"]):
        for other in [d for d in ("cpu", "cuda") if d != device]:
            tiers.pop(other, None)
    pl["cells"] = {c: {device: over[device]} for c, over in pl.get("cells", {}).items() if device in over}
    t["scaling"] = {profile: t["scaling"][profile]}
    return t


def scaling_text(t: dict[str, Any], profile: str) -> str:
    s = t["scaling"][profile]
    floors = ", ".join(
        f"{f:g}x at world {w}" for w, f in sorted(s["floors"].items(), key=lambda x: int(x[0]))
    )
    return (
        f"speedup >= {floors}; thread/proc band {100 * s['band']:g}%; "
        f"window spread <= {100 * s['max_spread']:g}% (above: inconclusive)"
    )


def closed_loop_text(params: Params) -> str:
    cl, dtype = params["closed_loop"], params["export"]["dtype"]
    return (
        f"transformers logits atol {cl[f'logits_atol_{dtype}']:g} ({dtype} export), ONNX Runtime "
        f"{cl['logits_atol_fp32']:g} (fp32); {cl['new_tokens']} greedy tokens x {cl['prompts']} prompts identical"
    )


def pilot_text(t: dict[str, Any], params: Params) -> str:
    """pilot.base's bound, the cells this profile runs, and the cells with bounds of their own."""
    cells = params["pilot"]["cells"][params["profile"]]
    own = [
        f"{c}: " + ", ".join(f"{k} {v:g}" for k, v in over[params["train"]["device"]].items())
        for c, over in t["pilot"]["cells"].items()
        if c in cells
    ]
    text = f"{pilot.threshold_text(t['pilot'], 'base')}; cells {', '.join(cells)}"
    return text + (f"; own bounds: {'; '.join(own)}" if own else "")


def gate_text(gate_id: str, params: Params) -> str:
    """One gate's threshold as a run of this profile is judged."""
    t = effective(params)
    special: dict[str, Callable[[], str]] = {
        "scaling": lambda: scaling_text(t, params["profile"]),
        "closed_loop": lambda: closed_loop_text(params),
        "pilot": lambda: pilot_text(t, params),
    }
    if gate_id in special:
        return special[gate_id]()
    text = catalogue.get(gate_id).threshold(t)
    device = params["train"]["device"]
    if gate_id == "perf.throughput" and t["perf"][device].get("throughput") == "skip":
        return (
            f"skip (gates.perf.{device}.throughput); when judged: {text.removesuffix(' (throughput: skip)')}"
        )
    return text


def row_text(gate_ids: tuple[str, ...], params: Params) -> str:
    """The bounds of a row's gates: each text once (`fam.*` for a family's members that share it); a gate
    whose text ends with an earlier one's says only its own part ("as loss_match, thread as the
    reference"); the gates named when the row has several texts."""
    full: list[str] = []
    shown: list[tuple[list[str], str]] = []  # the gates that share a text, and what the row says for them
    for gid in gate_ids:
        text = gate_text(gid, params)
        if text in full:
            shown[full.index(text)][0].append(gid)
            continue
        own = next((text[: -len(s)].rstrip(": ") for s in full if text.endswith(s)), text)
        full.append(text)
        shown.append(([gid], own))
    if len(shown) == 1:
        return shown[0][1]
    return "; ".join(f"{label(ids)}: {text}" for ids, text in shown)


def label(gate_ids: list[str]) -> str:
    """The name of the gates that share a text: `fam.*` for several of one family (or the pilot cells),
    else each gate's id."""
    fam = gate_ids[0].partition(".")[0]
    if fam == "pilot" or (len(gate_ids) > 1 and all(g.startswith(fam + ".") for g in gate_ids)):
        return f"`{fam}.*`"
    return ", ".join(f"`{g}`" for g in gate_ids)


Profiles = dict[str, Params]  # profile name -> params.yaml resolved with that profile


def load_profiles(path: str | Path) -> tuple[str, Profiles]:
    """(the file's own profile, every profile of params.yaml resolved)."""
    own = load_params(path)
    return own["profile"], {p: load_params(path, [f"profile={p}"]) for p in own.raw["profiles"]}


def profile_columns(default: str, ps: Profiles) -> tuple[str, ...]:
    return tuple(f"{p} profile" + (" (default)" if p == default else "") for p in ps)


# README.md's gates table: its rows (gate ids; `pilot`: every pilot cell) and the text shown for them
README_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("`seals`, `provenance`", ("seals", "provenance")),
    ("`consistency`, `finite`", ("consistency", "finite")),
    (
        "`loss_match.thread`, `.proc`; `loss_match_stat.proc`; `launcher_parity`",
        ("loss_match.thread", "loss_match.proc", "loss_match_stat.proc", "launcher_parity"),
    ),
    ("`cross_rank.thread`, `.proc`", ("cross_rank.thread", "cross_rank.proc")),
    ("`export_md5`, `export_gguf`", ("export_md5", "export_gguf")),
    ("`fresh_train`", ("fresh_train",)),
    ("`closed_loop`", ("closed_loop",)),
    ("`model_probes`, `pilot.<cell>`", ("model_probes", "pilot")),
    ("`scaling`, `perf.throughput`, `perf.memory`", ("scaling", "perf.throughput", "perf.memory")),
)
FAMILIES = ("loss_match", "cross_rank")  # one row in docs/gates.md for the launchers of a family


def catalogue_rows() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """docs/gates.md's rows: every gate in catalogue order, a family's launchers in one row, the pilot
    cells in one (a gate added to the catalogue gets its row, and the drift test says so)."""
    rows: list[tuple[str, tuple[str, ...]]] = []
    for g in catalogue.GATES:
        fam = g.id.partition(".")[0]
        if fam == "pilot":
            g_ids, key = ("pilot",), "`pilot.<cell>`"
        else:
            g_ids, key = (g.id,), f"`{g.id}`"
        if rows and fam in (*FAMILIES, "pilot") and rows[-1][1][0].partition(".")[0] == fam:
            if fam == "pilot":
                continue
            g_ids, key = (*rows[-1][1], g.id), f"{rows[-1][0]}, {key}"
            rows.pop()
        rows.append((key, g_ids))
    return tuple(rows)


def gates_table(rows: tuple[tuple[str, tuple[str, ...]], ...], prose: tuple[str, ...], default: str,
                ps: Profiles) -> Table:  # fmt: skip
    """A table of gates: the key, the prose columns, each profile's bounds."""
    body = tuple(
        (key, *(PROSE for _ in prose), *(row_text(ids, p) for p in ps.values())) for key, ids in rows
    )
    return Table(("gate", *prose, *profile_columns(default, ps)), body)


def tier_profile(device: str, ps: Profiles) -> tuple[str, Params] | None:
    """The first profile whose runs are on `device` (the tier they are judged in)."""
    return next(((name, p) for name, p in ps.items() if p["train"]["device"] == device), None)


def ddp_tiers(ps: Profiles) -> Table:
    """docs/ddp-gate.md: each device tier of gates.loss_match as the profile on that device runs it."""
    rows = []
    for device in ("cpu", "cuda"):
        found = tier_profile(device, ps)
        if found is None:
            continue
        name, p = found
        steps = p["train"]["steps"]
        t = ddp.tier_for(p.thresholds["loss_match"], device)  # the gate's own reading of the keys
        judged = ddp.tier_for(effective(p)["loss_match"], device)
        prefix = "null (every step)" if t.prefix_steps is None else str(t.prefix_steps)
        rows.append(
            (device, f"{name} ({steps} steps)", f"{t.first_step.rtol:g}", f"{t.prefix.rtol:g}", prefix,
             f"{judged.prefix_steps} of {steps}", f"{t.end.atol:g}")
        )  # fmt: skip
    header = ("tier", "profile (`train.steps`)", "`first_step_rtol`", "`max_rel`", "`prefix_steps`",
              "steps judged", "`final_val_atol`")  # fmt: skip
    return Table(header, tuple(rows))


def perf_table(ps: Profiles) -> Table:
    """docs/perf-gates.md: gates.perf per device."""
    perf = next(iter(ps.values())).thresholds["perf"]
    rows = tuple(
        (
            device,
            str(t.get("throughput", "judge")),
            f"{100 * t['slowdown']:g}%",
            f"{100 * t['memory_growth']:g}%",
        )
        for device, t in perf.items()
    )
    return Table(("device", "`throughput`", "`slowdown`", "`memory_growth`"), rows)


def approx_table(ps: Profiles) -> Table:
    """docs/verdicts.md: fresh_train's approximate tier per device, judged over that profile's steps."""
    rows = []
    for device in ("cpu", "cuda"):
        found = tier_profile(device, ps)
        if found is None:
            continue
        name, p = found
        steps = p["train"]["steps"]
        t = fresh_train.ApproxTier.of(effective(p)["fresh_train"]["approx"][device])  # the gate's reading
        if t.prefix_steps is None:
            judged, evals = f"every one of {steps}", "every val loss"
        else:
            judged, evals = f"first {t.prefix_steps} of {steps}", "the step-0 val loss"
        final = "-" if t.final_val is None else f"{t.final_val.atol:g}"
        rows.append(
            (device, f"{t.loss.rtol:g}", str(t.loss.max_out), f"{judged} ({name} profile)",
             f"{t.val.rtol:g} ({evals})", final, PROSE)
        )  # fmt: skip
    header = ("device", "`loss_rtol`", "`max_steps_out`", "train losses judged", "`eval_rtol`",
              "`final_val_atol`", "from")  # fmt: skip
    return Table(header, tuple(rows))


def tables(path: str | Path) -> dict[str, Table]:
    """Every generated table by section name, from the params file at `path`."""
    default, ps = load_profiles(path)
    return {
        "gates": gates_table(README_ROWS, ("what it judges",), default, ps),
        "catalogue": gates_table(catalogue_rows(), ("checks", "set from (measured)"), default, ps),
        "ddp-tiers": ddp_tiers(ps),
        "perf": perf_table(ps),
        "fresh-approx": approx_table(ps),
    }


def cells(line: str) -> list[str]:
    """A Markdown table row's cells (an escaped pipe stays in its cell)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def escape_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(table: Table, old: str) -> str:
    """The table as Markdown; a PROSE cell is the old table's cell in the column of the same title, in
    the row with the same first cell ("" when there is none)."""
    lines = [cells(line) for line in old.splitlines() if line.startswith("|")]
    titles = lines[0] if lines else []
    pairs = [(row[0], zip(titles, row, strict=False)) for row in lines[2:] if row]  # pragma: no mutate -- equivalent: the default  # fmt: skip
    kept = {key: dict(cells_of) for key, cells_of in pairs}
    out = ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    for row in table.rows:
        was = kept.get(row[0], {})
        made = [
            was.get(t, "") if c is PROSE else escape_cell(c) for t, c in zip(table.header, row, strict=True)
        ]
        out.append("| " + " | ".join(made) + " |")
    return "\n".join(out) + "\n"


def regenerate(text: str, source: str, made: dict[str, Table]) -> tuple[str, list[str]]:
    """`text` with every marked section regenerated, and the names of those that changed; an unknown
    name or an unclosed marker is refused."""
    if len(OPENED.findall(text)) != len(SECTION.findall(text)):
        raise DocsError(f"{source}: a '<!-- generated: ' marker without its '{END}' (or not in the form "
                        f"{START.format(name='NAME')}); next: close it")  # fmt: skip
    changed: list[str] = []

    def one(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in made:
            raise DocsError(f"{source}: unknown generated section {name!r} (known: {', '.join(made)})")
        body = render(made[name], m["body"])
        if body != m["body"]:
            changed.append(name)
        return f"{START.format(name=name)}\n{body}{END}"

    return SECTION.sub(one, text), changed


def documents(root: Path) -> list[Path]:
    """README.md and docs/*.md: where marked sections may be."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]


@dataclass(frozen=True)
class Check:
    changed: dict[str, list[str]]  # document -> the names of its sections that differ from params.yaml
    missing: list[str]  # generated tables no document has a section for


def check(root: Path, params: str | Path, write: bool) -> Check:
    """Every marked section of README.md and docs/ against what params.yaml gives (rewritten if `write`)."""
    made = tables(params)
    changed, found = {}, set()
    for path in documents(root):
        name = path.relative_to(root).as_posix()
        # pragma below: "UTF-8" is the same codec; None, the locale's, fails a test under an ASCII locale
        text = path.read_text(encoding="utf-8")  # pragma: no mutate -- equivalent: see above
        found.update(m["name"] for m in SECTION.finditer(text))
        new, names = regenerate(text, name, made)
        if names:
            changed[name] = names
            if write:
                atomic_write_text(path, new)
    return Check(changed, [n for n in made if n not in found])
