"""Every tamper class of issue #11 fed to the gates on a real artifact tree: none may pass.

Each case edits the tree the way a hostile review did (an artifact, a registry file, dvc.lock)
and names the gate that must refuse it, the status it must get and a piece of its message.
The untampered tree passes every gate (tests/pipeline/test_gates.py and test_the_locked_tree_passes),
so each non-pass below is caused by its tamper.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gate_tree import check, copy_tree, edit, flip_byte, gate, golden_path

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]

Tamper = Callable[[Path], None]


def metrics(run: str, change: Callable[[dict], object]) -> Tamper:
    return lambda root: edit(root / f"runs/{run}/metrics.json", change)


def scaling_json(change: Callable[[dict], object]) -> Tamper:
    return lambda root: edit(root / "bench/scaling.json", change)


def every_run(change: Callable[[dict], object]) -> Tamper:
    def apply(root: Path) -> None:
        for run in ("single", "thread", "proc"):
            edit(root / f"runs/{run}/metrics.json", change)

    return apply


def cut(m: dict, n: int) -> None:
    for key in ("train_loss", "grad_norm", "lr"):
        m[key] = m[key][:n]
    m["steps"] = n


def claim_world_1(m: dict) -> None:
    m["world"] = 1
    m["cross_rank"]["per_rank"] = m["cross_rank"]["per_rank"][:1]


def spread_windows(root: Path) -> None:
    """thread world 2's two windows far apart (a loaded machine), every figure consistent with them;
    the bound is 50% here (the tree's own bound is wide: its tiny timings are noise)."""

    def spread(s: dict) -> None:
        r1, r = s["results"]["thread"]["1"], s["results"]["thread"]["2"]
        base = r1["tokens_per_s"]
        r["windows"] = [base * 0.62, base * 4.58]  # median 2.6x base, (max - min) / median = 1.52
        med = base * 2.6
        r.update(tokens_per_s=med, speedup=med / base, spread=(r["windows"][1] - r["windows"][0]) / med)

    edit(root / "bench/scaling.json", spread)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["gates"]["scaling"]["cpu"]["max_spread"] = 0.5
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def slow_but_claiming(s: dict) -> None:
    """world 2 at 1% of world 1's throughput, still claiming a 1.5x speedup."""
    r1, r = s["results"]["proc"]["1"], s["results"]["proc"]["2"]
    r["windows"] = [x * 0.01 for x in r1["windows"]]
    r.update(tokens_per_s=r1["tokens_per_s"] * 0.01, speedup=1.5, efficiency=0.75)


def drop_world_2(s: dict) -> None:
    s["worlds"] = [1]
    s["worlds_requested"] = [1]
    for by_world in s["results"].values():
        by_world.pop("2")


def golden(change: Callable[[dict], object]) -> Tamper:
    return lambda root: edit(golden_path(root), change)


def match_golden_to_a_moved_run(root: Path) -> None:
    """A run whose loss moved, and the golden edited by hand to match it."""
    edit(
        root / "runs/single/metrics.json", lambda m: m["train_loss"].__setitem__(7, m["train_loss"][7] + 1e-3)
    )
    run = json.loads((root / "runs/single/metrics.json").read_text())
    edit(
        golden_path(root), lambda g: g["metrics"]["train_loss"]["values"].update({"7": run["train_loss"][7]})
    )


def cut_golden(g: dict) -> None:
    g["metrics"]["train_loss"]["values"] = {"0": g["metrics"]["train_loss"]["values"]["0"]}
    g["metrics"]["train_loss"]["end_step"] = 0


def move_golden(root: Path) -> None:
    src = golden_path(root).parent
    shutil.copytree(src, src.with_name("cpu-some-other-machine"))
    shutil.rmtree(src)


def registry_version(change: Callable[[dict], object]) -> Tamper:
    return lambda root: edit(next((root / "registry/models/tiny").glob("v1.json")), change)


CASES: dict[str, tuple[Tamper, str, str, str]] = {
    # compare_runs / cross_rank / finite: shapes against params, recomputed, non-finite
    "nan on one rank": (
        metrics("thread", lambda m: m["cross_rank"]["per_rank"][1].update(max_abs_diff=math.nan)),
        "cross_rank.thread", "fail", "per_rank[1].max_abs_diff = nan",
    ),
    "param_sum off by 123, max_abs_diff 0": (
        metrics("proc", lambda m: m["cross_rank"]["per_rank"][1].update(param_sum=m["cross_rank"]["per_rank"][1]["param_sum"] + 123)),
        "cross_rank.proc", "fail", "rank 1's parameter sum",
    ),
    "thread run claims world 1": (metrics("thread", claim_world_1), "cross_rank.thread", "fail", "world 1, params.yaml says 2"),
    "all three loss lists cut to 10 steps": (every_run(lambda m: cut(m, 10)), "loss_match.thread", "fail", "steps 10, params.yaml train.steps is 12"),
    "empty eval list": (metrics("thread", lambda m: m.update(eval=[])), "loss_match.thread", "fail", "eval steps [], params.yaml implies [0, 6, 12]"),
    "steps: 5 with 12 losses": (metrics("proc", lambda m: m.update(steps=5)), "launcher_parity", "fail", "steps 5"),
    "config_hash not the params'": (metrics("thread", lambda m: m.update(config_hash="0" * 16)), "loss_match.thread", "fail", "params.yaml gives"),
    "NaN loss (max() would hide it)": (metrics("thread", lambda m: m["train_loss"].__setitem__(3, math.nan)), "loss_match.thread", "fail", "train_loss[3] = nan"),
    "Inf grad norm": (metrics("proc", lambda m: m["grad_norm"].__setitem__(2, math.inf)), "finite", "fail", "grad_norm[2] = inf"),
    "grad_norm list cut": (metrics("single", lambda m: m.update(grad_norm=m["grad_norm"][:3])), "finite", "fail", "grad_norm has 3 values for 12 steps"),
    # scaling: recomputed from the windows, worlds from params, noise is inconclusive
    "NaN speedup": (scaling_json(lambda s: s["results"]["thread"]["2"].update(speedup=math.nan)), "scaling", "fail", "speedup = nan"),
    "1% throughput claiming 1.5x": (scaling_json(slow_but_claiming), "scaling", "fail", "speedup 1.5 claimed, the windows give 0.01"),
    "world 2 dropped from the file": (scaling_json(drop_world_2), "scaling", "fail", "worlds [1], params.yaml gives [1, 2]"),
    "windows spread 152% (a loaded machine)": (spread_windows, "scaling", "inconclusive", "rerun on a quiet machine"),
    "a launcher dropped": (scaling_json(lambda s: s["results"].pop("proc")), "scaling", "fail", "launchers ['thread']"),
    # fresh_train: goldens carry a content hash and must cover the config's steps
    "golden hand-edited to match the run": (match_golden_to_a_moved_run, "fresh_train", "error", "content_sha256"),
    "golden cut to 1 step": (golden(cut_golden), "fresh_train", "error", "content_sha256"),
    "golden switched exact -> approx": (golden(lambda g: g.update(tier="approx")), "fresh_train", "error", "edited by hand"),
    "golden moved to another environment": (move_golden, "fresh_train", "error", "does not match its folder"),
    # export_md5: registry files checked against what the registry recorded
    "blessed md5 edited to match": (registry_version(lambda v: v["files"].update({"config.json": "0" * 32})), "export_md5", "error", "content_sha256"),
    "pin.json edited": (lambda root: edit(root / "registry/pinned/tiny/pin.json", lambda p: p.update(model_md5="0" * 32)), "export_md5", "error", "content_sha256"),
    "pinned checkpoint byte flipped": (lambda root: flip_byte(root / "registry/pinned/tiny/model.safetensors"), "export_md5", "error", "pin.json recorded"),
    "export byte flipped (manifest unchanged)": (lambda root: flip_byte(root / "exports/fresh/model.safetensors"), "fresh_train", "error", "its manifest lists"),
}  # fmt: skip


@pytest.fixture()
def work(gate_tree: Path, tmp_path: Path) -> Path:
    return copy_tree(gate_tree, tmp_path / "tree")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_tamper_never_passes(work: Path, case: str) -> None:
    tamper, gid, status, fragment = CASES[case]
    tamper(work)
    code, report = check(work)
    g = gate(report, gid)
    assert g["status"] == status and fragment in g["message"], g["message"]
    # exit codes of docs/verdicts.md: error 2 > fail 1 > inconclusive 3 (never a pass, never "failure")
    assert code == {"error": 2, "fail": 1, "inconclusive": 3}[status]


# -- stale artifacts: dvc.lock written by real DVC ---------------------------------------------------


@pytest.fixture()
def locked(gate_tree: Path, tmp_path: Path) -> Path:
    """The tree as real DVC sealed it (tests/gate_tree.py: lock_with_dvc), dvc.lock left as it is."""
    return copy_tree(gate_tree, tmp_path / "tree")


def test_the_locked_tree_passes(locked: Path) -> None:
    """Our .dir hashes agree with real DVC's on real folder outs: every gate passes."""
    code, report = check(locked, sealed=False)
    assert code == 0, {g["id"]: g["message"] for g in report["gates"] if g["status"] != "pass"}
    assert gate(report, "fresh_train")["artifacts"]["exports/fresh/model.safetensors"]["matches_dvc_lock"]


def lock_stages(root: Path) -> dict:
    return yaml.safe_load((root / "dvc.lock").read_text())


def drop_stage(root: Path, stage: str) -> None:
    lock = lock_stages(root)
    del lock["stages"][stage]
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))


