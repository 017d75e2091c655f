"""gates/judges/pilot.py under mutation (docs/judge-mutation.md): the pilot cells' checks as pure functions.

The bitwise judge (recompute, resume), the differs judge (dropout: masks drawn, an effect), eval at
step 0, the cuda memory half, the pilot tiers and threshold text, crashes and the failing cell's
message, on hand-made records (tests/pipeline/test_pilot_tree.py judges real pilot runs).
"""

from __future__ import annotations

import copy

import pytest

from gates.judges import pilot
from gates.judges.ddp import Check
from gates.judges.pilot import (
    EXACT_SERIES,
    crash_text,
    differs,
    equivalent,
    eval_at_0,
    exact,
    memory,
    run_path,
    threshold_text,
    tiers,
    val_at_0,
    verdict_text,
)
from params.pilot_cells import CELLS

T = {
    "max_rel": 1e-3,
    "min_effect": 1e-3,
    "cpu": {"first_step_rtol": 1e-5, "prefix_steps": None, "final_val_atol": 0.01},
    "cells": {"dropout": {"cpu": {"max_rel": 0.5, "final_val_atol": 0.3}}},
}


def run(**changes) -> dict:
    m = {
        "device": "cpu",
        "train_loss": [4.0, 3.5, 3.0],
        "grad_norm": [2.0, 1.5, 1.0],
        "lr": [0.1, 0.1, 0.1],
        "eval": [{"step": 0, "loss": 4.5}, {"step": 3, "loss": 2.5}],
        "samples": {"count": [8] * 3, "hash_sum": [1, 2, 3], "dropout_hash_sum": [0, 0, 0]},
        "param_digest": "d" * 64,
        "final_val_loss": 2.5,
        "perf": {"peak_memory": {"kind": "rss", "per_rank": [{"rank": 0, "bytes": 2**30}]}},
    }
    m.update(changes)
    return m


def test_paths_and_crash_lines() -> None:
    assert run_path("dropout", "proc") == "runs/pilot/dropout/proc/metrics.json"
    assert crash_text({"rank": 1, "error": "OOM"}) == "rank 1: OOM"
    assert crash_text({"rank": None, "error": "OOM"}) == crash_text({"error": "OOM"}) == "OOM"
    assert crash_text({"rank": 0, "error": "x"}) == "rank 0: x"
    assert EXACT_SERIES == ("grad_norm", "train_loss", "lr")


def test_tiers_take_the_cells_own_bounds() -> None:
    assert tiers(T, "dropout", "cpu") == {
        "max_rel": 0.5,
        "cpu": {"first_step_rtol": 1e-5, "prefix_steps": None, "final_val_atol": 0.3},
    }
    assert tiers(T, "recompute", "cpu") == {"max_rel": 1e-3, "cpu": T["cpu"]}
    assert tiers(T, "recompute", "cuda") == {"max_rel": 1e-3}


def test_exact_passes_only_bitwise_and_names_the_first_series_that_differs() -> None:
    assert exact(run(), run()) == Check(
        "bitwise", True, "bitwise equal: 3 losses, grad norms, evals, parameters"
    )
    got = run(train_loss=[4.0, 3.5, 3.25], grad_norm=[2.0, 1.5, 1.5])
    assert exact(run(), got) == Check(
        "bitwise", False, "grad_norm differs at 1 steps, first step 2: 1.5 vs 1.0 (rel 0.5)"
    )  # gradients first
    assert (
        exact(run(), run(lr=[0.1, 0.2, 0.3])).detail
        == "lr differs at 2 steps, first step 1: 0.2 vs 0.1 (rel 1)"
    )
    assert exact(run(), run(train_loss=[4.0, 3.5, 3.25])).detail.startswith("train_loss differs at 1 steps")


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"eval": [{"step": 0, "loss": 4.5}, {"step": 3, "loss": 2.6}]}, "eval losses"),
        ({"samples": {"count": [8] * 3, "hash_sum": [1, 2, 4], "dropout_hash_sum": [0, 0, 0]}}, "samples"),
        ({"param_digest": "e" * 64}, "parameters (param_digest)"),
    ],
)
def test_exact_sees_what_the_losses_hide(change: dict, name: str) -> None:
    assert exact(run(), run(**change)) == Check("bitwise", False, f"{name} differ though every loss is equal")


