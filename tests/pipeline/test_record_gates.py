"""The gates judge shape and identity from the run records (issue #25 item 5), on real runs.

A project that gates its own trainer has a params file of its own (no model:/train:): its runs are
judged from their records alone, the runs a gate compares must share config identity, and the
`gates:` sections it leaves out are the harness's. Our pipeline's params.yaml still describes the
runs: a run trained before a params.yaml edit is refused naming the key. The runs are the gate
tests' real tree (tests/gate_tree.py); each control breaks one thing.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from gate_tree import check, copy_tree, edit, gate, write_pipeline
from gates.__main__ import main as gates_main
from params.identity import config_identity
from params.project import HARNESS_PARAMS

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]

RUNS = ("single", "thread", "proc")
# a project's own file: its own knobs (not ours to validate) and the thresholds it wants
OWN = {
    "trainer": {"steps": "whatever the project's trainer reads", "model": {"dim": 32}},
    "gates": {
        "loss_match": {
            "max_rel": 1.0e-3,
            "cpu": {"first_step_rtol": 1.0e-5, "prefix_steps": None, "final_val_atol": 0.02},  # harness: 0.01
        },
        "cross_rank": {"max_abs": 1.0e-6},
    },
}


def project(tree: Path, dest: Path, params: dict | None = None) -> Path:
    """The tree's three runs as a project of its own: its own params file, a pipeline of its runs only."""
    for run in RUNS:
        shutil.copytree(tree / "runs" / run, dest / "runs" / run)
    (dest / "params.yaml").write_text(yaml.safe_dump(OWN if params is None else params))
    write_pipeline(dest, ["train_single", "train@thread", "train@proc"])
    return dest


def relabel(m: dict, **train: object) -> None:
    """A record of another config, consistent with itself: its config edited and its hash recomputed."""
    m["config"]["train"].update(train)
    m["config_hash"] = config_identity(m["config"])


@pytest.fixture()
def own(gate_tree: Path, tmp_path: Path) -> Path:
    return project(gate_tree, tmp_path / "own")


def test_a_project_of_its_own_is_judged_from_its_records(own: Path) -> None:
    code, report = check(own)
    by_id = {g["id"]: g for g in report["gates"]}
    judged = ("seals", "consistency", "loss_match.thread", "loss_match.proc", "launcher_parity",
              "cross_rank.thread", "cross_rank.proc", "finite")  # fmt: skip
    assert code == 0 and all(by_id[g]["status"] == "pass" for g in judged), {
        g: by_id[g]["message"] for g in judged
    }
    assert "shaped as their own configs say" in by_id["finite"]["message"]
    # the stages it does not have skip before reading params.yaml sections it does not have
    for gid in ("export_md5", "fresh_train", "closed_loop", "scaling", "pilot.base", "pilot.all"):
        assert by_id[gid]["status"] == "skip", (gid, by_id[gid]["message"])
    assert "stage pilot has not run: not in this project's pipeline" in by_id["pilot.base"]["message"]
    # the thresholds it gives are its own; the report names where the others came from
    assert "|final val diff| <= 0.02 (cpu tier)" in by_id["loss_match.proc"]["threshold"]
    assert (
        str(HARNESS_PARAMS) in report["thresholds_source"]
        and "gates.fresh_train" in report["thresholds_source"]
    )
    # its own loss_match (the harness's are listed: loss_match_stat is another section)
    assert not re.search(r"gates\.loss_match[,:]", report["thresholds_source"]), report["thresholds_source"]


def test_a_thread_run_of_another_config_is_judged_by_what_it_did(own: Path) -> None:
    """Issue 54 item 1: a config key that changed nothing the runs did is information; one whose
    observed quantity changed is named with it."""
    edit(own / "runs/thread/metrics.json", lambda m: relabel(m, grad_clip=0.5))
    code, report = check(own)
    for gid, key in (
        ("loss_match.thread", "train.grad_clip 0.5 vs 1.0"),
        ("launcher_parity", "train.grad_clip 1.0 vs 0.5"),
    ):
        g = gate(report, gid)
        assert g["status"] == "pass", g["message"]
        assert f"config keys differ, no observed quantity does: {key}" in g["message"], g["message"]
    assert code == 0

    def other_lr(m: dict) -> None:
        relabel(m, lr=2 * m["config"]["train"]["lr"])
        m["lr"] = [2 * x for x in m["lr"]]

    edit(own / "runs/thread/metrics.json", other_lr)
    code, report = check(own)
    g = gate(report, "loss_match.thread")
    assert g["status"] == "fail" and "observed: thread vs single: " in g["message"], g["message"]
    assert " changed lr per step: " in g["message"] and "train.lr " in g["message"], g["message"]
    assert code == 1 and gate(report, "loss_match.proc")["status"] == "pass"


