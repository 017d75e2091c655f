"""The closed_loop and export_gguf gates recompute their verdicts: a report that claims a pass is not one.

One real tree (tiny config: a single-device run, both exports, a real closed-loop report through
transformers and ONNX Runtime); each test copies it, breaks one thing, and runs `python -m gates check`.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from conftest import PARAMS, TinyData, tiny_spec, tiny_text
from contracts.checkpoint_dir import resolve_checkpoint
from contracts.fileio import atomic_write_json
from gate_tree import seal, write_pipeline
from gates.__main__ import main as gates_main
from xtrain.core.launch import run_single
from xtrain.export.closed_loop_run import closed_loop
from xtrain.export.hf_folder import export

REPORT = "reports/closed_loop.json"


@pytest.fixture(scope="module")
def tree(tiny_data: TinyData, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cl-tree")
    text = PARAMS.read_text()  # as written (the tests edit its text): without the scope block, as a
    scope = text.index("\n  scope:")  # stand-in pipeline (write_pipeline) declares none
    (root / "params.yaml").write_text(text[:scope] + text[text.index("\n  loss_match:", scope) :])
    run_single(tiny_spec(tiny_data, run_dir=root / "runs" / "single"))
    for name in ("fresh", "pinned"):
        export(root / "runs" / "single", root / "exports" / name, "fp32")
    report = closed_loop(
        root / "exports" / "fresh",
        resolve_checkpoint(root / "runs" / "single"),
        tiny_text(3000, seed=5),
        2,
        8,
        8,
        {"fp32": 1e-4, "bf16": 1e-2},
    )
    atomic_write_json(root / REPORT, report)
    write_pipeline(root, ["train_single", "export", "closed_loop"])
    return root


@pytest.fixture()
def work(tree: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tree, tmp_path / "tree"))


def gate(root: Path, gid: str) -> dict:
    seal(root)  # the tree as the test broke it, judged by the gate's recomputation (not the seals)
    code = gates_main(["--root", str(root), "check", "--only", gid])
    g = next(g for g in json.loads((root / "reports" / "gates.json").read_text())["gates"] if g["id"] == gid)
    assert (code == 0) == (g["status"] == "pass")
    return g


def edit_report(root: Path, change) -> None:
    r = json.loads((root / REPORT).read_text())
    change(r)
    (root / REPORT).write_text(json.dumps(r))  # allow_nan: NaN is written as NaN


def test_the_closed_loop_gate_passes_on_the_real_report(work: Path) -> None:
    g = gate(work, "closed_loop")
    assert g["status"] == "pass", g["message"]
    assert g["measured"] < 1e-4
    assert "transformers" in g["message"] and "onnxruntime" in g["message"]


@pytest.mark.parametrize("engine", ["transformers", "onnxruntime"])
def test_a_report_claiming_a_pass_with_a_diff_of_5_fails(work: Path, engine: str) -> None:
    def claim(r: dict) -> None:
        r["engines"][engine]["check"]["samples"][1]["logits_max_abs_diff"] = 5.0  # passed stays True

    edit_report(work, claim)
    g = gate(work, "closed_loop")
    assert g["status"] == "fail" and f"{engine}: logits max abs diff 5 >= 0.0001" in g["message"]


@pytest.mark.parametrize("where", ["summary", "sample", "control"])
def test_a_nan_anywhere_fails(work: Path, where: str) -> None:
    def nan(r: dict) -> None:
        e = r["engines"]["onnxruntime"]
        target = {
            "summary": e["check"],
            "sample": e["check"]["samples"][0],
            "control": e["negative_control"],
        }[where]
        target["logits_max_abs_diff"] = math.nan

    edit_report(work, nan)
    g = gate(work, "closed_loop")
    assert g["status"] == "fail"
    # The artifact reader refuses any non-finite number before the gate's own logic runs.
    assert "logits_max_abs_diff = nan: non-finite" in g["message"]


def test_a_report_covering_a_single_file_fails(work: Path) -> None:
    edit_report(
        work, lambda r: r.update(export_files={"model.safetensors": r["export_files"]["model.safetensors"]})
    )
    g = gate(work, "closed_loop")
    assert g["status"] == "fail" and "does not cover README.md, config.json" in g["message"]


def test_a_changed_export_byte_fails(work: Path) -> None:
    path = work / "exports/fresh/model.gguf"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    g = gate(work, "closed_loop")
    assert g["status"] == "fail" and "changed since the closed loop verified it (model.gguf)" in g["message"]


def test_greedy_tokens_are_compared_by_the_gate(work: Path) -> None:
    def swap(r: dict) -> None:
        s = r["engines"]["onnxruntime"]["check"]["samples"][0]
        s["engine"][3] = (s["engine"][3] + 1) % 100  # counts and passed left claiming agreement

    edit_report(work, swap)
    g = gate(work, "closed_loop")
    assert g["status"] == "fail" and "onnxruntime: prompt 0: greedy tokens differ (first at 3" in g["message"]


def test_a_control_that_did_not_move_the_logits_fails(work: Path) -> None:
    edit_report(
        work, lambda r: r["engines"]["transformers"]["negative_control"].update(logits_max_abs_diff=1e-5)
    )
    g = gate(work, "closed_loop")
    assert g["status"] == "fail" and "transformers: the negative control" in g["message"]


def test_the_tolerance_comes_from_params_not_the_report(work: Path) -> None:
    params = (
        (work / "params.yaml").read_text().replace("logits_atol_fp32: 1.0e-4", "logits_atol_fp32: 1.0e-9")
    )
    (work / "params.yaml").write_text(params)

    def claim(r: dict) -> None:  # a diff fine under the default 1e-4, and a report claiming atol 1.0
        r["engines"]["onnxruntime"]["check"].update(logits_atol=1.0)
        r["engines"]["onnxruntime"]["check"]["samples"][0]["logits_max_abs_diff"] = 1e-6

    edit_report(work, claim)
    g = gate(work, "closed_loop")
    assert g["status"] == "fail" and "onnxruntime: logits max abs diff" in g["message"]


def test_export_gguf_passes_and_catches_a_flipped_tensor_byte(work: Path) -> None:
    import gguf

    assert gate(work, "export_gguf")["status"] == "pass"
    path = work / "exports/pinned/model.gguf"
    target = next(t for t in gguf.GGUFReader(path).tensors if t.name == "token_embd.weight")
    data = bytearray(path.read_bytes())
    data[target.data_offset + 2] ^= 0x10
    path.write_bytes(bytes(data))
    g = gate(work, "export_gguf")
    assert g["status"] == "fail" and "exports/pinned/model.gguf: tensor token_embd.weight" in g["message"]


def test_export_gguf_fails_on_an_unreadable_config(work: Path) -> None:
    (work / "exports/fresh/config.json").write_text('{"num_hidden_layers" 2}')
    g = gate(work, "export_gguf")
    assert g["status"] == "fail" and "read back: exports/fresh/config.json: line 1 column" in g["message"]
    assert "not valid JSON" in g["message"]
