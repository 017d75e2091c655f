"""Issue #27, items 2 and 4: nothing the verdict depends on goes unseen.

The tree is the real artifact tree of tests/gate_tree.py, sealed by real DVC (`dvc commit`) with
the real pipeline's outs. Each case reproduces a hostile review's finding that exited 0 on main
7c26a35 (dvc.lock deleted or partial; a checkpoint, summary.json, loss.csv, a report, data/*
edited) and must now be exit 2 naming what is missing or changed. The consistency cases re-seal
dvc.lock after the edit (the attacker who rewrites dvc.lock): recomputation must still catch them.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from gate_tree import DVC_YAML, check, copy_tree, edit, flip_byte, gate, lock_with_dvc, seal
from gates.judges.consistency import summary_of

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]

FINAL = "runs/single/checkpoints/step_000012"


@pytest.fixture()
def work(gate_tree: Path, tmp_path: Path) -> Path:
    return copy_tree(gate_tree, tmp_path / "tree")


def lock(root: Path) -> dict:
    return yaml.safe_load((root / "dvc.lock").read_text())


def write_lock(root: Path, data: dict) -> None:
    (root / "dvc.lock").write_text(yaml.safe_dump(data))


def test_the_sealed_tree_passes_and_every_out_file_is_hashed(work: Path) -> None:
    """The negative control: untouched, both new gates pass; the seals cover every file of every out."""
    code, report = check(work, sealed=False)
    assert code == 0, {g["id"]: g["message"] for g in report["gates"] if g["status"] not in ("pass", "skip")}
    outs = [o for body in lock(work)["stages"].values() for o in body["outs"]]
    deps = {d["path"] for body in lock(work)["stages"].values() for d in body.get("deps", [])}
    folder_deps = [p for p in deps if (work / p).is_dir() and not any(o["path"] == p for o in outs)]
    files = sum(o.get("nfiles", 1) for o in outs) + sum(
        sum(1 for f in (work / p).rglob("*") if f.is_file()) for p in folder_deps
    )
    assert sorted(folder_deps) == ["registry/models", "registry/pinned"]
    assert gate(report, "seals")["status"] == "pass" and gate(report, "seals")["measured"] == files
    assert gate(report, "consistency")["status"] == "pass"


def test_our_seal_writes_what_real_dvc_writes(work: Path) -> None:
    """The tests' re-seal (gate_tree.seal) is `dvc commit`'s dvc.lock, entry for entry."""
    before = lock(work)
    seal(work)
    assert lock(work) == before


# -- item 2: a missing or partial dvc.lock ------------------------------------------------------------


def forge_everything(root: Path) -> None:
    """The issue's reproduction: forged scaling windows, thread's metrics over proc's, a flipped
    checkpoint byte."""

    def forge(s: dict) -> None:
        r = s["results"]["thread"]["2"]
        r["windows"] = [w * 3 for w in r["windows"]]

    edit(root / "bench/scaling.json", forge)
    shutil.copyfile(root / "runs/thread/metrics.json", root / "runs/proc/metrics.json")
    flip_byte(root / FINAL / "model.safetensors")


def test_a_deleted_dvc_lock_is_exit_2_not_all_pass(work: Path) -> None:
    forge_everything(work)
    (work / "dvc.lock").unlink()
    reports = work / "reports/gates.json"
    # an earlier passing verdict of the gates (its format tag: anything else is not theirs to replace)
    reports.write_text('{"format": "xtrain-gates-report/1", "exit_code": 0}')
    code, _ = check_raw(work)
    assert code == 2 and not reports.exists()  # no verdict at all, never a stale or a passing one


def test_a_deleted_dvc_lock_is_exit_2_under_only_too(work: Path, capsys) -> None:
    (work / "dvc.lock").unlink()
    code, _ = check_raw(work, "--only", "scaling")
    assert code == 2 and "dvc.lock: missing" in capsys.readouterr().err


def test_a_deleted_dvc_yaml_is_exit_2(work: Path, capsys) -> None:
    (work / "dvc.yaml").unlink()
    code, _ = check_raw(work)
    assert code == 2 and "dvc.yaml: missing" in capsys.readouterr().err


def check_raw(root: Path, *extra: str) -> tuple[int, None]:
    from gates.__main__ import main

    return main(["--root", str(root), "check", *extra]), None


def test_one_out_entry_deleted_and_a_loss_moved_is_exit_2(work: Path) -> None:
    data = lock(work)
    outs = data["stages"]["train@thread"]["outs"]
    data["stages"]["train@thread"]["outs"] = [o for o in outs if o["path"] != "runs/thread/metrics.json"]
    write_lock(work, data)
    edit(
        work / "runs/thread/metrics.json", lambda m: m["train_loss"].__setitem__(5, m["train_loss"][5] + 1e-6)
    )
    code, report = check(work, sealed=False)
    s = gate(report, "seals")
    assert code == 2 and s["status"] == "error"
    assert "stage train@thread: out runs/thread/metrics.json has no entry" in s["message"]
    assert (
        "dvc.lock has no entry for out runs/thread/metrics.json"
        in gate(report, "loss_match.thread")["message"]
    )


@pytest.mark.parametrize("stage", ["train@proc", "tokenizer", "registry_check"])
def test_a_stage_missing_from_dvc_lock_is_exit_2_naming_it(work: Path, stage: str) -> None:
    data = lock(work)
    del data["stages"][stage]
    write_lock(work, data)
    code, report = check(work, sealed=False)
    s = gate(report, "seals")
    assert code == 2 and s["status"] == "error" and f"stage {stage} has no entry" in s["message"]


def test_only_seals_the_selected_gates_stages_and_their_inputs(work: Path) -> None:
    """--only scaling: scaling's stages and its inputs (tokenizer, corpus) are sealed, the runs not."""
    flip_byte(work / FINAL / "model.safetensors")
    code, report = check(work, "--only", "scaling", sealed=False)
    assert code == 0 and [g["id"] for g in report["gates"]] == ["seals", "scaling"]
    flip_byte(work / "data/tokens.safetensors")  # an input of scaling
    code, report = check(work, "--only", "scaling", sealed=False)
    assert code == 2 and "data/tokens.safetensors: md5" in gate(report, "seals")["message"]


