"""gates/reading/artifacts.py under mutation (docs/judge-mutation.md): how every gate reads an artifact.

A stage that never ran is a skip; a stage that ran, was removed from dvc.lock or is defined but
unrecorded makes a missing or unrecorded artifact an error naming the file; everything read is
recorded with its md5 and checked against dvc.lock; non-finite numbers are found wherever they are;
a run filed under another launcher is refused. Hand-built trees, in-process.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from contracts.fileio import md5_file
from gates.reading.artifacts import ArtifactError, Artifacts, NonFinite, StageNotRun, misplaced_run, nonfinite
from gates.reading.dvclock import DvcLock
from judge_trees import Tree, write_export


def test_nonfinite_finds_every_path() -> None:
    data = {"a": [1.0, math.nan, {"b": math.inf}], "c": {"d": -math.inf, "e": 1}, "f": "nan", "g": None}
    assert nonfinite(data) == ["a[1] = nan", "a[2].b = inf", "c.d = -inf"]
    assert nonfinite(math.nan) == ["(top level) = nan"]
    assert nonfinite([math.inf]) == ["[0] = inf"]
    assert nonfinite({"x": 1.5, "y": [2, 3.0]}) == [] and nonfinite(7) == [] and nonfinite(True) == []


def test_misplaced_run_names_the_launcher_and_the_folder() -> None:
    assert misplaced_run("runs/thread/metrics.json", {"launcher": "thread"}) is None
    assert misplaced_run("runs/thread/summary.json", {"launcher": "proc"}) is None
    assert misplaced_run("runs/thread/metrics.json", [1]) is None
    assert misplaced_run("xruns/thread/metrics.json", {"launcher": "proc"}) is None
    assert misplaced_run("runs/thread/metrics.json", {"launcher": "proc"}) == (
        "runs/thread/metrics.json: launcher: 'proc', but the run lives in runs/thread: a run copied from "
        "another launcher's folder (dvc repro the stage that writes runs/thread)"
    )
    assert "launcher: None, but" in misplaced_run("runs/single/metrics.json", {})


def tree(tmp_path: Path) -> Tree:
    t = Tree(tmp_path)
    write_export(tmp_path / "exports" / "pinned")
    t.record_out("export", "exports/pinned")
    return t


def test_json_validates_records_and_caches_what_it_read(tmp_path: Path) -> None:
    t = tree(tmp_path)
    a = t.artifacts()
    m = a.json("exports/pinned/manifest.json", "manifest.schema.json", "export")
    assert m["dtype"] == "fp32"
    md5 = md5_file(tmp_path / "exports/pinned/manifest.json")
    assert a.read == {"exports/pinned/manifest.json": {"md5": md5, "matches_dvc_lock": True}}
    assert list(a.validated) == [("exports/pinned/manifest.json", "manifest.schema.json", md5)]
    gate = a.for_gate()
    assert gate.validated is a.validated and gate.read == {} and (gate.root, gate.lock) == (a.root, a.lock)
    assert gate.json("exports/pinned/manifest.json", "manifest.schema.json", "export") is m  # validated once


def test_a_file_outside_every_out_is_recorded_without_a_lock_verdict(tmp_path: Path) -> None:
    t = tree(tmp_path)
    (tmp_path / "loose.json").write_text("{}")
    t.stages["loose"] = {"outs": []}
    a = t.artifacts()
    assert a.path("loose.json", "loose") == tmp_path / "loose.json"
    assert a.read["loose.json"] == {"md5": md5_file(tmp_path / "loose.json"), "matches_dvc_lock": None}


def test_an_artifact_edited_after_its_stage_is_an_error(tmp_path: Path) -> None:
    t = tree(tmp_path)
    (tmp_path / "exports/pinned/config.json").write_text("edited\n")
    a = t.artifacts()
    with pytest.raises(ArtifactError) as e:
        a.path("exports/pinned/config.json", "export")
    assert str(e.value).startswith("exports/pinned: folder hash ")
    assert str(e.value).endswith(": changed since dvc repro wrote it (dvc repro the stage, or restore it)")
    assert a.read["exports/pinned/config.json"]["matches_dvc_lock"] is False


def test_a_schema_error_names_the_file_relative_to_the_tree(tmp_path: Path) -> None:
    t = tree(tmp_path)
    path = tmp_path / "exports/pinned/manifest.json"
    data = json.loads(path.read_text())
    data["dtype"] = "fp64"
    path.write_text(json.dumps(data))
    t.record_out("export", "exports/pinned")
    with pytest.raises(ArtifactError) as e:
        t.artifacts().json("exports/pinned/manifest.json", "manifest.schema.json", "export")
    assert str(e.value).startswith("exports/pinned/manifest.json: dtype: ") and str(tmp_path) not in str(
        e.value
    )


def write_json(t: Tree, rel: str, data, stage: str) -> None:
    path = t.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    t.record_out(stage, rel)


def test_non_finite_in_a_run_is_named_with_its_path_and_count(tmp_path: Path, monkeypatch) -> None:
    from contracts import artifact_table

    t = tree(tmp_path)
    write_json(
        t,
        "runs/single/metrics.json",
        {"launcher": "single", "loss": [1.0, math.nan, math.inf]},
        "train_single",
    )
    monkeypatch.setattr(artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    a = t.artifacts()
    with pytest.raises(NonFinite) as e:
        a.json("runs/single/metrics.json", "metrics.schema.json", "train_single")
    assert str(e.value) == "runs/single/metrics.json: loss[1] = nan (2 non-finite numbers)"
    data = a.json("runs/single/metrics.json", "metrics.schema.json", "train_single", refuse_non_finite=False)
    assert math.isnan(data["loss"][1])
    write_json(t, "runs/thread/metrics.json", {"launcher": "thread", "loss": [math.nan]}, "train@thread")
    with pytest.raises(NonFinite) as e:
        t.artifacts().json("runs/thread/metrics.json", "metrics.schema.json", "train@thread")
    assert str(e.value) == "runs/thread/metrics.json: loss[0] = nan"
    write_json(t, "runs/proc/metrics.json", {"launcher": "thread", "loss": [1.0]}, "train@proc")
    with pytest.raises(
        ArtifactError, match=r"^runs/proc/metrics\.json: launcher: 'thread', but the run lives in runs/proc"
    ):
        t.artifacts().json("runs/proc/metrics.json", "metrics.schema.json", "train@proc")


def test_a_stage_that_never_ran_is_a_skip_and_its_artifact_must_not_exist(tmp_path: Path) -> None:
    a = Artifacts(tmp_path, DvcLock(tmp_path, {}, set(), {}))
    with pytest.raises(StageNotRun) as e:
        a.path("bench/scaling.json", "scaling")
    assert str(e.value) == "stage scaling has not run (dvc repro scaling)"
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench/scaling.json").write_text("{}")
    with pytest.raises(ArtifactError) as e:
        a.path("bench/scaling.json", "scaling")
    assert str(e.value) == (
        "bench/scaling.json: exists but dvc.lock does not record stage scaling: it was not written by dvc "
        "repro (dvc repro scaling)"
    )


def test_a_removed_or_unrecorded_stage_is_an_error_not_a_skip(tmp_path: Path) -> None:
    removed = Artifacts(tmp_path, DvcLock(tmp_path, {}, {"scaling"}, {}))
    with pytest.raises(ArtifactError) as e:
        removed.path("bench/scaling.json", "scaling")
    assert str(e.value) == (
        "bench/scaling.json: stage scaling was removed from dvc.lock (git HEAD's dvc.lock has it): restore "
        "dvc.lock (git checkout dvc.lock) or dvc repro scaling"
    )
    unrecorded = Artifacts(tmp_path, DvcLock(tmp_path, {}, set(), {"scaling": ["bench/scaling.json"]}))
    with pytest.raises(ArtifactError) as e:
        unrecorded.path("bench/scaling.json", "scaling")
    assert str(e.value) == (
        "bench/scaling.json: dvc.lock has no entry for stage scaling, which dvc.yaml defines: restore dvc.lock "
        "(git checkout dvc.lock) or dvc repro scaling"
    )


def test_a_missing_artifact_of_a_stage_that_ran_is_an_error(tmp_path: Path) -> None:
    a = Artifacts(tmp_path, DvcLock(tmp_path, {"scaling": {"outs": []}}, set(), {}))
    with pytest.raises(ArtifactError) as e:
        a.path("bench/scaling.json", "scaling")
    assert (
        str(e.value)
        == "bench/scaling.json: missing, but stage scaling ran (dvc repro -f scaling to rebuild it)"
    )


def test_an_out_dvc_yaml_declares_but_dvc_lock_lacks_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench/scaling.json").write_text("{}")
    lock = DvcLock(
        tmp_path, {"scaling": {"outs": []}}, set(), {"scaling": ["bench/scaling.json", "bench/x.png"]}
    )
    with pytest.raises(ArtifactError) as e:
        Artifacts(tmp_path, lock).path("bench/scaling.json", "scaling")
    assert str(e.value) == (
        "bench/scaling.json: dvc.lock has no entry for out bench/scaling.json of stage scaling: restore dvc.lock "
        "(git checkout dvc.lock) or dvc repro scaling"
    )


def test_folder_records_every_file_but_the_excluded(tmp_path: Path) -> None:
    t = tree(tmp_path)
    (tmp_path / "exports/pinned/sub").mkdir()
    t.record_out("export", "exports/pinned")
    a = t.artifacts()
    files = a.folder("exports/pinned", "export", exclude=("manifest.json", "README.md"))
    listed = sorted(p.name for p in (tmp_path / "exports/pinned").iterdir() if p.is_file())
    assert list(files) == [n for n in listed if n not in ("manifest.json", "README.md")]
    assert files["config.json"] == md5_file(tmp_path / "exports/pinned/config.json")
    assert set(a.read) == {f"exports/pinned/{n}" for n in files}
    assert a.folder("exports/pinned", "export") == {
        n: md5_file(tmp_path / "exports/pinned" / n) for n in listed
    }
