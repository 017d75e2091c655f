"""The DDP-equivalence gate (gates/judges/ddp.py) on real runs: correct DDP passes, real DDP bugs fail.

Every run here is the real training code on the tiny config with dropout on (masks per global
sample, so DDP equals single device up to summation order even with dropout). The negative
controls inject real bugs from outside xtrain (tests/bug_layer/xtrain_bugs.py: in this process for the
thread ranks, through XTRAIN_TEST_PATCH in every torchrun worker): gradients summed instead of
averaged, every rank reading rank 0's shard, one rank's dropout seed out of sync. Each must fail the gate with the
configured thresholds of params.yaml, under the thread launcher and (for two) real torchrun.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
import torch

from bug_layer import xtrain_bugs as bugs
from conftest import PARAMS, TinyData, tiny_run_config, tiny_spec
from gates.judges import ddp
from gates.judges.outcome import Outcome
from params.config import load_thresholds
from proc_runs import ProcRuns
from xtrain.core import failpoints
from xtrain.core.data import TokenData, step_batch
from xtrain.core.fingerprint import hash32
from xtrain.core.launch import RankFailed, run_single, run_threads
from xtrain.core.model import build_model

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

DROPOUT = {"dropout": 0.1, "attn_dropout": 0.1}
DROPOUT_SETS = tuple(f"model.{k}={v}" for k, v in DROPOUT.items())
TRAIN = {"cpu_threads": 2}
LOSS_MATCH = load_thresholds(PARAMS)["loss_match"]


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def thread_run(data: TinyData, run_dir: Path, world: int, model: dict | None = DROPOUT) -> dict:
    run_threads(tiny_spec(data, launcher="thread", run_dir=run_dir, model=model, train=TRAIN), world, 30)
    return metrics(run_dir)


def torchrun(proc_runs: ProcRuns, bug: str | None = None, world: int = 2) -> dict:
    """A real torchrun run of the tiny config with dropout, shared for the session (tests/proc_runs.py)."""
    return proc_runs.get(world, *DROPOUT_SETS, bug=bug or "").metrics


def verdict(single: dict, run: dict, name: str = "thread") -> Outcome:
    outcome = ddp.equivalence(single, run, name, LOSS_MATCH)
    print(f"{name} world {run['world']}: {outcome.status}: {outcome.message}")
    return outcome


@pytest.fixture(scope="module")
def single(tiny_data: TinyData, tmp_path_factory) -> dict:
    run_dir = tmp_path_factory.mktemp("single")
    run_single(tiny_spec(tiny_data, run_dir=run_dir, model=DROPOUT, train=TRAIN))
    return metrics(run_dir)


@pytest.fixture(scope="module")
def thread2(tiny_data: TinyData, tmp_path_factory) -> dict:
    return thread_run(tiny_data, tmp_path_factory.mktemp("thread2"), 2)


# --- correct DDP passes ---------------------------------------------------------------------------


def test_correct_ddp_with_dropout_passes_at_world_2(single: dict, thread2: dict) -> None:
    outcome = verdict(single, thread2)
    assert outcome.status == "pass", outcome.message
    assert thread2["samples"] == single["samples"]  # exact, not within a tolerance
    assert outcome.measured < 1e-5  # dropout masks per global sample: summation order only


def test_correct_ddp_passes_at_world_4(tiny_data: TinyData, single: dict, tmp_path: Path) -> None:
    run = thread_run(tiny_data, tmp_path, 4)
    assert verdict(single, run).status == "pass"
    assert run["samples"] == single["samples"]


def test_correct_ddp_without_dropout_passes(tiny_data: TinyData, tmp_path: Path) -> None:
    run_single(tiny_spec(tiny_data, run_dir=tmp_path / "single", train=TRAIN))
    run = thread_run(tiny_data, tmp_path / "thread", 2, model=None)
    assert verdict(metrics(tmp_path / "single"), run).status == "pass"


def test_correct_ddp_under_torchrun_passes(single: dict, proc_runs: ProcRuns) -> None:
    assert verdict(single, torchrun(proc_runs), "proc").status == "pass"


# --- negative controls: real DDP bugs fail ------------------------------------------------------


def faulty_thread_run(data: TinyData, run_dir: Path, world: int, bug: str, monkeypatch) -> dict:
    bugs.inject(monkeypatch, bug)
    return thread_run(data, run_dir, world)


def failed_checks(outcome: Outcome) -> list[str]:
    assert outcome.status == "fail", outcome.message
    names = ("samples", "dropout masks", "first step", "prefix", "end")
    return [name for name in names if f"{name}: " in outcome.message]


@pytest.mark.parametrize("world", [2, 4])
def test_summed_gradients_fail_at_the_first_step(
    tiny_data: TinyData, single: dict, tmp_path: Path, monkeypatch, world: int
) -> None:
    run = faulty_thread_run(tiny_data, tmp_path, world, "grad_sum@*:0", monkeypatch)
    outcome = verdict(single, run)
    assert "first step" in failed_checks(outcome)
    assert run["grad_norm"][0] == pytest.approx(world * single["grad_norm"][0], rel=1e-5)
    assert "gradients summed instead of averaged" in outcome.message
    assert run["samples"] == single["samples"]  # the data and masks were right: only the reduction is wrong


def test_ranks_reading_the_same_shard_fail_the_sample_check(
    tiny_data: TinyData, single: dict, tmp_path: Path, monkeypatch
) -> None:
    run = faulty_thread_run(tiny_data, tmp_path, 2, "same_shard@*:0", monkeypatch)
    outcome = verdict(single, run)
    assert failed_checks(outcome)[0] == "samples"
    assert f"samples differ at {single['steps']} of {single['steps']} steps, first step 0" in outcome.message
    assert run["samples"]["count"] == single["samples"]["count"]  # same row count: only the hash tells


def test_one_rank_reading_the_same_shard_late_is_caught_at_that_step(
    tiny_data: TinyData, single: dict, tmp_path: Path, monkeypatch
) -> None:
    run = faulty_thread_run(tiny_data, tmp_path, 4, "same_shard@3:7", monkeypatch)
    outcome = verdict(single, run)
    assert "samples" in failed_checks(outcome)
    assert "samples differ at 5 of 12 steps, first step 7" in outcome.message


def test_an_unsynchronised_dropout_rng_fails(
    tiny_data: TinyData, single: dict, tmp_path: Path, monkeypatch
) -> None:
    run = faulty_thread_run(tiny_data, tmp_path, 2, "dropout_unsync@1:0", monkeypatch)
    outcome = verdict(single, run)
    assert failed_checks(outcome)[:2] == ["dropout masks", "first step"]  # exact, and at step 0 on CPU
    assert "dropout differs at 12 of 12 steps, first step 0: the ranks drew other masks" in outcome.message
    assert run["samples"]["hash_sum"] == single["samples"]["hash_sum"]


# grad_sum and same_shard at world 4: the runs test_launcher_parity.py judges against the thread launcher
@pytest.mark.parametrize(
    "bug,world,check",
    [
        ("grad_sum@*:0", 4, "first step"),
        ("same_shard@*:0", 4, "samples"),
        ("dropout_unsync@0:3", 2, "dropout masks"),
    ],
)
def test_ddp_bugs_under_torchrun_fail(
    single: dict, proc_runs: ProcRuns, bug: str, world: int, check: str
) -> None:
    run = torchrun(proc_runs, bug, world)
    assert run["world"] == world
    assert check in failed_checks(verdict(single, run, "proc"))


def test_without_dropout_an_unsynchronised_dropout_seed_changes_nothing(
    tiny_data: TinyData, tmp_path: Path, monkeypatch
) -> None:
    """The fault only exists where there is dropout: the gate must not flag a dropout-free run."""
    run_single(tiny_spec(tiny_data, run_dir=tmp_path / "single", train=TRAIN))
    bugs.inject(monkeypatch, "dropout_unsync@1:0")
    run = thread_run(tiny_data, tmp_path / "thread", 2, model=None)
    assert verdict(metrics(tmp_path / "single"), run).status == "pass"
    assert set(run["samples"]["dropout_hash_sum"]) == {0}


def test_a_rank_training_with_dropout_off_fails(tiny_data: TinyData, single: dict, tmp_path: Path) -> None:
    """The seed design's bug, one rank without dropout: caught exactly, whatever the loss does."""

    def target(spec, comm):
        from xtrain.core.launch import rank_main

        if comm.rank == 1:
            spec = dataclasses.replace(
                spec,
                run=dataclasses.replace(
                    spec.run, model=dataclasses.replace(spec.run.model, dropout=0.0, attn_dropout=0.0)
                ),
            )
        return rank_main(spec, comm)

    spec = tiny_spec(tiny_data, launcher="thread", run_dir=tmp_path, model=DROPOUT, train=TRAIN)
    run_threads(spec, 2, 30, target=target)
    outcome = verdict(single, metrics(tmp_path))
    assert (
        "dropout masks" in failed_checks(outcome)
        and "first step 0: the ranks drew other masks" in outcome.message
    )