def git_commit_all(root: Path) -> None:
    for cmd in (
        ["init", "-q"],
        ["add", "dvc.lock", "dvc.yaml"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lock"],
    ):
        subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)


STALE: dict[str, tuple[Tamper, str, str]] = {
    "metrics edited after dvc repro": (
        metrics("thread", lambda m: m["train_loss"].__setitem__(5, m["train_loss"][5] * (1 + 1e-7))),
        "loss_match.thread", "runs/thread/metrics.json: md5",
    ),
    "a file inside a folder out": (
        lambda root: flip_byte(root / "exports/fresh/model.safetensors"),
        "closed_loop", "exports/fresh/model.safetensors: md5",
    ),
    "a file added to a folder out": (
        lambda root: (root / "exports/pinned/extra.bin").write_bytes(b"x"),
        "export_md5", "exports/pinned/extra.bin",
    ),
    "stage removed from dvc.lock, artifact kept": (
        lambda root: drop_stage(root, "train@proc"),
        "cross_rank.proc", "dvc.lock has no entry for stage train@proc, which dvc.yaml defines",
    ),
    "stage removed from dvc.lock, artifact deleted": (
        lambda root: (git_commit_all(root), drop_stage(root, "scaling"), shutil.rmtree(root / "bench")),
        "scaling", "stage scaling was removed from dvc.lock",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(STALE))
def test_an_edited_or_unrecorded_artifact_is_exit_2_naming_the_file(locked: Path, case: str) -> None:
    tamper, gid, fragment = STALE[case]
    tamper(locked)
    code, report = check(locked, sealed=False)
    g = gate(report, gid)
    assert code == 2 and g["status"] == "error" and fragment in g["message"], g["message"]


def test_five_edits_at_once_never_exit_0(locked: Path) -> None:
    for case in (
        "NaN speedup",
        "golden switched exact -> approx",
        "empty eval list",
        "thread run claims world 1",
    ):
        CASES[case][0](locked)
    flip_byte(locked / "exports/fresh/config.json")
    code, report = check(locked, sealed=False)
    # the pilot cells read runs/pilot, which none of the edits touch: they may pass
    judged = [g for g in report["gates"] if not g["id"].startswith("pilot.")]
    assert code == 2 and sum(g["status"] == "pass" for g in judged) <= 4