def with_masks(hashes: list[int], **changes) -> dict:
    m = run(**changes)
    m["samples"] = {**m["samples"], "dropout_hash_sum": hashes}
    return m


def test_dropout_must_draw_every_step_and_move_the_run() -> None:
    got = with_masks([5, 6, 7], grad_norm=[2.1, 1.5, 1.0])
    samples, masks, effect = differs(run(), got, 1e-3, "base")
    assert samples.ok and samples.detail == "3 steps consumed exactly the base rows"
    assert masks == Check("masks drawn", True, "masks drawn at 3 of 3 steps")
    assert effect == Check(
        "effect", True, "grad_norm[0] rel 0.05, max loss rel 0 from dropout off (one must exceed 0.001)"
    )


def test_dropout_off_on_a_step_or_drawn_by_the_reference_fails() -> None:
    masks = differs(run(), with_masks([5, 0, 0]), 1e-3, "base")[1]
    assert masks == Check(
        "masks drawn",
        False,
        "masks drawn at 1 of 3 steps, none at step 1: dropout is off on this launcher (model in eval mode, or "
        "the dropout setting never reached the model: the seed's T21)",
    )
    masks = differs(with_masks([1, 1, 1]), with_masks([5, 6, 7]), 1e-3, "base")[1]
    assert masks == Check("masks drawn", False, "masks drawn at 3 of 3 steps but the reference drew some")


def test_dropout_without_an_effect_fails_and_either_effect_counts() -> None:
    got = with_masks([5, 6, 7])
    effect = differs(run(), got, 1e-3, "base")[2]
    assert effect == Check(
        "effect", False, "grad_norm[0] rel 0, max loss rel 0 from dropout off (one must exceed 0.001)"
    )
    assert differs(run(), with_masks([5, 6, 7], train_loss=[4.0, 3.5, 3.01]), 1e-3, "base")[2].ok
    assert not differs(run(), with_masks([5, 6, 7], grad_norm=[2.002, 1.5, 1.0]), 1e-3, "base")[
        2
    ].ok  # rel 0.001: not over


def test_eval_at_step_0_is_bitwise_the_references() -> None:
    assert val_at_0(run()) == 4.5 and val_at_0(run(eval=[{"step": 3, "loss": 1.0}])) is None
    assert eval_at_0(run(), run(), "base") == Check(
        "eval at step 0", True, "val loss 4.5 bitwise equal to base's"
    )
    got = run(eval=[{"step": 0, "loss": 4.6}])
    assert eval_at_0(run(), got, "base") == Check(
        "eval at step 0",
        False,
        "val loss 4.6 vs base 4.5 (rel 0.0222) before any update: this cell's features act only in training, "
        "so its eval must equal the reference's bitwise; the eval depends on a training feature (dropout "
        "active in evaluate(): the model in train mode?)",
    )
    no = Check("eval at step 0", False, "no eval at step 0: the pilot base evaluates at step 0")
    assert eval_at_0(run(), run(eval=[]), "base") == no and eval_at_0(run(eval=[]), run(), "base") == no


def test_recompute_must_lower_the_cuda_peak_and_cpu_is_not_judged() -> None:
    assert memory(run(), run()) == []

    def cuda(n: int) -> dict:
        return run(
            perf={"peak_memory": {"kind": "cuda_max_memory_allocated", "per_rank": [{"rank": 0, "bytes": n}]}}
        )

    assert memory(cuda(2**30), cuda(2**29)) == [
        Check("peak memory", True, "peak 512.0 MiB vs 1024.0 MiB without recompute")
    ]
    assert memory(cuda(2**29), cuda(2**29)) == [
        Check("peak memory", False, "peak 512.0 MiB vs 512.0 MiB without recompute")
    ]


