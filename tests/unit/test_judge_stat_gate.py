"""The statistical tier as a gate (loss_match_stat.proc): its reader (gates/reading/replica_runs.py) and
its judge half (gates/judges/replicas.py judge_stat, tier_of, stat_picture), in process, on hand-built
records. Negative controls: a DDP run of another lr fails through the same gate; a replica folder holding
another launcher's run is still refused as misplaced.
"""

from __future__ import annotations

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
