"""gates/judges/export_gguf.py under mutation (docs/judge-mutation.md): both exports' model.gguf read back.

A torch-free tree: exports/fresh and exports/pinned, each a one-layer Qwen3 export with its GGUF
written by the export's own writer (tests/unit/test_judge_gguf.py builds them), recorded in dvc.lock.
Each test breaks one export and asserts the exact verdict: which export, which file, which problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_judge_gguf import CONFIG, TENSORS, weights, write_bare_gguf, write_gguf_export

from gates.judges import export_gguf as gg
from gates.judges.export_gguf import EXPORTS, GATE, READ
from judge_trees import Tree

THRESHOLD = "every tensor bitwise, metadata equal"
NEXT = (
    ". Next: xtrain/export/gguf_file.py (names, types, metadata) and "
    "python -c 'from contracts.gguf_check import check_gguf; ...' on the export"
)


def export_gguf(a: Any) -> Any:
    """The gate on a tree: each export read back (gates/reading/exports.py), then judged."""
    return GATE.run(a, {})


def export_gguf_picture(a: Any, t: Any) -> Any:
    return GATE.draw(a, t)


def build(tmp_path: Path, pinned: dict[str, Any] | None = None, fresh: dict[str, Any] | None = None) -> Tree:
    """Both exports (bf16 pinned, fp32 fresh: the two dtypes) recorded as the export stage's outs."""
    tree = Tree(tmp_path)
    write_gguf_export(tmp_path / "exports" / "fresh", "fp32", **(fresh or {}))
    write_gguf_export(tmp_path / "exports" / "pinned", "bf16", **(pinned or {}))
    record(tree)
    return tree


def record(tree: Tree) -> None:
    for name in EXPORTS:
        tree.record_out("export", f"exports/{name}")


def test_two_faithful_exports_pass(tmp_path: Path) -> None:
    out = export_gguf(build(tmp_path).artifacts())
    assert (out.status, out.measured, out.threshold) == ("pass", "equal", THRESHOLD)
    assert out.message == (
        f"{2 * TENSORS} tensors in 2 GGUF files equal their safetensors; metadata equals "
        "config.json and tokenizer.json"
    )


def test_the_gate_reads_every_file_of_both_exports(tmp_path: Path) -> None:
    a = build(tmp_path).artifacts()
    export_gguf(a)
    assert sorted(a.read) == sorted(f"exports/{n}/{f}" for n in ("fresh", "pinned") for f in READ)


@pytest.mark.parametrize("name", EXPORTS)
def test_a_changed_value_in_either_export_fails_naming_it(tmp_path: Path, name: str) -> None:
    dtype = "fp32" if name == "fresh" else "bf16"
    tensors = weights(dtype)
    tensors["model.norm.weight"][3] = 0.5
    out = export_gguf(build(tmp_path, **{name: {"gguf_tensors": tensors}}).artifacts())
    assert (out.status, out.measured, out.threshold) == ("fail", "1 problems", THRESHOLD)
    assert out.message == (
        f"exports/{name}/model.gguf: tensor output_norm.weight: 1 of 4 values differ from model.norm.weight"
        + NEXT
    )


OTHER = {"fresh": "pinned", "pinned": "fresh"}
EOS_PROBLEM = "metadata tokenizer.ggml.eos_token_id: 4, config.json says 6"


def broken_and_other_wrong(tmp_path: Path, name: str) -> Tree:
    """Export `name` to be broken by the test; the other export's GGUF has a wrong eos id."""
    return build(tmp_path, **{OTHER[name]: {"gguf_config": {**CONFIG, "eos_token_id": 4}}})


def expect_two(out: Any, name: str, problem: str) -> None:
    """Both exports judged, in EXPORTS order, whichever one is broken."""
    lines = {name: problem, OTHER[name]: f"exports/{OTHER[name]}/model.gguf: {EOS_PROBLEM}"}
    assert (out.status, out.measured) == ("fail", "2 problems")
    assert out.message == f"{lines['fresh']}; {lines['pinned']}" + NEXT


@pytest.mark.parametrize("name", EXPORTS)
@pytest.mark.parametrize("missing", READ)
def test_a_missing_file_is_named_and_the_other_export_still_judged(
    tmp_path: Path, missing: str, name: str
) -> None:
    tree = broken_and_other_wrong(tmp_path, name)
    (tmp_path / "exports" / name / missing).unlink()
    record(tree)
    out = export_gguf(tree.artifacts())
    expect_two(out, name, f"exports/{name}: {missing} missing (re-run `dvc repro export`)")


def test_every_missing_file_is_listed(tmp_path: Path) -> None:
    tree = build(tmp_path)
    for f in ("model.gguf", "tokenizer.json"):
        (tmp_path / "exports" / "fresh" / f).unlink()
    record(tree)
    out = export_gguf(tree.artifacts())
    assert (out.status, out.measured) == ("fail", "1 problems")
    assert (
        out.message == "exports/fresh: model.gguf, tokenizer.json missing (re-run `dvc repro export`)" + NEXT
    )