def test_the_fingerprints_survive_a_crash_and_resume(
    tiny_data: TinyData, thread2: dict, tmp_path: Path, monkeypatch
) -> None:
    spec = tiny_spec(tiny_data, launcher="thread", run_dir=tmp_path, model=DROPOUT, train=TRAIN)
    monkeypatch.setattr(failpoints, "_FAULT", failpoints.parse("raise@1:8"))
    with pytest.raises(RankFailed):
        run_threads(spec, 2, 30)
    monkeypatch.setattr(failpoints, "_FAULT", None)
    run_threads(dataclasses.replace(spec, resume=True), 2, 30)
    resumed = metrics(tmp_path)
    assert resumed["resumed_from_step"] == 6
    assert resumed["samples"] == thread2["samples"] and resumed["train_loss"] == thread2["train_loss"]


# --- the gate's own logic on a real run, edited --------------------------------------------------


def test_a_late_divergence_fails_only_the_end_check(single: dict, thread2: dict) -> None:
    late = copy.deepcopy(thread2)
    late["final_val_loss"] += 2 * LOSS_MATCH["cpu"]["final_val_atol"]
    outcome = verdict(single, late)
    assert failed_checks(outcome) == ["end"] and "late divergence only" in outcome.message


def test_the_gpu_tier_compares_a_prefix_only(single: dict, thread2: dict) -> None:
    """On the cuda tier a step after the prefix may drift (chaos); inside the prefix it may not."""
    as_cuda = {**LOSS_MATCH["cuda"], "prefix_steps": 6}
    tiers = {**LOSS_MATCH, "cuda": as_cuda}
    ref, run = (dict(copy.deepcopy(m), device="cuda") for m in (single, thread2))
    run["train_loss"][9] *= 1.01
    assert ddp.equivalence(ref, run, "thread", tiers).status == "pass"
    run["train_loss"][5] *= 1.01
    outcome = ddp.equivalence(ref, run, "thread", tiers)
    assert failed_checks(outcome) == ["prefix"] and "first step over 0.001: step 5" in outcome.message


