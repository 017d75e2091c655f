"""The pilot's cells (params/pilot_cells.py) and the dropout fingerprint under recompute: no launcher."""

from __future__ import annotations

import pytest
import torch

from conftest import PARAMS, tiny_run_config
from params.config import load_params
from params.pilot_cells import CELLS, FEATURES_OFF, cell_params, cells_for
from xtrain.core.model import build_model


@pytest.mark.parametrize("profile", ["cpu", "gpu"])
def test_every_cell_of_every_profile_resolves_to_valid_params(profile: str) -> None:
    params = load_params(PARAMS, [f"profile={profile}"])
    cells = cells_for(params)
    assert cells[0] == "base" and all(CELLS[c].reference in cells[: cells.index(c) + 1] for c in cells)
    for cell in cells:
        p = cell_params(params, cell)
        assert p["train"]["steps"] == params["pilot"]["steps"]
        assert p["train"]["eval_every"] == p["train"]["steps"]
    base = cell_params(params, "base")
    off = dict(o.split("=") for o in FEATURES_OFF)
    assert str(base["model"]["dropout"]) == off["model.dropout"] and base["train"]["precision"] == "fp32"
    assert base["train"]["grad_accum"] == 1 and not base["train"]["fused_adamw"]


def test_the_gpu_profile_runs_the_cuda_cells_and_the_cpu_profile_does_not() -> None:
    gpu = cells_for(load_params(PARAMS, ["profile=gpu"]))
    cpu = cells_for(load_params(PARAMS, ["profile=cpu"]))
    assert {"compile", "bf16", "grad_accum4", "fused_adamw"} <= set(gpu)
    assert not {"compile", "bf16"} & set(cpu)
    assert cell_params(load_params(PARAMS, ["profile=gpu"]), "all")["train"]["precision"] == "bf16"


def masks_drawn(recompute: bool) -> int:
    cfg = tiny_run_config(300, model={"dropout": 0.1, "attn_dropout": 0.1, "recompute": recompute})
    model = build_model(cfg.model, cfg.seed)
    model.train()
    model.set_dropout_seed(7)
    model.loss(torch.randint(0, 300, (2, 8)), torch.randint(0, 300, (2, 8))).backward()
    return model.dropout.take_drawn()


def test_recompute_replays_count_each_dropout_mask_once() -> None:
    """The bug the pilot's `all` cell found: the replay drew every mask again and doubled the fingerprint."""
    plain = masks_drawn(False)
    assert plain > 0 and masks_drawn(True) == plain


def test_whatever_a_run_raises_is_recorded_with_its_rank(monkeypatch) -> None:
    """Inputs are validated before any run (preflight): a run's own ValidationError (a resume that
    refuses the checkpoint its run wrote: k-norm-uses-q-norm in the mutation campaign) is a recorded
    failure, not an error of the stage; a rank's failure names the rank."""
    from contracts.validate import ValidationError
    from xtrain.core import launch, pilot

    def refused(*_args) -> None:
        raise ValidationError("ckpt/optimizer.safetensors", "", "no tensor k_norm.weight.step")

    monkeypatch.setattr(pilot, "run_here", refused)
    record, _ = pilot.run_recorded([], "single", 1, 1.0)
    assert record == {
        "status": "failed",
        "rank": None,
        "error": "ValidationError: ckpt/optimizer.safetensors: no tensor k_norm.weight.step",
    }

    def rank_failed(*_args) -> None:
        raise launch.RankFailed(1, RuntimeError("Expected to have finished\nreduction"), note="ranks [0] lag")

    monkeypatch.setattr(pilot, "run_here", rank_failed)
    record, _ = pilot.run_recorded([], "thread", 2, 1.0)
    assert record == {
        "status": "failed",
        "rank": 1,
        "error": "RuntimeError: Expected to have finished reduction; ranks [0] lag",
    }