@pytest.mark.parametrize("name", EXPORTS)
def test_a_gguf_that_cannot_be_read_fails_its_export_and_the_other_is_still_judged(
    tmp_path: Path, name: str
) -> None:
    tree = broken_and_other_wrong(tmp_path, name)
    (tmp_path / "exports" / name / "model.gguf").write_bytes(b"GGUX" + bytes(60))
    record(tree)
    out = export_gguf(tree.artifacts())
    expect_two(out, name, f"exports/{name}: cannot be read back: GGUF magic invalid")


def test_a_config_without_a_key_fails_the_export(tmp_path: Path) -> None:
    tree = build(tmp_path)
    (tmp_path / "exports" / "pinned" / "config.json").write_text(json.dumps({"vocab_size": 7}))
    record(tree)
    out = export_gguf(tree.artifacts())
    assert out.message == "exports/pinned: cannot be read back: 'num_hidden_layers'" + NEXT


def test_the_root_is_cut_from_a_read_error_naming_the_file(tmp_path: Path) -> None:
    tree = build(tmp_path)
    (tmp_path / "exports" / "fresh" / "config.json").write_text("{bad")
    record(tree)
    out = export_gguf(tree.artifacts())
    assert out.message == (
        "exports/fresh: cannot be read back: exports/fresh/config.json: line 1 column 2: not valid JSON: "
        "Expecting property name enclosed in double quotes" + NEXT
    )


def test_only_the_first_eight_problems_are_printed_but_all_are_counted(tmp_path: Path) -> None:
    tensors = {k: v + 1 for k, v in weights().items()}  # five tensors wrong
    config = {**CONFIG, "bos_token_id": 0, "eos_token_id": 1, "hidden_size": 5, "intermediate_size": 9}
    out = export_gguf(build(tmp_path, fresh={"gguf_tensors": tensors, "gguf_config": config}).artifacts())
    assert (out.status, out.measured) == ("fail", "9 problems")
    printed = out.message.removesuffix(NEXT).split("; ")
    assert len(printed) == 8
    assert printed[0] == "exports/fresh/model.gguf: tensor blk.0.attn_norm.weight: 4 of 4 values differ from " \
        "model.layers.0.input_layernorm.weight"  # fmt: skip
    assert (
        printed[-1] == "exports/fresh/model.gguf: metadata tokenizer.ggml.bos_token_id: 0, config.json says 5"
    )


# --- the picture ----------------------------------------------------------------------------------


def test_the_picture_of_two_faithful_exports(tmp_path: Path) -> None:
    pic = export_gguf_picture(build(tmp_path).artifacts(), None)
    rows = "".join(
        f"<tr><td>exports/{n}/model.gguf</td><td>{TENSORS}</td><td><span class='ok'>equal</span></td><td>-</td></tr>"
        for n in ("fresh", "pinned")
    )
    assert pic.html == (
        "<table class='files'><tr><th>file</th><th>tensors compared</th><th>vs safetensors and config.json"
        f"</th><th>first problem</th></tr>{rows}</table>"
    )
    assert pic.caption == (
        "Each export's model.gguf read back with GGUFReader: every tensor against model.safetensors (bitwise "
        "for f32), the metadata against config.json and tokenizer.json. Pass: both rows equal."
    )


def test_the_picture_shows_the_problem_count_and_the_first_problem(tmp_path: Path) -> None:
    tensors = weights("bf16")
    tensors["model.norm.weight"] = tensors["model.norm.weight"] * 2
    tokenizer = {"model": {"vocab": {"<a>": 0}, "merges": []}}
    tree = build(tmp_path, pinned={"gguf_tensors": tensors, "gguf_tokenizer": tokenizer})
    html = export_gguf_picture(tree.artifacts(), None).html
    assert (
        "<tr><td>exports/pinned/model.gguf</td><td>5</td><td><span class='bad'>4 problems</span></td>"
        "<td>tensor output_norm.weight: 4 of 4 values differ from model.norm.weight</td></tr>"
    ) in html
    assert (
        "<tr><td>exports/fresh/model.gguf</td><td>5</td><td><span class='ok'>equal</span></td><td>-</td></tr>"
        in html
    )


def test_the_picture_escapes_html_in_the_first_problem(tmp_path: Path) -> None:
    tree = build(tmp_path)
    write_bare_gguf(tmp_path / "exports" / "fresh" / "model.gguf", "qwen2")
    html = export_gguf_picture(tree.artifacts(), None).html
    assert (
        "<td><span class='bad'>19 problems</span></td>"
        "<td>metadata general.architecture: &#x27;qwen2&#x27;, config.json says &#x27;qwen3&#x27;</td></tr>"
    ) in html


# --- the gate's entry ---------------------------------------------------------------------------


def test_the_gate_runs_export_gguf_and_draws_its_picture(tmp_path: Path) -> None:
    a = build(tmp_path).artifacts()
    assert GATE.id == "export_gguf" and GATE.takes == () and GATE.picture is gg.export_gguf_picture
    assert GATE.threshold(None) == THRESHOLD
    out = GATE.run(a, None)
    assert (out.status, out.measured) == ("pass", "equal")
