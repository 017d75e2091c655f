"""gates/judges/provenance.py's gate under mutation (docs/judge-mutation.md): provenance, repro_record,
reuse_text and uncached_problems, in-process.

dvc.yaml and reports/repro.json are real files under a temporary root (read by yaml and the repro
contract); runs/env.json and the runs' metrics.json come from a small reader holding plain records,
as in tests/unit/test_judge_provenance.py (whose picture tests share the machine facts below).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.fileio import md5_file
from contracts.machine import facts_hash
from gates.judges.provenance import THRESHOLD, reuse_text
from gates.judges.provenance import provenance as judged
from gates.judges.provenance import uncached_problems as uncached
from gates.reading.artifacts import ArtifactError
from gates.reading.run_origins import fresh_stage, read_machines, repro_record
from registry.sealed import seal


def provenance(a) -> Any:
    """The verdict on what the reader reads of `a`."""
    return judged(read_machines(a))


def uncached_problems(root: Path) -> list[str]:
    """The cached outs of train_single in root/dvc.yaml, read, then judged."""
    return uncached(fresh_stage(root))


MACHINE = {"cpu": {"model_name": "Some CPU", "isa": ["avx2"]}, "torch": "2.13.0+cpu"}
HERE = facts_hash(MACHINE)
OTHER = facts_hash({**MACHINE, "cpu": {**MACHINE["cpu"], "model_name": "Other CPU"}})
UNCACHED = {"cache": False}
FRESH_OUTS = {
    "outs": [{"runs/single/checkpoints": UNCACHED}, {"runs/single/metrics.json": UNCACHED}],
    "metrics": [{"runs/single/summary.json": UNCACHED}],
    "plots": [{"runs/single/loss.csv": UNCACHED}],
}


def run_env(env_id: str, **cpu: Any) -> dict[str, Any]:
    facts = {**MACHINE, "cpu": {**MACHINE["cpu"], **cpu}, "threads_per_rank": 2, "precision": "fp32"}
    return {"env_id": env_id, "dispatch_facts": facts}


class Lock:
    def __init__(self, stages: set[str]) -> None:
        self.stages = stages

    def in_pipeline(self, stage: str) -> bool:
        return stage in self.stages


class Tree:
    """What the gate reads: dvc.yaml and reports/repro.json on disk, env.json and the runs as records."""

    def __init__(self, root: Path, runs: dict[str, dict], stages: set[str], fresh: Any = FRESH_OUTS) -> None:
        self.root = root
        self.files = {"runs/env.json": {"machine": MACHINE, "machine_hash": HERE}} | {
            f"runs/{k}/metrics.json": {"env": v} for k, v in runs.items()
        }
        self.lock = Lock(stages)
        write_dvc_yaml(root, {"stages": {"train_single": fresh, "train@thread": {"outs": ["runs/thread"]}}})

    def json(self, rel: str, schema: str, stage: str) -> dict[str, Any]:
        return self.files[rel]


def write_dvc_yaml(root: Path, data: Any) -> None:
    (root / "dvc.yaml").write_text(yaml.safe_dump(data))


def repro(root: Path, stages: dict[str, str], pulled: bool = False, remote: str | None = "/r") -> dict:
    rec = {
        "format": "xtrain-repro/1",
        "started_at": "2026-12-02T02:26:37Z",
        "wall_s": 1.0,
        "remote": remote,
        "pulled": pulled,
        "targets": [],
        "exit_code": 0,
        "stages": stages,
        "jobs": 1,
        "timings": {},
        "dvc_lock_md5": md5_file(root / "dvc.lock") if (root / "dvc.lock").is_file() else None,
    }
    rec = seal(rec)  # as pipeline/repro.py writes it
    (root / "reports").mkdir(exist_ok=True)
    (root / "reports" / "repro.json").write_text(json.dumps(rec))
    return rec


# -- uncached_problems -----------------------------------------------------------------------------


def cached(p: str) -> str:
    return f"dvc.yaml: train_single out {p} is cached: a run cache could restore it"


def test_uncached_outs_have_no_problem(tmp_path: Path) -> None:
    write_dvc_yaml(tmp_path, {"stages": {"train_single": FRESH_OUTS, "other": {"outs": ["x"]}}})
    assert uncached_problems(tmp_path) == []


def test_every_cached_out_of_train_single_is_named_in_order(tmp_path: Path) -> None:
    body = {
        "outs": ["runs/single/checkpoints", {"runs/single/metrics.json": UNCACHED}, {"a": {"persist": True}}],
        "metrics": [{"runs/single/summary.json": {"cache": True}}],
        "plots": [{"runs/single/loss.csv": None}],
    }
    write_dvc_yaml(tmp_path, {"stages": {"train_single": body, "train@thread": {"outs": ["runs/thread"]}}})
    assert uncached_problems(tmp_path) == [
        cached("runs/single/checkpoints"),
        cached("a"),
        cached("runs/single/summary.json"),
        cached("runs/single/loss.csv"),
    ]


@pytest.mark.parametrize(
    "text",
    ["", "stages:\n", "stages: {}\n", "stages:\n  train_single:\n", "stages:\n  train_single:\n    outs:\n"],
)
def test_an_empty_pipeline_or_stage_has_no_out_to_cache(tmp_path: Path, text: str) -> None:
    (tmp_path / "dvc.yaml").write_text(text)
    assert uncached_problems(tmp_path) == []


def test_an_unreadable_dvc_yaml_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError) as e:
        uncached_problems(tmp_path)
    assert (
        str(e.value)
        == f"dvc.yaml: cannot be read: [Errno 2] No such file or directory: '{tmp_path}/dvc.yaml'"
    )
    (tmp_path / "dvc.yaml").write_text("- a\n- b\n")
    with pytest.raises(ArtifactError) as e:
        uncached_problems(tmp_path)
    assert str(e.value) == "dvc.yaml: cannot be read: 'list' object has no attribute 'get'"
    (tmp_path / "dvc.yaml").write_text("stages: [\n")
    with pytest.raises(ArtifactError, match=r"^dvc.yaml: cannot be read: while parsing a flow node"):
        uncached_problems(tmp_path)


# -- repro_record and reuse_text -------------------------------------------------------------------


def test_the_repro_record_is_read_validated_or_absent(tmp_path: Path) -> None:
    assert repro_record(tmp_path) is None
    rec = repro(tmp_path, {"env": "ran"})
    assert repro_record(tmp_path) == rec
    (tmp_path / "reports" / "repro.json").write_text(json.dumps({**rec, "stages": {"env": "stolen"}}))
    with pytest.raises(ArtifactError) as e:
        repro_record(tmp_path)
    assert str(e.value) == (
        f'{tmp_path}/reports/repro.json: stages.env: "stolen" is invalid (rule: one of "ran", "restored", '
        '"unchanged"); next: rerun python -m pipeline.repro, or delete reports/repro.json'
    )
    assert e.value.__cause__ is None


HAND = (
    "reports/repro.json: content_sha256 does not match its content: edited by hand (rule: only python -m "
    "pipeline.repro writes it); next: rerun python -m pipeline.repro, or delete reports/repro.json"
)


def test_a_hand_written_or_edited_repro_record_is_an_error(tmp_path: Path) -> None:
    """Issue #51: a hand-written reports/repro.json with every stage "ran" passed provenance (not sealed)."""
    rec = repro(tmp_path, {"train_single": "restored"})
    path = tmp_path / "reports" / "repro.json"
    path.write_text(json.dumps({**rec, "stages": {"train_single": "ran"}}))  # the seal left as it was
    with pytest.raises(ArtifactError) as e:
        repro_record(tmp_path)
    assert str(e.value) == HAND
    path.write_text(json.dumps({k: v for k, v in rec.items() if k != "content_sha256"}))  # no seal at all
    with pytest.raises(ArtifactError, match=r"repro\.json: content_sha256: missing required key"):
        repro_record(tmp_path)
    path.write_text(json.dumps({**rec, "content_sha256": "0" * 64}))
    with pytest.raises(ArtifactError) as e:
        repro_record(tmp_path)
    assert str(e.value) == HAND
    resealed = seal(
        {**rec, "stages": {"train_single": "ran"}}
    )  # the one forger out of scope (docs/verdicts.md)
    path.write_text(json.dumps(resealed))
    assert repro_record(tmp_path) == resealed


