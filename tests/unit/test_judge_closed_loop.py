"""gates/judges/closed_loop.py under mutation (docs/judge-mutation.md): the verdict recomputed from raw numbers.

judge_check, judge_control and judge_files are pure: hand-made engine checks that differ in one way
each, and the exact problem line each must give (tests/pipeline/test_gates.py runs the gate on a real report).
"""

from __future__ import annotations

import math

import pytest

from gates.judges.closed_loop import _finite, judge_check, judge_control, judge_files
from gates.reading.exports import ClosedLoopRecords, ExportFolder


def sample(ours=(1, 2, 3), engine=(1, 2, 3), diff: float = 1e-6) -> dict:
    return {"ours": list(ours), "engine": list(engine), "logits_max_abs_diff": diff, "first_mismatch": None}


def check(n: int = 2, diff: float = 1e-6, **extra) -> dict:
    c = {"samples": [sample() for _ in range(n)], "logits_max_abs_diff": diff}
    c.update(extra)
    return c


def hf_check(**changes) -> dict:
    loading = {
        "missing_keys": [],
        "unexpected_keys": [],
        "mismatched_keys": [],
        "prompts_with_tokenizer_mismatch": 0,
    }
    return check(**{**loading, **changes})


def test_a_clean_check_has_no_problem() -> None:
    assert judge_check("onnxruntime", check(), 1e-4, 2, 3) == []
    assert judge_check("transformers", hf_check(), 1e-4, 2, 3) == []


def test_a_missing_prompt_is_named() -> None:
    assert judge_check("onnxruntime", check(n=1), 1e-4, 2, 3) == ["onnxruntime: 1 samples for 2 prompts"]


def test_the_tolerance_is_strict_and_covers_every_prompt() -> None:
    assert judge_check("onnxruntime", check(diff=1e-4), 1e-4, 2, 3) == [
        "onnxruntime: logits max abs diff 0.0001 >= 0.0001"
    ]
    c = check()
    c["samples"][1]["logits_max_abs_diff"] = 2e-4
    assert judge_check("onnxruntime", c, 1e-4, 2, 3) == ["onnxruntime: logits max abs diff 0.0002 >= 0.0001"]
    assert judge_check("onnxruntime", check(diff=9.99e-5), 1e-4, 2, 3) == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None, "0.1"])
def test_a_non_finite_diff_anywhere_is_named(bad) -> None:
    c = check()
    c["samples"][0]["logits_max_abs_diff"] = bad
    c["samples"][1]["logits_max_abs_diff"] = bad
    assert judge_check("onnxruntime", c, 1e-4, 2, 3) == [f"onnxruntime: non-finite logits diff {[bad, bad]}"]
    c = check(diff=math.nan)
    for s in c["samples"]:
        s["logits_max_abs_diff"] = math.nan
    assert judge_check("x", c, 1e-4, 2, 3) == ["x: non-finite logits diff [nan, nan, nan]"]
    c["samples"].append(sample(diff=math.nan))
    assert judge_check("x", c, 1e-4, 3, 3) == ["x: non-finite logits diff [nan, nan, nan]"]  # three shown


def test_differing_greedy_tokens_name_the_prompt_and_position() -> None:
    c = check(n=3)
    c["samples"][1] = sample(engine=(1, 9, 3))
    c["samples"][2] = sample(ours=(1, 2), engine=(1, 2))
    assert judge_check("onnxruntime", c, 1e-4, 3, 3) == [
        "onnxruntime: prompt 1: greedy tokens differ (first at 1, 3 ours vs 3, 3 expected)",
        "onnxruntime: prompt 2: greedy tokens differ (first at None, 2 ours vs 2, 3 expected)",
    ]
    c = check(n=1)
    c["samples"][0] = sample(ours=(1, 2, 3), engine=(1, 2, 3, 4))
    assert judge_check("x", c, 1e-4, 1, 3) == [
        "x: prompt 0: greedy tokens differ (first at None, 3 ours vs 4, 3 expected)"
    ]


@pytest.mark.parametrize("key", ["missing_keys", "unexpected_keys", "mismatched_keys"])
def test_transformers_loading_reports_are_problems(key: str) -> None:
    assert judge_check("transformers", hf_check(**{key: ["w"]}), 1e-4, 2, 3) == [
        f"transformers: loading reported {key} ['w']"
    ]
    c = hf_check()
    del c[key]
    assert judge_check("transformers", c, 1e-4, 2, 3) == [f"transformers: loading reported {key} None"]
    assert judge_check("onnxruntime", check(**{key: ["w"]}), 1e-4, 2, 3) == []  # only transformers loads


def test_transformers_tokenizer_mismatches_are_problems() -> None:
    assert judge_check("transformers", hf_check(prompts_with_tokenizer_mismatch=2), 1e-4, 2, 3) == [
        "transformers: tokenizer ids differ for 2 prompts"
    ]
    c = hf_check()
    del c["prompts_with_tokenizer_mismatch"]
    assert judge_check("transformers", c, 1e-4, 2, 3) == [
        "transformers: tokenizer ids differ for None prompts"
    ]