# -- item 4: outs the gates never looked at ------------------------------------------------------------


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


UNSEEN = {
    "final checkpoint byte": (lambda r: flip_byte(r / FINAL / "model.safetensors"), f"{FINAL}/model.safetensors: md5"),
    "summary.json edited": (lambda r: edit(r / "runs/single/summary.json", lambda s: s.update(world=3)), "runs/single/summary.json: md5"),
    "loss.csv edited": (lambda r: flip_byte(r / "runs/proc/loss.csv"), "runs/proc/loss.csv: md5"),
    "registry_check.json edited": (lambda r: edit(r / "reports/registry_check.json", lambda s: s.update(ok=True)), "reports/registry_check.json: md5"),
    "tokenizer.json edited": (lambda r: flip_byte(r / "data/tokenizer.json"), "data/tokenizer.json: md5"),
    "tokens truncated": (lambda r: truncate(r / "data/tokens.safetensors"), "data/tokens.safetensors: md5"),
    "scaling.png deleted": (lambda r: (r / "bench/scaling.png").unlink(), "bench/scaling.png: missing"),
    "older checkpoint deleted": (lambda r: shutil.rmtree(r / "runs/thread/checkpoints/step_000006"), "runs/thread/checkpoints/step_000006/state.json: md5 (absent)"),
    "file added to a registry folder": (lambda r: (r / "registry/models/tiny/v2.json").write_text("{}"), "registry/models: folder hash"),
    "pinned registry file deleted": (lambda r: (r / "registry/pinned/tiny/tokenizer.json").unlink(), "registry/pinned"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(UNSEEN))
def test_an_out_no_gate_reads_is_still_sealed(work: Path, case: str) -> None:
    tamper, fragment = UNSEEN[case]
    tamper(work)
    code, report = check(work, sealed=False)
    s = gate(report, "seals")
    assert code == 2 and s["status"] == "error" and fragment in s["message"], s["message"]


# -- stale artifacts: code or params edited after dvc repro made them -----------------------------------


@pytest.fixture()
def with_code(work: Path) -> Path:
    """The tree with what the real pipeline records beside its outs, recorded by real DVC: a code dep
    (xtrain/core/optim.py) of train_single and the params sections train_single and closed_loop read."""
    optim = work / "xtrain" / "core" / "optim.py"
    optim.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO / "xtrain" / "core" / "optim.py", optim)
    pipeline = copy.deepcopy(DVC_YAML)
    single, loop = pipeline["stages"]["train_single"], pipeline["stages"]["closed_loop"]
    single["deps"] = [*single.get("deps", []), "xtrain/core/optim.py"]
    single["params"], loop["params"] = ["model", "train"], ["closed_loop"]
    lock_with_dvc(work, pipeline)
    return work


def test_a_code_edit_since_dvc_repro_is_exit_2_naming_stage_and_file(with_code: Path) -> None:
    """Edited training code, artifacts of the code before: the verdict would judge the old code."""
    code, report = check(with_code, sealed=False)  # the positive control: as dvc recorded it
    assert code == 0, gate(report, "seals")["message"]
    optim = with_code / "xtrain" / "core" / "optim.py"
    optim.write_text(optim.read_text() + "# an edit after dvc repro\n")
    code, report = check(with_code, sealed=False)
    s = gate(report, "seals")
    assert code == 2 and s["status"] == "error" and s["message"].startswith("stale: "), s["message"]
    assert "stage train_single: dep xtrain/core/optim.py md5" in s["message"]
    assert "(dvc repro train_single, or undo the edit)" in s["message"]
    optim.unlink()
    code, report = check(with_code, sealed=False)
    assert code == 2 and "dep xtrain/core/optim.py md5 (missing)" in gate(report, "seals")["message"]


