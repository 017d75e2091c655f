"""The statistical tier as a gate (loss_match_stat.proc): its reader (gates/reading/replica_runs.py) and
its judge half (gates/judges/replicas.py judge_stat, tier_of, stat_picture), in process, on hand-built
records. Negative controls: a DDP run of another lr fails through the same gate; a replica folder holding
another launcher's run is still refused as misplaced.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_judge_replicas import ddp, record, replicas

from gates.judges import catalogue
from gates.judges.replicas import StatTier, judge_stat, stat_gate, stat_picture, tier_of
from gates.reading.artifacts import ArtifactError, misplaced_run
from gates.reading.replica_runs import ReplicaRuns, read_replica_runs, replica_stages
from judge_trees import Tree

T = {"loss_match_stat": {"alpha": 0.01, "min_replicas": 3}}


def test_tier_of_reads_the_section_and_falls_back_to_the_tiers_own() -> None:
    assert tier_of({"loss_match_stat": {"alpha": 0.05, "min_replicas": 4}}) == StatTier(
        alpha=0.05, min_replicas=4
    )
    assert tier_of({}) == StatTier(alpha=0.01, min_replicas=3)
    assert tier_of({"loss_match_stat": {"alpha": 0.2}}) == StatTier(alpha=0.2, min_replicas=3)
    assert tier_of({"loss_match_stat": {"min_replicas": 5}}) == StatTier(alpha=0.01, min_replicas=5)


def test_the_gate_passes_a_correct_run_naming_the_tier_and_fails_a_mistake() -> None:
    ok = judge_stat(ReplicaRuns(replicas(3), ddp()), T)
    assert ok.status == "pass" and ok.message.startswith("statistical tier (K=3, alpha 0.01")
    lr = [x * 1.1 for x in record(1, 0)["lr"]]
    bad = judge_stat(ReplicaRuns(replicas(3), ddp(lr=lr)), T)  # negative control: another lr
    assert bad.status == "fail" and "lr" in bad.message
    few = judge_stat(ReplicaRuns(replicas(3), ddp()), {"loss_match_stat": {"alpha": 0.01, "min_replicas": 4}})
    assert few.status == "inconclusive"


def test_the_gate_in_the_catalogue() -> None:
    g = catalogue.get("loss_match_stat.proc")
    assert g.id == stat_gate("proc").id == "loss_match_stat.proc" and g.takes == ("loss_match_stat",)
    assert g.threshold(T) == "statistical tier: K >= 3 replicas, alpha 0.01 per verdict"
    assert g.threshold({}) == g.threshold(T)
    assert catalogue.stages_for("loss_match_stat.proc")[-1] == "train@proc"
    # no replica stage: skipped as not in the pipeline (our default pipeline has train@proc only)
    assert catalogue.not_in_pipeline(g, lambda s: s == "train@proc") == ["train_replica@0"]
    assert catalogue.not_in_pipeline(g, lambda s: s in ("train@proc", "train_replica@0")) == []
    assert catalogue.select(["loss_match"]) == [
        catalogue.SEALS,
        *[catalogue.get(f"loss_match.{x}") for x in ("thread", "proc")],
    ]


def test_the_picture_shows_each_runs_curve_means() -> None:
    runs = ReplicaRuns(replicas(3), ddp())
    p = stat_picture(runs, T)
    assert p.html.count("<tr>") == 5 and "runs/single-r2" in p.html and "runs/proc" in p.html
    assert "<th>mean train_loss</th><th>mean grad_norm</th>" in p.html
    assert p.caption.startswith("3 replicas of single and runs/proc")


def test_replica_stages_stop_at_the_first_missing_index() -> None:
    have = {"train_replica@0", "train_replica@1", "train_replica@3"}
    assert replica_stages(have.__contains__) == ["train_replica@0", "train_replica@1"]
    assert replica_stages(lambda s: False) == []


def test_the_reader_reads_each_replicas_metrics_then_the_ddp_run(tmp_path: Path) -> None:
    t = Tree(
        tmp_path, stages={"train_replica@0": {"outs": []}, "train_replica@1": {"outs": []}, "train@proc": {}}
    )
    with pytest.raises(
        ArtifactError, match=r"^runs/single-r0/metrics.json: missing, but stage train_replica@0 ran"
    ):
        read_replica_runs(t.artifacts(), "proc")
    t = Tree(tmp_path, stages={"train@proc": {}})
    with pytest.raises(ArtifactError, match=r"^runs/proc/metrics.json: missing, but stage train@proc ran"):
        read_replica_runs(t.artifacts(), "proc")
    t = Tree(tmp_path, stages={"train@thread": {}})
    with pytest.raises(
        ArtifactError, match=r"^runs/thread/metrics.json: missing, but stage train@thread ran"
    ):
        read_replica_runs(t.artifacts(), "thread")


def test_a_replica_folder_holds_a_single_run_only() -> None:
    assert misplaced_run("runs/single-r0/metrics.json", {"launcher": "single"}) is None
    assert misplaced_run("runs/single-r12/metrics.json", {"launcher": "single"}) is None
    assert misplaced_run("runs/single-r0/metrics.json", {"launcher": "proc"}) is not None  # negative control
    assert misplaced_run("runs/single-rx/metrics.json", {"launcher": "single"}) is not None
    assert misplaced_run("runs/proc-r0/metrics.json", {"launcher": "single"}) is not None


def test_the_picture_pinned_whole() -> None:
    one = [("runs/single-r0", {"train_loss": [1.0, 3.0], "grad_norm": [0.5, 0.5]})]
    p = stat_picture(ReplicaRuns(one, ("runs/proc", {"train_loss": [4.0], "grad_norm": [1.0]})), T)
    assert p.html == (
        "<table><tr><th>run</th><th>mean train_loss</th><th>mean grad_norm</th></tr>"
        "<tr><td>runs/single-r0</td><td>2</td><td>0.5</td></tr><tr><td>runs/proc</td><td>4</td><td>1</td></tr>"
        "</table>"
    )
    assert p.caption == "1 replicas of single and runs/proc: the curve means the level tests compare"


def test_a_fresh_unit_is_the_catalogues() -> None:
    # the catalogue's unit is built at import; a fresh one is built under the test (and its mutants)
    g, fresh = catalogue.get("loss_match_stat.proc"), stat_gate("proc")
    for field in ("id", "checks", "why", "investigate", "takes"):
        assert getattr(fresh, field) == getattr(g, field), field
    assert (
        fresh.threshold(T) == g.threshold(T) and fresh.picture is stat_picture and fresh.judge is judge_stat
    )
    assert "runs/proc/loss.csv" in fresh.investigate and "thread" in stat_gate("thread").checks


def write_metrics(tree: Tree, rel: str, stage: str, m: dict) -> None:
    path = tree.root / rel
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(m))
    tree.stages[stage] = {"outs": []}


def read_with(tree: Tree, launcher: str, thresholds: dict | None = None) -> ReplicaRuns:
    """The reader over a tree whose files count as validated against metrics.schema.json (the check's
    shared cache): a reader that names another schema validates them for real and refuses them."""
    a = tree.artifacts()
    for rel in sorted(str(p.relative_to(tree.root)) for p in tree.root.glob("runs/*/metrics.json")):
        a.validated[(rel, "metrics.schema.json", a.lock.md5(rel))] = json.loads((tree.root / rel).read_text())
    return stat_gate(launcher).read(a, thresholds or T) if thresholds else read_replica_runs(a, launcher)


def test_the_reader_returns_every_replica_in_order_then_the_ddp_run(tmp_path: Path) -> None:
    t = Tree(tmp_path)
    ms = []
    for k in range(2):
        m = {"launcher": "single", "world": 1, "train_loss": [1.0 + k]}
        write_metrics(t, f"runs/single-r{k}/metrics.json", f"train_replica@{k}", m)
        ms.append(m)
    ddp_m = {"launcher": "proc", "world": 2, "train_loss": [3.0]}
    write_metrics(t, "runs/proc/metrics.json", "train@proc", ddp_m)
    want = ReplicaRuns([("runs/single-r0", ms[0]), ("runs/single-r1", ms[1])], ("runs/proc", ddp_m))
    assert read_with(t, "proc") == want
    assert read_with(t, "proc", T) == want
    # negative control: the same files validated for real are refused (they are not whole records)
    with pytest.raises(ArtifactError, match=r"^runs/single-r0/metrics.json: "):
        read_replica_runs(t.artifacts(), "proc")