def test_a_hand_edited_record_is_refused_naming_the_file_and_key(own: Path) -> None:
    edit(own / "runs/proc/metrics.json", lambda m: m.update(config_hash="0123456789abcdef"))
    code, report = check(own)
    want = (
        "runs/proc/metrics.json: config_hash: 0123456789abcdef is not the identity of the record's own config"
    )
    for gid in ("loss_match.proc", "cross_rank.proc", "consistency", "finite"):
        assert want in gate(report, gid)["message"], (gid, gate(report, gid)["message"])
        assert gate(report, gid)["status"] == "fail"
    assert code == 1


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda m: relabel(m, steps=m["steps"] + 1), "steps 12, config.train.steps is 13"),
        (lambda m: m.update(eval=m["eval"][:-1]), "eval steps [0, 6], its config implies [0, 6, 12]"),
        (lambda m: relabel(m, eval_every=4), "eval steps [0, 6, 12], its config implies [0, 4, 8, 12]"),
        (lambda m: m["samples"]["hash_sum"].pop(), "samples.hash_sum has 11 values for 12 steps"),
    ],
)
def test_a_record_whose_shape_disagrees_with_its_own_config_is_refused(own: Path, change, named: str) -> None:
    edit(own / "runs/proc/metrics.json", change)
    code, report = check(own)
    g = gate(report, "loss_match.proc")
    assert code == 1 and g["status"] == "fail" and f"runs/proc/metrics.json: {named}" in g["message"], g[
        "message"
    ]


def test_our_pipeline_refuses_a_run_trained_before_a_params_edit(gate_tree: Path, tmp_path: Path) -> None:
    work = copy_tree(gate_tree, tmp_path / "tree")
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["seed"] += 1  # the runs were trained with the old seed
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    code, report = check(work)
    for gid in ("loss_match.thread", "loss_match.proc", "cross_rank.proc", "fresh_train", "finite"):
        g = gate(report, gid)
        assert g["status"] == "fail" and "params.yaml gives" in g["message"], (gid, g["message"])
        assert f"differing keys: seed {params['seed'] - 1} vs {params['seed']}" in g["message"]
    assert code == 1


@pytest.mark.parametrize(
    ("gates", "named"),
    [
        ({"loss_match": {"max_rel": "tight"}}, "params.yaml: gates.loss_match.max_rel: "),
        (
            {"loss_match": {"cpu": OWN["gates"]["loss_match"]["cpu"]}},
            "params.yaml: gates.loss_match.max_rel: missing",
        ),
        ({"loss_matc": {"max_rel": 1e-3}}, "params.yaml: gates.loss_matc: unknown key"),
        ([1, 2], "params.yaml: gates: list is not a mapping"),
    ],
)
def test_a_bad_threshold_in_a_project_file_is_one_line_naming_the_key(
    own: Path, gates: object, named: str, capsys: pytest.CaptureFixture
) -> None:
    (own / "params.yaml").write_text(yaml.safe_dump({**OWN, "gates": gates}))
    assert gates_main(["--root", str(own), "check"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err, err


def test_the_html_page_of_a_project_of_its_own_draws_what_it_judged(own: Path) -> None:
    code = gates_main(
        ["--root", str(own), "check", "--html", "reports/gates.html", "--only", "loss_match", "pilot"]
    )
    html = (own / "reports" / "gates.html").read_text()
    assert code == 0 and "<svg" in html  # loss_match.proc drawn
    # the pilot cells are not in this pipeline: one row, no card each (gates/reporting/rows.py)
    assert "not in this pipeline: " in html and "stages pilot: not in dvc.yaml or dvc.lock" in html
    assert "id='gate-pilot-base'" not in html