def test_a_device_without_a_tier_fails_naming_the_key(single: dict, thread2: dict) -> None:
    outcome = ddp.equivalence(single, thread2, "thread", {"max_rel": 1e-3})
    assert outcome.status == "fail" and "gates.loss_match.cpu: missing" in outcome.message


def test_a_non_finite_first_step_fails(single: dict, thread2: dict) -> None:
    bad = copy.deepcopy(thread2)
    bad["grad_norm"][0] = float("nan")
    assert "first step" in failed_checks(verdict(single, bad))


def test_the_trainer_records_the_initial_weights_and_the_shapes(single: dict, thread2: dict) -> None:
    """What check_observed compares: rank 0's weights before step 0 and the parameters' names and
    shapes, the same for a single-device run and a DDP one of the same config."""
    for key in ("init_param_digest", "param_shapes_digest"):
        assert len(single[key]) == 64 and single[key] == thread2[key], key
    assert single["init_param_digest"] != single["param_digest"]  # before training, not after


def test_runs_of_another_seed_fail_naming_the_seed_and_the_initial_weights(
    tiny_data: TinyData, single: dict, tmp_path: Path
) -> None:
    """Judged by what the runs did: another seed starts from other weights, and the message names the
    config key with the observation it changed (no refusal on the config's text)."""
    spec = tiny_spec(tiny_data, launcher="thread", run_dir=tmp_path, model=DROPOUT, train=TRAIN, seed=1235)
    run_threads(spec, 2, 30)
    outcome = verdict(single, metrics(tmp_path))
    assert outcome.status == "fail"
    assert "observed: thread vs single: seed 1235 vs 1234 changed initial parameters: " in outcome.message


# --- the parts the gate relies on ----------------------------------------------------------------


def test_rank_shards_partition_the_batch_and_their_hashes_sum_exactly(tiny_data: TinyData) -> None:
    data = TokenData.load(str(tiny_data.tokens), "cpu")
    whole = step_batch(data, 5, 3, 8, 2, 16, 0, 1)
    for world in (2, 4):
        parts = [step_batch(data, 5, 3, 8, 2, 16, r, world) for r in range(world)]
        rows = sorted(row for p in parts for micro in p.rows for row in micro)
        assert rows == list(range(8))  # disjoint, union the whole batch
        total = torch.tensor([float(p.hash_sum) for p in parts], dtype=torch.float64).sum()
        assert int(total) == whole.hash_sum and sum(p.count for p in parts) == whole.count == 8
    assert 0 <= hash32(2**40) < 2**32 and hash32(1) != hash32(2)


def test_a_sample_gets_the_same_dropout_mask_on_any_rank(tiny_data: TinyData) -> None:
    """Rows [0..3] in one forward equal rows [0, 2] and [1, 3] in two (what two ranks see)."""
    cfg = tiny_run_config(tiny_data.vocab_size, model={"dropout": 0.5, "attn_dropout": 0.5}).model
    model = build_model(cfg, 0)
    model.train()
    idx = torch.randint(0, tiny_data.vocab_size, (4, 16), generator=torch.Generator().manual_seed(0))
    model.set_dropout_seed(99, [0, 1, 2, 3])
    whole = model(idx)
    model.set_dropout_seed(99, [0, 2])
    even = model(idx[[0, 2]])
    model.set_dropout_seed(99, [1, 3])
    odd = model(idx[[1, 3]])
    torch.testing.assert_close(torch.stack([even[0], odd[0], even[1], odd[1]]), whole, rtol=1e-5, atol=1e-6)
    model.set_dropout_seed(99, [1, 0])  # the same samples as other global rows: other masks
    assert not torch.allclose(model(idx[[0, 1]]), whole[[0, 1]])
