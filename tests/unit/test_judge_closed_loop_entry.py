"""gates/judges/closed_loop.py's entry points under mutation (docs/judge-mutation.md): closed_loop on a
real, torch-free artifact tree, and the picture (what it draws, read from the figure).

The tree (tests/judge_trees.py) holds an export folder, its manifest and a report valid against
closed_loop.schema.json, each recorded in dvc.lock: the gate reads them through Artifacts, so the
schema and stage it names are checked, and every export file it reads is recorded.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from gates.judges import closed_loop as cl
from gates.judges.closed_loop import GATE
from gates.judges.gate import NoPicture
from gates.reading.artifacts import ArtifactError, Artifacts
from gates.reading.exports import read_closed_loop, read_closed_loop_picture
from judge_trees import Tree, write_export


def closed_loop(a: Artifacts) -> Any:
    """The gate on a tree: read (gates/reading/exports.py), then judged."""
    return GATE.run(a, {})


def closed_loop_picture(a: Artifacts, t: dict) -> Any:
    return GATE.draw(a, t)


REPORT = "reports/closed_loop.json"
ATOL = {"logits_atol_fp32": 1e-4, "logits_atol_bf16": 1e-2}


def sample(diff: float, ours=(1, 2, 3), engine=(1, 2, 3), first=None) -> dict:
    return {"prompt_ids": [5, 6], "logits_max_abs_diff": diff, "ours": list(ours), "engine": list(engine),
            "first_mismatch": first}  # fmt: skip


def engine(version: str, compute: str, diff: float, control: float, transformers: bool) -> dict:
    check = {
        "passed": True, "failures": [], "logits_max_abs_diff": diff, "logits_atol": 0.5,
        "tokens_compared": 6, "prompts_with_token_mismatch": 0,
        "samples": [sample(diff / 2), sample(diff)],
    }  # fmt: skip
    if transformers:
        check.update(
            missing_keys=[], unexpected_keys=[], mismatched_keys=[], prompts_with_tokenizer_mismatch=0
        )
    control_entry = {
        "perturbed_tensor": "lm_head.weight", "passed": True, "failures": [], "logits_max_abs_diff": control,
        "logits_atol": 0.5, "tokens_compared": 6, "prompts_with_token_mismatch": 0,
    }  # fmt: skip
    return {"version": version, "compute_dtype": compute, "seconds": 0.1, "check": check,
            "negative_control": control_entry}  # fmt: skip


def make_tree(root: Path, dtype: str = "fp32", hf=(2e-6, 0.5), ort=(3e-6, 0.7), **changes: Any) -> Tree:
    """A tree whose report holds for its export; `changes` edit the report's top level."""
    manifest = write_export(root / "exports" / "fresh", dtype=dtype)
    report = {
        "format": "xtrain-closed-loop/2", "passed": True, "failures": [], "dtype": dtype,
        "export_files": {n: f["md5"] for n, f in manifest["files"].items()},
        "checkpoint_model_md5": "c" * 32, "torch_version": "2.13.0+cpu", "prompts": 2, "new_tokens": 3,
        "engines": {
            "transformers": engine("4.51.0", dtype, *hf, transformers=True),
            "onnxruntime": engine("1.20.1", "fp32", *ort, transformers=False),
        },
    }  # fmt: skip
    report.update(changes)
    (root / "reports").mkdir(parents=True, exist_ok=True)
    (root / REPORT).write_text(json.dumps(report))
    tree = Tree(root, params={"closed_loop": dict(ATOL)})
    tree.record_out("export", "exports/fresh")
    tree.record_out("closed_loop", REPORT)
    return tree


class Loose(Artifacts):
    """Artifacts that let NaN through (reading only): closed_loop's own non-finite guard, behind the reader's."""

    def json(self, rel: str, schema: str, stage: str, refuse_non_finite: bool = True) -> Any:
        return super().json(rel, schema, stage, refuse_non_finite=False)


def loose(tree: Tree) -> Loose:
    a = tree.artifacts()
    return Loose(a.root, a.lock, a.params)