def test_a_record_of_another_dvc_lock_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    rec = repro(tmp_path, {"train_single": "restored"})
    assert repro_record(tmp_path) == rec  # of this dvc.lock
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {x: {cmd: y}}\n")  # a later dvc repro
    assert repro_record(tmp_path) == {**rec, "stages": None}
    assert reuse_text(repro_record(tmp_path)) == (
        "reuse not recorded (reports/repro.json is of another dvc.lock: an earlier repro)"
    )
    (tmp_path / "dvc.lock").unlink()
    assert repro_record(tmp_path)["stages"] is None  # recorded one, none now
    rec = repro(tmp_path, {"env": "ran"})  # no dvc.lock when it was written, none now: this tree's
    assert rec["dvc_lock_md5"] is None and repro_record(tmp_path) == rec


def test_reuse_not_recorded() -> None:
    assert reuse_text(None) == "reuse not recorded (reports/repro.json absent: run python -m pipeline.repro)"


def test_reuse_names_each_stage_by_what_happened_sorted(tmp_path: Path) -> None:
    stages = {
        "tokenizer": "restored",
        "env": "ran",
        "corpus": "ran",
        "export": "unchanged",
        "scaling": "unchanged",
        "closed": "restored",
    }
    rec = repro(tmp_path, stages)
    assert reuse_text(rec) == (
        "ran here: corpus, env; restored from the run cache: closed, tokenizer; "
        "up to date from an earlier repro: export, scaling"
    )
    assert reuse_text({**rec, "pulled": True}) == (
        "ran here: corpus, env; restored from the run cache from /r: closed, tokenizer; "
        "up to date from an earlier repro: export, scaling"
    )