def test_a_params_edit_since_dvc_repro_names_the_key(with_code: Path) -> None:
    """A params value no config hash covers (closed_loop.prompts) is judged stale by its stage; DVC
    wrote norm_eps as 1e-06 (a string to PyYAML), which still equals params.yaml's float."""
    assert "1e-06" in (with_code / "dvc.lock").read_text()
    params = yaml.safe_load((with_code / "params.yaml").read_text())
    params["closed_loop"]["prompts"] += 1
    (with_code / "params.yaml").write_text(yaml.safe_dump(params))
    code, report = check(with_code, sealed=False)
    s = gate(report, "seals")
    want = f"stage closed_loop: params.yaml closed_loop.prompts is {params['closed_loop']['prompts']}, dvc.lock recorded"
    assert code == 2 and want in s["message"] and "train_single" not in s["message"], s["message"]


def test_yaml_1_2_floats_in_dvc_lock_equal_params_yaml() -> None:
    """DVC writes 1e-06 (YAML 1.2, a string to PyYAML); params.yaml says 1.0e-6: the same value, read
    by the gates as DVC reads both files (contracts/yamlfile.py)."""
    from contracts.yamlfile import load_pipeline_text
    from gates.reading.dvcstatus import leaf_diffs

    lock = load_pipeline_text("model:\n  norm_eps: 1e-06\n  n: [2.5E+3]\n  name: xtrain-tiny\n", "dvc.lock")
    assert lock == {"model": {"norm_eps": 1e-06, "n": [2500.0], "name": "xtrain-tiny"}}
    assert leaf_diffs("model", {"norm_eps": 1.0e-6}, {"norm_eps": lock["model"]["norm_eps"]}) == []
    assert leaf_diffs("model", {"norm_eps": 1e-05}, {"norm_eps": 1e-06}) == [("model.norm_eps", 1e-05, 1e-06)]


# -- cross-artifact consistency: dvc.lock re-sealed, recomputation still catches ----------------------


def swap_final_weights(root: Path) -> None:
    """thread's final weights in single's final checkpoint (a valid safetensors file, another model)."""
    other = root / "runs/thread/checkpoints/step_000006/model.safetensors"
    shutil.copyfile(other, root / FINAL / "model.safetensors")


def forged_metrics_digest(root: Path) -> None:
    edit(root / "runs/proc/metrics.json", lambda m: m.update(param_digest="0" * 64))


FORGED = {
    "summary.json forged": (lambda r: edit(r / "runs/single/summary.json", lambda s: s.update(final_val_loss=1.0)), "runs/single/summary.json is not what metrics.json gives"),
    "loss.csv forged": (lambda r: (r / "runs/thread/loss.csv").write_text("step,loss\n0,1.0\n"), "runs/thread/loss.csv differs"),
    "eval.csv forged": (lambda r: flip_byte(r / "runs/proc/eval.csv"), "runs/proc/eval.csv differs"),
    "final weights swapped": (swap_final_weights, f"{FINAL}/model.safetensors digests to"),
    "metrics digest forged": (forged_metrics_digest, "metrics.json param_digest is 0000"),
    "latest points at an older step": (
        lambda r: (r / "runs/single/checkpoints/latest").write_text("step_000006\n"),
        "runs/single/checkpoints/latest is 'step_000006', metrics.json ends at step_000012",
    ),
    "final checkpoint deleted": (lambda r: shutil.rmtree(r / FINAL), f"{FINAL}/model.safetensors does not exist"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_run_that_disagrees_with_itself_fails_even_resealed(work: Path, case: str) -> None:
    tamper, fragment = FORGED[case]
    tamper(work)
    code, report = check(work)  # dvc.lock re-sealed: the seals gate passes
    c = gate(report, "consistency")
    assert gate(report, "seals")["status"] == "pass"
    assert code != 0 and c["status"] == "fail" and fragment in c["message"], c["message"]


def test_the_gates_summary_is_the_trainers(work: Path) -> None:
    """gates.judges.consistency.summary_of recomputes xtrain.core.train.summary (torch-free), field for field."""
    import json

    from xtrain.core.train import summary

    m = json.loads((work / "runs/thread/metrics.json").read_text())
    assert summary_of(m) == summary(m) == json.loads((work / "runs/thread/summary.json").read_text())
