"""The threshold tables of README.md and docs/ cannot drift from params.yaml (issue 52 item 5).

The drift test: every marked section of README.md and docs/*.md equals what params.yaml gives
(gates/reporting/threshold_docs.py). Negative controls: a number changed in params.yaml, or in a
document, is caught; `--write` puts it back and keeps the prose cells. On main 52a4e5f the README said
"over 64 steps" for CPU while the default run judges 12 of 12, and docs/ddp-gate.md gave the CUDA tier as
1e-3 over 16 steps against params.yaml's 1e-4 over 12. The generator's parts are asserted exactly on
params pinned here (`pinned`), so another change to params.yaml moves only the drift test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import PARAMS, REPO
from contracts.yamlfile import load_file
from gates import __main__ as cli
from gates.judges import catalogue
from gates.reporting import threshold_docs as td
from params.config import Params, resolve, set_in_file

PINS = {
    "profiles.cpu.train.steps": 12, "profiles.gpu.train.steps": 200, "pilot.steps": 6,
    "profiles.cpu.export.dtype": "fp32", "profiles.gpu.export.dtype": "bf16",
    "profiles.cpu.closed_loop.new_tokens": 8, "profiles.cpu.closed_loop.prompts": 2,
    "profiles.gpu.closed_loop.new_tokens": 32, "profiles.gpu.closed_loop.prompts": 4,
    "closed_loop.logits_atol_fp32": 1e-4, "closed_loop.logits_atol_bf16": 1e-2,
    "gates.loss_match.max_rel": 1e-3, "gates.loss_match.cpu.first_step_rtol": 1e-5,
    "gates.loss_match.cpu.prefix_steps": 64, "gates.loss_match.cpu.final_val_atol": 0.01,
    "gates.loss_match.cuda.first_step_rtol": 1e-4, "gates.loss_match.cuda.prefix_steps": 12,
    "gates.loss_match.cuda.final_val_atol": 0.08, "gates.pilot.cpu.prefix_steps": None,
    "gates.pilot.cuda.prefix_steps": 12, "gates.fresh_train.approx.cuda.prefix_steps": 12,
    "gates.scaling.cpu.band": 0.4, "gates.scaling.cpu.max_spread": 0.5, "gates.scaling.gpu.band": 0.35,
    "gates.scaling.gpu.max_spread": 0.4, "gates.perf.cpu.throughput": "skip", "gates.perf.cpu.slowdown": 0.5,
    "gates.perf.cpu.memory_growth": 0.2, "gates.perf.cuda.slowdown": 0.15, "gates.perf.cuda.memory_growth": 0.05,
}  # fmt: skip


DELETE = object()  # a key `pinned` removes


def pinned(profile: str = "cpu", **more: object) -> Params:
    """The committed params.yaml with the values these tests assert pinned (`more`: a__b=value for "a.b",
    DELETE to remove the key)."""
    raw = load_file(str(PARAMS))
    for key, value in {**PINS, **{k.replace("__", "."): v for k, v in more.items()}}.items():
        *path, last = key.split(".")
        node = raw
        for part in path:
            node = node.setdefault(part, {})
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return resolve(raw, "pinned params.yaml", [f"profile={profile}"])


@pytest.fixture(scope="module")
def ps() -> dict:
    return {"cpu": pinned("cpu"), "gpu": pinned("gpu")}


def docs_copy(tmp_path: Path) -> Path:
    """README.md and docs/*.md of this checkout under tmp_path (the documents `gates docs` reads)."""
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    for doc in (REPO / "docs").glob("*.md"):
        shutil.copy(doc, tmp_path / "docs" / doc.name)
    return tmp_path


# -- the drift test and its negative controls -----------------------------------------------------


def test_the_marked_sections_equal_what_params_yaml_gives() -> None:
    found = td.check(REPO, PARAMS, write=False)
    assert (found.changed, found.missing) == ({}, []), "run: python3 -m gates docs --write"


def test_a_number_changed_in_params_yaml_is_caught(tmp_path: Path) -> None:
    root = docs_copy(tmp_path)
    params = tmp_path / "params.yaml"
    shutil.copy(PARAMS, params)
    assert td.check(root, params, write=False).changed == {}  # control: the same params, nothing differs
    set_in_file(params, ["gates.loss_match.cpu.final_val_atol=0.02"])
    assert td.check(root, params, write=False).changed == {
        "README.md": ["gates"],
        "docs/ddp-gate.md": ["ddp-tiers"],
        "docs/gates.md": ["catalogue"],
    }
    set_in_file(params, ["gates.loss_match.cpu.final_val_atol=0.01", "train.steps=8"])  # the effective prefix
    assert td.check(root, params, write=False).changed["docs/ddp-gate.md"] == ["ddp-tiers"]


def test_a_number_changed_in_a_document_is_caught_and_write_restores_it(tmp_path: Path) -> None:
    root = docs_copy(tmp_path)
    readme = root / "README.md"
    good = readme.read_text()
    row = next(line for line in good.splitlines() if line.startswith("| `cross_rank"))
    edited = row.replace("<= 1e-06", "<= 1e-07").replace("every rank's parameters", "each rank's weights")
    assert edited.count("1e-07") == 2
    readme.write_text(good.replace(row, edited))
    assert td.check(root, PARAMS, write=False).changed == {"README.md": ["gates"]}
    assert cli.main(["--root", str(root), "--params", str(PARAMS), "docs"]) == 1
    assert td.check(root, PARAMS, write=True).changed == {"README.md": ["gates"]}
    assert readme.read_text() == good.replace(
        row, row.replace("every rank's parameters", "each rank's weights")
    )
    assert td.check(root, PARAMS, write=False).changed == {}  # the prose edit is kept, the number is back


def test_the_docs_command_says_what_differs_and_exits_1_until_written(tmp_path: Path, capsys) -> None:
    root = docs_copy(tmp_path)
    args = ["--root", str(root), "--params", str(PARAMS), "docs"]
    assert cli.main(args) == 0
    assert capsys.readouterr().out == f"threshold tables equal {PARAMS}\n"
    gates_md = root / "docs" / "gates.md"
    gates_md.write_text(gates_md.read_text().replace("| `finite` |", "| `finite` | x |", 1))
    assert cli.main(args) == 1
    assert capsys.readouterr().out == (
        "docs/gates.md: differs from params.yaml: generated section catalogue\n"
        "next: python3 -m gates docs --write (then review and commit the tables)\n"
    )
    assert cli.main([*args, "--write"]) == 0
    assert capsys.readouterr().out == (
        f"docs/gates.md: rewrote generated section catalogue\nthreshold tables written from {PARAMS}\n"
    )
    assert cli.main(args) == 0


def test_the_docs_command_names_every_section_of_a_document_that_differs(tmp_path: Path, capsys) -> None:
    root = docs_copy(tmp_path)
    stale = "| x |\n|---|\n| y |\n"
    (root / "docs" / "extra.md").write_text(
        f"{td.START.format(name='perf')}\n{stale}{td.END}\n{td.START.format(name='ddp-tiers')}\n{stale}{td.END}\n"
    )
    assert cli.main(["--root", str(root), "--params", str(PARAMS), "docs"]) == 1
    assert (
        capsys.readouterr().out.splitlines()[0]
        == "docs/extra.md: differs from params.yaml: generated section perf, ddp-tiers"
    )


def test_check_names_the_document_of_a_bad_section_and_reads_utf8_whatever_the_locale(tmp_path: Path) -> None:
    import locale

    root = docs_copy(tmp_path)
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale: the docs' "≤" and "−" decode only as utf-8
    try:
        assert td.check(root, PARAMS, write=False).changed == {}
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)
    (root / "docs" / "bad.md").write_text(td.START.format(name="nope") + "\n" + td.END + "\n")
    with pytest.raises(td.DocsError, match=r"^docs/bad\.md: unknown generated section 'nope'"):
        td.check(root, PARAMS, write=False)


def test_a_section_no_document_has_is_named(tmp_path: Path, capsys) -> None:
    root = docs_copy(tmp_path)
    perf = root / "docs" / "perf-gates.md"
    perf.write_text(perf.read_text().replace(td.START.format(name="perf"), "").replace(td.END, "", 1))
    assert cli.main(["--root", str(root), "--params", str(PARAMS), "docs"]) == 1
    assert (
        capsys.readouterr().out
        == f"no document has the generated section perf ({td.START.format(name='perf')})\n"
    )
    assert td.check(root, PARAMS, write=False).missing == ["perf"]


# -- sections ---------------------------------------------------------------------------------------

TABLE = td.Table(("key", "prose", "value"), (("a", td.PROSE, "1 | 2"), ("b", td.PROSE, "3\n4")))


def test_render_keeps_prose_by_row_key_and_column_title_and_escapes_pipes() -> None:
    old = "| key | value | prose |\n|---|---|---|\n| a | 9 | kept \\| this |\n| gone | 0 | x |\n"
    assert td.render(TABLE, old) == (
        "| key | prose | value |\n|---|---|---|\n| a | kept \\| this | 1 \\| 2 |\n| b |  | 3 4 |\n"
    )
    assert (
        td.render(TABLE, "") == "| key | prose | value |\n|---|---|---|\n| a |  | 1 \\| 2 |\n| b |  | 3 4 |\n"
    )


def test_render_refuses_a_row_shorter_than_the_header() -> None:
    with pytest.raises(ValueError):
        td.render(td.Table(("a", "b"), (("x",),)), "")


def test_catalogue_rows_fold_families_and_the_pilot_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    class G:
        def __init__(self, gid: str) -> None:
            self.id = gid

    ids = ["seals", "loss_match.x", "loss_match.y", "pilot.a.b", "pilot.c", "perf.a", "perf.b", "z"]
    monkeypatch.setattr(catalogue, "GATES", [G(i) for i in ids])
    assert td.catalogue_rows() == (
        ("`seals`", ("seals",)),
        ("`loss_match.x`, `loss_match.y`", ("loss_match.x", "loss_match.y")),
        ("`pilot.<cell>`", ("pilot",)),
        ("`perf.a`", ("perf.a",)),
        ("`perf.b`", ("perf.b",)),
        ("`z`", ("z",)),
    )


def test_cells_split_at_unescaped_pipes() -> None:
    assert td.cells("| a | b \\| c |  d  |") == ["a", "b \\| c", "d"]
    assert td.cells("  | x |  ") == ["x"]


def section(name: str, body: str = "") -> str:
    return f"{td.START.format(name=name)}\n{body}{td.END}"


def test_regenerate_rewrites_each_section_and_names_those_that_changed() -> None:
    made = {"t": TABLE, "u": td.Table(("k",), (("z",),))}
    fresh, same = td.render(TABLE, ""), section("u", "| k |\n|---|\n| z |\n")
    text = f"intro\n{section('t')}\nmiddle\n{same}\nend\n"
    new, changed = td.regenerate(text, "doc.md", made)
    assert new == f"intro\n{section('t', fresh)}\nmiddle\n{same}\nend\n"
    assert changed == ["t"]
    assert td.regenerate(new, "doc.md", made) == (new, [])
    assert td.regenerate("no sections\n", "doc.md", made) == ("no sections\n", [])


def test_regenerate_refuses_an_unknown_name_and_an_unclosed_marker() -> None:
    with pytest.raises(td.DocsError) as e:
        td.regenerate(section("nope"), "doc.md", {"t": TABLE, "u": TABLE})
    assert str(e.value) == "doc.md: unknown generated section 'nope' (known: t, u)"
    assert e.value.exit_code == 2
    with pytest.raises(td.DocsError) as e:
        td.regenerate(td.START.format(name="t") + "\n| a |\n", "doc.md", {"t": TABLE})
    assert str(e.value) == (
        "doc.md: a '<!-- generated: ' marker without its '<!-- end generated -->' (or not in the form "
        "<!-- generated: NAME (python3 -m gates docs --write) -->); next: close it"
    )
    with pytest.raises(td.DocsError):
        td.regenerate("<!-- generated: t -->\n<!-- end generated -->", "doc.md", {"t": TABLE})


def test_the_documents_are_the_readme_and_the_docs_pages(tmp_path: Path) -> None:
    assert td.documents(tmp_path) == []
    (tmp_path / "docs").mkdir()
    for name in ("docs/b.md", "docs/a.md", "docs/c.txt", "README.md"):
        (tmp_path / name).write_text("x")
    assert td.documents(tmp_path) == [tmp_path / "README.md", tmp_path / "docs/a.md", tmp_path / "docs/b.md"]


# -- the values a profile's runs are judged with ----------------------------------------------------


def test_cap_is_the_steps_a_prefix_judges() -> None:
    assert (td.cap(None, 12), td.cap(64, 12), td.cap(12, 200), td.cap(12, 12)) == (12, 12, 12, 12)


def test_effective_keeps_the_profiles_device_and_caps_every_prefix(ps: dict) -> None:
    cpu, gpu = td.effective(ps["cpu"]), td.effective(ps["gpu"])
    assert cpu["loss_match"] == {
        "max_rel": 1e-3,
        "cpu": {"first_step_rtol": 1e-5, "prefix_steps": 12, "final_val_atol": 0.01},
    }
    assert gpu["loss_match"]["cuda"]["prefix_steps"] == 12 and "cpu" not in gpu["loss_match"]
    assert cpu["pilot"]["cpu"]["prefix_steps"] == 6 and gpu["pilot"]["cuda"]["prefix_steps"] == 6
    assert cpu["pilot"]["cells"] == {} and "cuda" not in cpu["pilot"]
    assert gpu["pilot"]["cells"] == {
        "bf16": {"cuda": {"first_step_rtol": 1e-2, "max_rel": 1e-2}},
        "compile": {"cuda": {"first_step_rtol": 1e-3}},
        "all": {"cuda": {"first_step_rtol": 1e-2, "max_rel": 1e-2}},
    }
    assert (
        list(cpu["fresh_train"]["approx"]) == ["cpu"]
        and "prefix_steps" not in cpu["fresh_train"]["approx"]["cpu"]
    )
    assert gpu["fresh_train"]["approx"]["cuda"]["prefix_steps"] == 12
    short = td.effective(pinned("gpu", profiles__gpu__train__steps=8, profiles__gpu__train__warmup_steps=2))
    assert (
        short["fresh_train"]["approx"]["cuda"]["prefix_steps"]
        == 8
        == short["loss_match"]["cuda"]["prefix_steps"]
    )
    assert (list(cpu["perf"]), list(gpu["perf"]), list(cpu["scaling"]), list(gpu["scaling"])) == (
        ["cpu"], ["cuda"], ["cpu"], ["gpu"])  # fmt: skip
    assert ps["cpu"].thresholds["loss_match"]["cpu"]["prefix_steps"] == 64  # the params are not edited


def test_capped_for_run_caps_only_this_configs_device_and_keeps_every_tier(ps: dict) -> None:
    cpu, gpu = td.capped_for_run(ps["cpu"]), td.capped_for_run(ps["gpu"])
    assert cpu["loss_match"]["cpu"]["prefix_steps"] == 12 and cpu["loss_match"]["cuda"]["prefix_steps"] == 12
    assert cpu["pilot"]["cpu"]["prefix_steps"] == 6 and "cells" in cpu["pilot"]
    assert (
        gpu["fresh_train"]["approx"]["cuda"]["prefix_steps"] == 12 and "cpu" in gpu["fresh_train"]["approx"]
    )
    long = pinned("cpu", gates__loss_match__cuda__prefix_steps=40, gates__fresh_train__approx__cuda__prefix_steps=40,
                  gates__pilot__cuda__prefix_steps=40)  # fmt: skip
    t = td.capped_for_run(
        long
    )  # another device's tier is its own profile's: not capped by this config's steps
    assert (t["loss_match"]["cuda"]["prefix_steps"], t["fresh_train"]["approx"]["cuda"]["prefix_steps"],
            t["pilot"]["cuda"]["prefix_steps"]) == (40, 40, 40)  # fmt: skip
    short = td.capped_for_run(pinned("gpu", profiles__gpu__train__steps=8, profiles__gpu__train__warmup_steps=2,
                                     pilot__steps=5))  # fmt: skip
    assert (short["loss_match"]["cuda"]["prefix_steps"], short["fresh_train"]["approx"]["cuda"]["prefix_steps"],
            short["pilot"]["cuda"]["prefix_steps"], short["loss_match"]["cpu"]["prefix_steps"]) == (8, 8, 5, 64)  # fmt: skip
    lean = td.capped_for_run(pinned("cpu", gates__loss_match__cpu=DELETE, gates__pilot__cpu=DELETE))
    assert "cpu" not in lean["loss_match"] and "cpu" not in lean["pilot"]
    assert ps["cpu"].thresholds["loss_match"]["cpu"]["prefix_steps"] == 64  # the params are not edited


def test_effective_takes_a_tier_or_a_cell_table_params_yaml_leaves_out() -> None:
    lean = pinned("cpu", gates__loss_match__cuda=DELETE, gates__pilot__cells=DELETE)
    t = td.effective(lean)
    assert list(t["loss_match"]) == ["max_rel", "cpu"] and t["pilot"]["cells"] == {}


def test_scaling_floors_in_world_order() -> None:
    t = {"scaling": {"big": {"floors": {"2": 3.0, "4": 1.5, "10": 6.0}, "band": 0.5, "max_spread": 0.25}}}
    assert td.scaling_text(t, "big") == (
        "speedup >= 3x at world 2, 1.5x at world 4, 6x at world 10; thread/proc band 50%; "
        "window spread <= 25% (above: inconclusive)"
    )


def test_the_texts_no_catalogue_text_gives(ps: dict) -> None:
    t = td.effective(ps["gpu"])
    assert td.scaling_text(t, "gpu") == (
        "speedup >= 1.4x at world 2, 3x at world 4, 5.5x at world 8; thread/proc band 35%; "
        "window spread <= 40% (above: inconclusive)"
    )
    assert td.closed_loop_text(ps["gpu"]) == (
        "transformers logits atol 0.01 (bf16 export), ONNX Runtime 0.0001 (fp32); 32 greedy tokens x 4 prompts identical"
    )
    assert td.pilot_text(t, ps["gpu"]) == (
        "per launcher: DDP gate vs single (samples and dropout masks exact; cuda: step 0 rel <= 0.0001, max rel "
        "<= 0.001 over 6 steps, final val +- 0.08); cells dropout, grad_accum, grad_accum4, recompute, "
        "fused_adamw, compile, bf16, resume, all; own bounds: bf16: first_step_rtol 0.01, max_rel 0.01; "
        "compile: first_step_rtol 0.001; all: first_step_rtol 0.01, max_rel 0.01"
    )
    assert td.pilot_text(td.effective(ps["cpu"]), ps["cpu"]) == (
        "per launcher: DDP gate vs single (samples and dropout masks exact; cpu: step 0 rel <= 1e-05, max rel "
        "<= 0.001 over 6 steps, final val +- 0.01); cells dropout, grad_accum, recompute, resume, all"
    )
    few = pinned("gpu", pilot__cells__gpu=["dropout", "compile"])
    assert td.pilot_text(td.effective(few), few).endswith(
        "; cells dropout, compile; own bounds: compile: first_step_rtol 0.001"
    )


def test_gate_text_reuses_the_catalogue_with_the_effective_values(ps: dict) -> None:
    assert td.gate_text("loss_match.proc", ps["cpu"]) == (
        "samples and dropout masks exact; cpu: step 0 rel <= 1e-05, max rel <= 0.001 over 12 steps, final val +- 0.01"
    )
    assert td.gate_text("cross_rank.thread", ps["gpu"]) == catalogue.get("cross_rank.thread").threshold(
        ps["gpu"].thresholds
    )
    assert td.gate_text("scaling", ps["cpu"]).startswith("speedup >= 0.8x at world 2; ")
    assert td.gate_text("closed_loop", ps["cpu"]).startswith("transformers logits atol 0.0001 (fp32 export)")
    assert td.gate_text("pilot", ps["cpu"]).startswith("per launcher: DDP gate vs single")
    assert td.gate_text("perf.throughput", ps["cpu"]) == (
        "skip (gates.perf.cpu.throughput); when judged: cpu: 95% CI of the change wholly slower than 50%: fail; "
        "straddling it: inconclusive"
    )
    assert td.gate_text("perf.throughput", ps["gpu"]) == (
        "cuda: 95% CI of the change wholly slower than 15%: fail; straddling it: inconclusive"
    )
    judged = pinned("cpu", gates__perf__cpu__throughput="judge")
    assert td.gate_text("perf.throughput", judged) == catalogue.get("perf.throughput").threshold(
        td.effective(judged)
    )
    assert td.gate_text("perf.memory", ps["cpu"]) == "cpu: growth <= 20%"


def test_row_text_names_each_text_once(ps: dict) -> None:
    cpu = ps["cpu"]
    lm = td.gate_text("loss_match.thread", cpu)
    assert td.row_text(("loss_match.thread", "loss_match.proc", "launcher_parity"), cpu) == (
        f"`loss_match.*`: {lm}; `launcher_parity`: as loss_match, thread as the reference"
    )
    assert td.row_text(("cross_rank.thread", "cross_rank.proc"), cpu) == "<= 1e-06"
    assert td.row_text(("finite", "consistency"), cpu) == "`finite`: all finite; `consistency`: equal"
    assert td.row_text(("loss_match.thread",), cpu) == lm
    apart = pinned("cpu", gates__launcher_parity__max_rel=2e-3)  # its own bound: said in full
    assert td.row_text(("loss_match.proc", "launcher_parity"), apart) == (
        f"`loss_match.proc`: {lm}; `launcher_parity`: {td.gate_text('launcher_parity', apart)}"
    )
    assert (td.label(["pilot"]), td.label(["a.x", "a.y"]), td.label(["a.x"])) == (
        "`pilot.*`",
        "`a.*`",
        "`a.x`",
    )
    assert td.label(["seals", "finite"]) == "`seals`, `finite`"  # a shared text of two families: both named
    assert td.label(["a.x", "b.y"]) == "`a.x`, `b.y`"


def test_row_text_says_only_a_gates_own_part_of_a_text_it_shares(
    monkeypatch: pytest.MonkeyPatch, ps: dict
) -> None:
    texts = {"a": "T", "b": "BOX: T", "c": "T", "d": "other"}
    monkeypatch.setattr(td, "gate_text", lambda gid, params: texts[gid])
    assert td.row_text(("a", "b", "c", "d"), ps["cpu"]) == "`a`, `c`: T; `b`: BOX; `d`: other"
    assert td.row_text(("a", "c"), ps["cpu"]) == "T"


def test_every_gate_has_a_row_in_the_readme_and_in_the_catalogue_table() -> None:
    in_readme = {g for _, ids in td.README_ROWS for g in ids}
    in_catalogue = [g for _, ids in td.catalogue_rows() for g in ids]
    for g in catalogue.GATES:
        want = "pilot" if g.id.startswith("pilot.") else g.id
        assert want in in_readme and want in in_catalogue, g.id
    assert td.catalogue_rows()[:5] == (  # the statistical tier's gate after the exact one's
        ("`seals`", ("seals",)),
        ("`consistency`", ("consistency",)),
        ("`provenance`", ("provenance",)),
        ("`loss_match.thread`, `loss_match.proc`", ("loss_match.thread", "loss_match.proc")),
        ("`loss_match_stat.proc`", ("loss_match_stat.proc",)),  # its own family: another tier
    )
    assert (
        "`cross_rank.thread`, `cross_rank.proc`",
        ("cross_rank.thread", "cross_rank.proc"),
    ) in td.catalogue_rows()
    assert td.catalogue_rows()[-1] == ("`pilot.<cell>`", ("pilot",)) and len(in_catalogue) == len(
        set(in_catalogue)
    )


def test_the_profile_tables(ps: dict) -> None:
    assert td.profile_columns("cpu", ps) == ("cpu profile (default)", "gpu profile")
    assert td.profile_columns("gpu", ps) == ("cpu profile", "gpu profile (default)")
    assert td.ddp_tiers(ps) == td.Table(
        ("tier", "profile (`train.steps`)", "`first_step_rtol`", "`max_rel`", "`prefix_steps`", "steps judged", "`final_val_atol`"),
        (("cpu", "cpu (12 steps)", "1e-05", "0.001", "64", "12 of 12", "0.01"),
         ("cuda", "gpu (200 steps)", "0.0001", "0.001", "12", "12 of 200", "0.08")),
    )  # fmt: skip
    every = pinned("cpu", gates__loss_match__cpu__prefix_steps=None)
    assert td.ddp_tiers({"cpu": every}).rows == (("cpu", "cpu (12 steps)", "1e-05", "0.001", "null (every step)", "12 of 12", "0.01"),)  # fmt: skip
    assert td.tier_profile("cuda", {"cpu": ps["cpu"]}) is None and td.tier_profile("cuda", ps) == (
        "gpu",
        ps["gpu"],
    )
    assert td.perf_table(ps) == td.Table(
        ("device", "`throughput`", "`slowdown`", "`memory_growth`"),
        (("cpu", "skip", "50%", "20%"), ("cuda", "judge", "15%", "5%")),
    )
    assert td.approx_table(ps) == td.Table(
        ("device", "`loss_rtol`", "`max_steps_out`", "train losses judged", "`eval_rtol`", "`final_val_atol`", "from"),
        (("cpu", "0.0001", "2", "every one of 12 (cpu profile)", "0.0001 (every val loss)", "-", td.PROSE),
         ("cuda", "0.001", "0", "first 12 of 200 (gpu profile)", "0.0001 (the step-0 val loss)", "0.08", td.PROSE)),
    )  # fmt: skip
    assert td.approx_table({"cpu": ps["cpu"]}).rows[1:] == ()
    assert [r[0] for r in td.approx_table({"gpu": ps["gpu"]}).rows] == ["cuda"]  # no cpu profile: cuda's row
    assert [r[0] for r in td.ddp_tiers({"gpu": ps["gpu"]}).rows] == ["cuda"]


def test_the_gates_tables(ps: dict) -> None:
    table = td.gates_table(
        (("`finite`", ("finite",)), ("`x`", ("cross_rank.proc",))), ("what", "more"), "cpu", ps
    )
    assert table == td.Table(
        ("gate", "what", "more", "cpu profile (default)", "gpu profile"),
        (("`finite`", td.PROSE, td.PROSE, "all finite", "all finite"), ("`x`", td.PROSE, td.PROSE, "<= 1e-06", "<= 1e-06")),
    )  # fmt: skip
    made = td.tables(PARAMS)
    assert list(made) == ["gates", "catalogue", "ddp-tiers", "perf", "fresh-approx"]
    assert made["gates"].header[:2] == ("gate", "what it judges")
    assert made["catalogue"].header[:3] == ("gate", "checks", "set from (measured)")
    default, profiles = td.load_profiles(PARAMS)
    assert (
        default == "cpu" and list(profiles) == ["cpu", "gpu"] and profiles["gpu"]["train"]["device"] == "cuda"
    )