def test_reuse_with_nothing_ran_or_reused(tmp_path: Path) -> None:
    rec = repro(tmp_path, {})
    assert reuse_text(rec) == "ran here: none"
    assert (
        reuse_text({**rec, "stages": {"env": "restored"}})
        == "ran here: none; restored from the run cache: env"
    )
    assert reuse_text({**rec, "stages": {"env": "unchanged"}}) == (
        "ran here: none; up to date from an earlier repro: env"
    )
    assert reuse_text({**rec, "stages": {"env": "ran"}, "pulled": True}) == "ran here: env"


# -- provenance: the verdict -----------------------------------------------------------------------

TRAINS = {"train_single", "train@thread", "train@proc"}
NOT_RECORDED = "reuse not recorded (reports/repro.json absent: run python -m pipeline.repro)"


def test_runs_made_here_pass_saying_what_was_reused(tmp_path: Path) -> None:
    a = Tree(tmp_path, {k: run_env(f"e-{k}") for k in ("single", "thread", "proc")}, TRAINS)
    o = provenance(a)
    assert (o.status, o.measured, o.threshold) == ("pass", HERE, THRESHOLD)
    assert o.message == f"every run made on this machine ({HERE}); {NOT_RECORDED}"
    for how in ("ran", "unchanged"):
        repro(tmp_path, {"train_single": how, "env": "restored"})
        o = provenance(a)
        assert o.status == "pass"
        assert o.message == (
            f"every run made on this machine ({HERE}); ran here: {'train_single' if how == 'ran' else 'none'}; "
            f"restored from the run cache: env"
            + ("; up to date from an earlier repro: train_single" if how == "unchanged" else "")
        )
    assert THRESHOLD == (
        "every run's machine facts = runs/env.json's; train_single's outs uncached and never restored"
    )


def test_a_restored_train_single_fails(tmp_path: Path) -> None:
    a = Tree(tmp_path, {"single": run_env("e-s")}, {"train_single"})
    repro(tmp_path, {"train_single": "restored", "train@thread": "restored"})
    o = provenance(a)
    assert (o.status, o.measured, o.threshold) == ("fail", 1, THRESHOLD)
    assert o.message == (
        "reports/repro.json: train_single was restored from the run cache, not trained on this machine "
        "(ran here: none; restored from the run cache: train@thread, train_single)"
    )
    repro(tmp_path, {"train@thread": "restored"})
    assert provenance(a).status == "pass"


def test_every_problem_is_counted_and_named(tmp_path: Path) -> None:
    fresh = {**FRESH_OUTS, "metrics": ["runs/single/summary.json"]}
    a = Tree(
        tmp_path,
        {"single": run_env("e-s"), "proc": run_env("e-p", model_name="Other CPU")},
        TRAINS - {"train@thread"},
        fresh,
    )
    o = provenance(a)
    assert (o.status, o.measured, o.threshold) == ("fail", 2, THRESHOLD)
    assert o.message == (
        f"runs/proc was made on machine {OTHER} (e-p), this is {HERE}: a run restored from another "
        f"environment's cache (dvc repro -f train@proc); {cached('runs/single/summary.json')} ({NOT_RECORDED})"
    )
    repro(tmp_path, {"train_single": "restored"}, pulled=True)
    o = provenance(a)
    assert o.measured == 3 and o.message.endswith(
        "; reports/repro.json: train_single was restored from the run cache, not trained on this machine "
        "(ran here: none; restored from the run cache from /r: train_single)"
    )


# -- the judge on records built by hand, no tree (gates/reading/run_origins.py reads them) -------------------


def test_the_judge_takes_plain_records_and_no_tree() -> None:
    from gates.reading.run_origins import MachineRecords, RunMachine

    here = [RunMachine("single", "train_single", "e-s", HERE), RunMachine("proc", "train@proc", "e-p", HERE)]
    r = MachineRecords(HERE, tuple(here), FRESH_OUTS, None)
    o = judged(r)
    assert (o.status, o.measured, o.message) == (
        "pass",
        HERE,
        f"every run made on this machine ({HERE}); {NOT_RECORDED}",
    )
    elsewhere = MachineRecords(HERE, (here[0], RunMachine("proc", "train@proc", "e-p", OTHER)), {}, None)
    o = judged(elsewhere)
    assert (o.status, o.measured) == ("fail", 1) and o.message == (
        f"runs/proc was made on machine {OTHER} (e-p), this is {HERE}: a run restored from another environment's "
        f"cache (dvc repro -f train@proc) ({NOT_RECORDED})"
    )
    cached_out = MachineRecords(HERE, (), {"outs": ["runs/single/checkpoints"]}, None)
    assert judged(cached_out).message == f"{cached('runs/single/checkpoints')} ({NOT_RECORDED})"
    stale_repro = {"stages": None}
    o = judged(MachineRecords(HERE, (), {}, stale_repro))
    assert (o.status, o.message) == (
        "pass",
        f"every run made on this machine ({HERE}); reuse not recorded (reports/repro.json is of another dvc.lock: "
        "an earlier repro)",
    )
    restored = {"stages": {"train_single": "restored"}, "remote": "/r", "pulled": False}
    assert judged(MachineRecords(HERE, (), {}, restored)).status == "fail"