def test_equivalent_uses_the_ddp_checks_or_names_the_missing_tier() -> None:
    checks, worst = equivalent(run(), run(), tiers(T, "grad_accum", "cpu"), "grad_accum/single", "base")
    assert [c.name for c in checks] == ["samples", "dropout masks", "first step", "prefix", "end"]
    assert all(c.ok for c in checks) and worst == 0.0
    checks, worst = equivalent(run(), run(device="cuda"), tiers(T, "grad_accum", "cuda"), "x", "base")
    assert checks == [Check("tier", False, "gates.pilot.cuda: missing")] and worst == 0.0
    got = run(grad_norm=[4.0, 1.5, 1.0])
    checks, _ = equivalent(run(), got, tiers(T, "grad_accum", "cpu"), "x", "base")
    assert [c.name for c in checks if not c.ok] == ["first step"]


def test_threshold_text_per_cell() -> None:
    base = "per launcher: DDP gate vs single (samples and dropout masks exact; cpu: step 0 rel <= 1e-05, max rel <= "
    assert threshold_text(T, "base") == base + "0.001 over every step, final val +- 0.01)"
    assert CELLS["dropout"].judge == "differs" and CELLS["recompute"].judge == "exact"
    assert threshold_text(T, "dropout") == (
        base
        + f"0.5 over every step, final val +- 0.3); vs {CELLS['dropout'].reference}: masks drawn every step, "
        "grad_norm[0] or the loss moved > 0.001"
    )
    assert threshold_text(T, "recompute").endswith(
        f"; vs {CELLS['recompute'].reference}: bitwise equal to the reference"
    )
    assert (
        threshold_text(T, "grad_accum").endswith(
            "; vs base: samples and masks exact, step 0, prefix and end as the DDP gate"
        )
        or CELLS["grad_accum"].judge != "equivalent"
    )
    both = {**T, "cuda": {"first_step_rtol": 1e-4, "prefix_steps": 5, "final_val_atol": 0.1}}
    assert "; cuda: step 0 rel <= 0.0001, max rel <= 0.001 over 5 steps, final val +- 0.1)" in threshold_text(
        both, "base"
    )


def test_the_failing_cells_message() -> None:
    results = {
        "single": ([Check("train mode", True, "")], 0.0),
        "thread": ([Check("a", True, ""), Check("b", True, "")], 0.0),
    }
    text = verdict_text("dropout", ["proc: crashed: rank 1: OOM"], {"proc": {"error": "OOM"}}, results)
    assert text == (
        f"cell dropout ({CELLS['dropout'].what}): proc: crashed: rank 1: OOM; judged and passing: single (1 check), "
        "thread (2 checks). Next: a crashed run: python -m pipeline.pilot --cells dropout --launchers proc reruns it "
        "(XTRAIN_DEBUG=1: the traceback; the stage's log has the rank's line); docs/pilot.md; "
        "runs/pilot/dropout/<launcher>/loss.csv"
    )
    results = {"thread": ([Check("train mode", False, "eval mode")], 0.0)}
    text = verdict_text("base", ["thread: train mode: eval mode"], {}, results)
    assert text == (
        f"cell base ({CELLS['base'].what}): thread: train mode: eval mode. Next: "
        f"{pilot.TRAIN_MODE_NEXT.removeprefix('Next: ')}; docs/pilot.md; runs/pilot/base/<launcher>/loss.csv"
    )
    results = {"thread": ([Check("x", False, "no")], 0.0)}
    assert verdict_text("base", ["thread: x: no"], {}, results).endswith(
        "thread: x: no. Next: docs/pilot.md; runs/pilot/base/<launcher>/loss.csv"
    )


def test_records_are_not_changed_by_the_checks() -> None:
    ref, got = run(), with_masks([5, 6, 7])
    before = copy.deepcopy((ref, got))
    differs(ref, got, 1e-3, "base")
    exact(ref, got)
    assert (ref, got) == before