NEXT = (
    ". Next: reports/closed_loop.json engines.*.check.samples (first_mismatch, per-prompt diffs), and "
    "config.json vs the model config"
)


def test_a_report_that_holds_for_the_export_passes_and_every_file_read_is_recorded(tmp_path: Path) -> None:
    a = make_tree(tmp_path).artifacts()
    o = closed_loop(a)
    assert (o.status, o.measured) == ("pass", 3e-6)
    assert o.threshold == "transformers < 0.0001, onnxruntime < 0.0001, tokens equal"
    assert o.message == (
        "transformers 4.51.0 reproduces logits (max abs diff 2e-06) and 6 greedy tokens, control caught "
        "(diff 0.5); onnxruntime 1.20.1 reproduces logits (max abs diff 3e-06) and 6 greedy tokens, control "
        "caught (diff 0.7)"
    )
    files = sorted(p.name for p in (tmp_path / "exports" / "fresh").iterdir())
    assert sorted(a.read) == sorted([REPORT, *(f"exports/fresh/{n}" for n in files)])
    assert all(v["matches_dvc_lock"] for v in a.read.values())
    assert GATE.run(make_tree(tmp_path / "again").artifacts(), {}).message == o.message


def test_the_schemas_and_stages_it_reads_are_the_reports_and_the_exports(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    (tmp_path / "exports" / "fresh" / "manifest.json").write_text(json.dumps({"dtype": "fp32", "files": {}}))
    tree.record_out("export", "exports/fresh")
    with pytest.raises(ArtifactError, match=r"^exports/fresh/manifest\.json: "):
        closed_loop(tree.artifacts())  # the manifest is validated against manifest.schema.json
    tree = make_tree(tmp_path / "r", prompts=0)
    with pytest.raises(ArtifactError, match=r"^reports/closed_loop\.json: prompts"):
        closed_loop(tree.artifacts())  # the report against closed_loop.schema.json
    for stage in ("closed_loop", "export"):
        tree = make_tree(tmp_path / stage)
        del tree.stages[stage]  # the file exists but its stage did not write it: refused, never read
        with pytest.raises(ArtifactError, match=f"does not record stage {stage}:"):
            closed_loop(tree.artifacts())


def test_a_bf16_export_holds_transformers_to_the_bf16_tolerance_and_onnxruntime_to_fp32(
    tmp_path: Path,
) -> None:
    o = closed_loop(make_tree(tmp_path, dtype="bf16", hf=(5e-3, 0.5), ort=(5e-5, 0.7)).artifacts())
    assert (o.status, o.measured) == ("pass", 5e-3)
    assert o.threshold == "transformers < 0.01, onnxruntime < 0.0001, tokens equal"
    o = closed_loop(make_tree(tmp_path / "b", dtype="bf16", hf=(5e-3, 0.5), ort=(2e-4, 0.7)).artifacts())
    assert (o.status, o.measured) == ("fail", 5e-3)
    assert o.message == "onnxruntime: logits max abs diff 0.0002 >= 0.0001" + NEXT


def test_a_failure_keeps_the_threshold_and_joins_every_problem(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, hf=(2e-4, 1e-5), passed=False, failures=["x", "y"])
    o = closed_loop(tree.artifacts())
    assert (o.status, o.measured) == ("fail", 2e-4)
    assert o.threshold == "transformers < 0.0001, onnxruntime < 0.0001, tokens equal"
    assert o.message == (
        "transformers: logits max abs diff 0.0002 >= 0.0001; transformers: the negative control (perturbed "
        "lm_head.weight) moved the logits by 1e-05, not above 0.0001: the check cannot fail; the producer "
        "reported: x; y" + NEXT
    )


def test_an_export_file_rewritten_after_the_report_fails(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    (tmp_path / "exports" / "fresh" / "config.json").write_text("{}\n")
    tree.record_out("export", "exports/fresh")  # dvc repro export ran again; the closed loop did not
    o = closed_loop(tree.artifacts())
    assert o.status == "fail" and o.message == (
        "exports/fresh changed since the closed loop verified it (config.json): re-run `dvc repro "
        "closed_loop`, or find what rewrote the export" + NEXT
    )


@pytest.mark.parametrize("which", ["transformers", "onnxruntime"])
def test_a_non_finite_summary_diff_of_either_engine_is_measured_as_nan(tmp_path: Path, which: str) -> None:
    nan = {which: (math.nan, 0.5)}
    o = closed_loop(loose(make_tree(tmp_path, **{"hf": nan.get("transformers", (2e-6, 0.5)),
                                                 "ort": nan.get("onnxruntime", (3e-6, 0.7))})))  # fmt: skip
    assert o.status == "fail" and math.isnan(float(o.measured))
    assert o.message.startswith(f"{which}: non-finite logits diff [nan, nan, nan]")


# -- the picture ---------------------------------------------------------------------------------------


def bars(ax) -> list[float]:
    return [p.get_height() for p in ax.patches]


def test_the_picture_draws_each_engines_bars_controls_and_tokens(tmp_path: Path, drawn) -> None:
    from gates.judges import plots

    tree = make_tree(tmp_path)
    report = json.loads((tmp_path / REPORT).read_text())
    s = report["engines"]["onnxruntime"]["check"]["samples"]
    s[1].update(engine=[1, 9, 3, 4], first_mismatch=1)
    (tmp_path / REPORT).write_text(json.dumps(report))
    tree.record_out("closed_loop", REPORT)
    pic = closed_loop_picture(tree.artifacts(), {})
    assert pic.html == "<svg/>"
    assert pic.caption == (
        "One row per engine (onnxruntime, transformers). Left: largest absolute logit difference per prompt "
        f"(logit units, log scale; 0 drawn at {plots.ZERO_FLOOR:g}) and the engine's negative control (one "
        "tensor perturbed), which must reach the line. Right: each generated token, green where the engine "
        "chose ours, red where not; a black bar marks where the outputs part. Pass: every prompt below its "
        "atol (onnxruntime 0.0001, transformers 0.0001), all green, each control over its line, and the "
        "export unchanged since."
    )
    (fig,) = drawn
    ort_bars, ort_tokens, hf_bars, hf_tokens = fig.axes
    assert fig.get_figheight() == pytest.approx(2.6 * 2 * 2)  # two rows of 2.6 * 2 inches
    assert bars(ort_bars) == pytest.approx([1.5e-6, 3e-6, 0.7])
    assert bars(hf_bars) == pytest.approx([1e-6, 2e-6, 0.5])
    assert [t.get_text() for t in ort_bars.get_xticklabels()] == ["0", "1", "control"]
    assert [p.get_facecolor() for p in ort_bars.patches] == [matplotlib_rgba(plots.OK)] * 3
    assert [line.get_ydata()[0] for line in ort_bars.get_lines()] == [1e-4]
    assert (ort_bars.get_title(), ort_bars.get_xlabel(), ort_bars.get_ylabel()) == (
        "onnxruntime logits (fp32)",
        "prompt",
        "max |logit ours − onnxruntime|",
    )
    assert ort_bars.get_legend().get_texts()[0].get_text() == "atol 0.0001"
    assert (ort_tokens.get_title(), ort_tokens.get_xlabel(), ort_tokens.get_ylabel()) == (
        "greedy tokens: ours vs onnxruntime",
        "generated token position",
        "prompt",
    )
    assert hf_tokens.get_title() == "greedy tokens: ours vs transformers"
    assert list(ort_tokens.get_yticks()) == [0, 1]
    grid = ort_tokens.get_images()[0].get_array().tolist()
    assert grid == [[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]]  # width: the longest token list
    (bar,) = ort_tokens.get_lines()  # the one prompt that parts, at the position it parts
    assert (list(bar.get_xdata()), list(bar.get_ydata()), bar.get_marker()) == ([1], [1], "|")
    assert not hf_tokens.get_lines()


def matplotlib_rgba(color: str) -> tuple:
    from matplotlib.colors import to_rgba

    return to_rgba(color)


def test_the_picture_takes_the_tolerance_from_params_else_from_the_report(tmp_path: Path, drawn) -> None:
    tree = make_tree(tmp_path, dtype="bf16")
    tree.params = {"closed_loop": {"logits_atol_fp32": 3e-4, "logits_atol_bf16": 7e-2}}
    assert closed_loop_picture(tree.artifacts(), {}).caption.endswith(
        "atol (onnxruntime 0.0003, transformers 0.07), all green, each control over its line, and the export "
        "unchanged since."
    )
    assert [line.get_ydata()[0] for line in drawn[0].axes[2].get_lines()] == [7e-2]
    tree.params = None
    assert "atol (onnxruntime 0.5, transformers 0.5)" in closed_loop_picture(tree.artifacts(), {}).caption


def test_a_bar_on_the_wrong_side_of_the_line_is_red(tmp_path: Path, drawn) -> None:
    from matplotlib.colors import to_rgba

    from gates.judges import plots

    closed_loop_picture(make_tree(tmp_path, ort=(1.5e-4, 1e-5)).artifacts(), {})
    ort_bars = drawn[0].axes[0]
    assert [p.get_facecolor() for p in ort_bars.patches] == [to_rgba(plots.OK), to_rgba(plots.BAD),
                                                             to_rgba(plots.BAD)]  # fmt: skip


def test_an_engine_without_samples_has_no_picture(tmp_path: Path, monkeypatch) -> None:
    tree = make_tree(tmp_path)
    a = tree.artifacts()
    report = a.json(REPORT, "closed_loop.schema.json", "closed_loop")
    report["engines"]["transformers"]["check"]["samples"] = []  # the schema forbids it; the picture too
    monkeypatch.setattr(Artifacts, "json", lambda self, rel, schema, stage, **kw: report)
    with pytest.raises(NoPicture, match=r"^reports/closed_loop\.json: transformers has no samples$"):
        closed_loop_picture(a, {})


def test_the_token_matrix_marks_each_prompt_where_it_parts(drawn) -> None:
    from gates.judges import plots

    _, (ax,) = plots.figure()
    samples = [sample(0.0, ours=(1, 2), engine=(1, 2, 3)), sample(0.0, ours=(4, 5, 6), engine=(4, 0, 6), first=1),
               sample(0.0, ours=(7,), engine=(8,), first=0), sample(0.0, ours=(7, 8), engine=(7,), first=1)]  # fmt: skip
    cl._token_matrix(ax, samples, "x")
    assert ax.get_images()[0].get_array().tolist() == [[1, 1, 0], [1, 0, 1], [0, 0, 0], [1, 0, 0]]
    assert [(list(m.get_xdata()), list(m.get_ydata())) for m in ax.get_lines()] == [
        ([1], [1]),
        ([0], [2]),
        ([1], [3]),
    ]
    m = ax.get_lines()[0]
    assert (m.get_color(), m.get_markersize(), m.get_markeredgewidth()) == ("black", 14, 2)
    assert list(ax.get_yticks()) == [0, 1, 2, 3] and ax.get_title() == "greedy tokens: ours vs x"


def test_the_records_are_the_report_the_export_and_the_params_section(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, dtype="bf16")
    r = read_closed_loop(tree.artifacts(), {})
    assert r.report["dtype"] == "bf16" and r.export.manifest["dtype"] == "bf16"
    assert r.export.files == {n: md5 for n, md5 in r.report["export_files"].items()}
    assert r.params == {"logits_atol_fp32": 1e-4, "logits_atol_bf16": 1e-2}
    a = tree.artifacts()
    p = read_closed_loop_picture(a, {})  # the report alone: the picture draws no export
    assert (p.report, p.params) == (r.report, r.params) and list(a.read) == [REPORT]
    tree.params = None
    assert read_closed_loop(tree.artifacts(), {}).params is None
    assert read_closed_loop_picture(tree.artifacts(), {}).params is None