def test_a_control_must_exceed_the_tolerance() -> None:
    assert judge_control("onnxruntime", {"logits_max_abs_diff": 0.5, "perturbed_tensor": "w"}, 1e-4) == []
    for d in (1e-4, 1e-5, math.nan, math.inf, None):
        assert judge_control(
            "onnxruntime", {"logits_max_abs_diff": d, "perturbed_tensor": "lm_head"}, 1e-4
        ) == [
            f"onnxruntime: the negative control (perturbed lm_head) moved the logits by {d}, not above "
            "0.0001: the check cannot fail"
        ]


def test_finite_means_a_finite_number() -> None:
    assert _finite(0) and _finite(1.5) and _finite(-3)
    assert not _finite(math.nan) and not _finite(math.inf) and not _finite(None) and not _finite("1")


def report(files: dict[str, str], dtype: str = "fp32") -> dict:
    return {"export_files": files, "dtype": dtype}


def test_the_report_must_cover_the_export_as_it_is_now() -> None:
    manifest = {"files": {"a": {}, "b": {}, "c": {}}, "dtype": "fp32"}
    files = {"a": "1", "b": "2", "c": "3"}
    assert judge_files(report(files), manifest, files) == []
    assert judge_files(report({"b": "2"}), manifest, files) == [
        "the report does not cover a, c of the export's manifest"
    ]
    assert judge_files(report({"a": "1", "b": "9", "c": "8", "d": "4"}), manifest, files) == [
        "exports/fresh changed since the closed loop verified it (b, c, d): re-run `dvc repro closed_loop`, "
        "or find what rewrote the export"
    ]
    assert judge_files(report(files, "bf16"), manifest, files) == ["report dtype bf16, export dtype fp32"]


# -- the gate over a whole report ------------------------------------------------------------------------


def Reader(report: dict, dtype: str = "fp32") -> ClosedLoopRecords:
    """What closed_loop judges, built by hand (no tree): the report, the export's manifest and files, the
    resolved params' closed_loop section."""
    export = ExportFolder({"dtype": dtype, "files": {"a": {}, "b": {}}}, {"a": "1", "b": "2"})
    return ClosedLoopRecords(report, export, {"logits_atol_fp32": 1e-4, "logits_atol_bf16": 1e-2})


def full_report(hf_diff: float = 2e-6, ort_diff: float = 3e-6, **changes) -> dict:
    r = {
        "prompts": 2,
        "new_tokens": 3,
        "dtype": "fp32",
        "passed": True,
        "failures": [],
        "export_files": {"a": "1", "b": "2"},
        "engines": {
            "transformers": {"version": "4.51", "check": hf_check(diff=hf_diff), "negative_control": {"logits_max_abs_diff": 0.5, "perturbed_tensor": "w"}},
            "onnxruntime": {"version": "1.20", "check": check(diff=ort_diff), "negative_control": {"logits_max_abs_diff": 0.7, "perturbed_tensor": "w"}},
        },
    }  # fmt: skip
    r.update(changes)
    return r


def test_a_report_that_holds_passes_naming_each_engine() -> None:
    from gates.judges.closed_loop import closed_loop

    o = closed_loop(Reader(full_report()))
    assert (o.status, o.measured) == ("pass", 3e-6)
    assert o.threshold == "transformers < 0.0001, onnxruntime < 0.0001, tokens equal"
    assert o.message == (
        "transformers 4.51 reproduces logits (max abs diff 2e-06) and 6 greedy tokens, control caught (diff 0.5); "
        "onnxruntime 1.20 reproduces logits (max abs diff 3e-06) and 6 greedy tokens, control caught (diff 0.7)"
    )


def test_transformers_runs_in_the_exports_dtype_and_onnxruntime_in_fp32() -> None:
    from gates.judges.closed_loop import closed_loop

    r = full_report(hf_diff=5e-3, ort_diff=5e-5, dtype="bf16")
    o = closed_loop(Reader(r, dtype="bf16"))
    assert o.status == "pass" and o.threshold == "transformers < 0.01, onnxruntime < 0.0001, tokens equal"
    o = closed_loop(Reader(full_report(hf_diff=5e-3)))
    assert o.status == "fail" and o.message.startswith(
        "transformers: logits max abs diff 0.005 >= 0.0001. Next: "
    )


def test_the_producers_word_is_never_trusted_but_its_failure_counts() -> None:
    from gates.judges.closed_loop import closed_loop

    o = closed_loop(Reader(full_report(passed=False, failures=["a", "b"])))
    assert o.status == "fail" and o.message == (
        "the producer reported: a; b. Next: reports/closed_loop.json engines.*.check.samples (first_mismatch, "
        "per-prompt diffs), and config.json vs the model config"
    )
    r = full_report()
    r["engines"]["onnxruntime"]["negative_control"]["logits_max_abs_diff"] = 1e-5
    o = closed_loop(Reader(r))
    assert (
        o.status == "fail"
        and "onnxruntime: the negative control (perturbed w) moved the logits by 1e-05" in o.message
    )
    r = full_report()
    r["engines"]["transformers"]["check"]["logits_max_abs_diff"] = math.nan
    o = closed_loop(Reader(r))
    assert (o.status, o.measured) == ("fail", "nan")  # a non-finite diff: never a number that passes
    reader = Reader(full_report())
    reader.export.files["b"] = "9"
    assert "exports/fresh changed since the closed loop verified it (b)" in closed_loop(reader).message
