"""params/pilot_cells.py under mutation (docs/judge-mutation.md): what each pilot cell trains with."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import PARAMS
from params import pilot_cells
from params.config import Params, load_params
from params.pilot_cells import (
    BASE,
    EVAL_INERT,
    FEATURES_OFF,
    Cell,
    base_sets,
    cell_params,
    cell_sets,
    cells_for,
    config_diff,
    eval_identity,
    pilot_section,
)


@pytest.fixture(scope="module")
def cpu() -> Params:
    return load_params(PARAMS, ["profile=cpu"])


def with_pilot(p: Params, **pilot) -> Params:
    return Params(raw={**p.raw, "pilot": {**p.raw["pilot"], **pilot}}, source="p.yaml")


def test_a_missing_pilot_section_says_so(cpu: Params) -> None:
    raw = {k: v for k, v in cpu.raw.items() if k != "pilot"}
    with pytest.raises(KeyError) as e:
        pilot_section(Params(raw=raw, source="p.yaml"))
    assert e.value.args == ("params.yaml: pilot: missing: the pilot stage needs a pilot: section",)


@pytest.mark.parametrize(
    ("cells", "wanted"),
    [
        ({"cpu": ["all", "recompute"]}, [BASE, "dropout", "all", "recompute"]),  # references first
        ({"cpu": []}, []),  # nothing asked: not even the base
        ({"gpu": ["dropout"]}, []),  # the profile has no entry
    ],
)
def test_cells_for_the_active_profile(cpu: Params, cells: dict, wanted: list[str]) -> None:
    assert cells_for(with_pilot(cpu, cells=cells)) == wanted


def test_base_sets_turn_features_off_and_size_the_runs(cpu: Params) -> None:
    p = with_pilot(cpu, steps=6, sets={"cpu": ["train.eval_batches=1"], "gpu": ["x=1"]})
    warm = min(cpu.raw["train"]["warmup_steps"], 6)
    assert base_sets(p) == [
        *FEATURES_OFF,
        "train.steps=6",
        f"train.warmup_steps={warm}",
        "train.eval_every=6",
        "train.log_every=6",
        "train.ckpt_every=0",
        "train.eval_batches=1",
    ]
    for pilot in ({"sets": {"gpu": ["x=1"]}}, {"sets": {}}):
        assert base_sets(with_pilot(cpu, steps=6, **pilot))[-1] == "train.ckpt_every=0"
    no_sets = {k: v for k, v in cpu.raw["pilot"].items() if k != "sets"}
    assert base_sets(Params(raw={**cpu.raw, "pilot": no_sets}, source="p"))[-1] == "train.ckpt_every=0"


def test_only_the_resume_cell_checkpoints(cpu: Params) -> None:
    p = with_pilot(cpu, resume_at=3)
    assert cell_sets(p, "resume") == [*base_sets(p), "train.ckpt_every=3"]
    assert cell_sets(p, "dropout") == [*base_sets(p), *pilot_cells.DROPOUT_SETS]
    assert "train.precision=bf16" not in cell_sets(p, "all")  # bf16 joins `all` on cuda only


def test_cell_params_name_the_cell(cpu: Params) -> None:
    p = cell_params(cpu, "grad_accum")
    assert p.source == f"{PARAMS} (pilot cell grad_accum)" and p.raw["train"]["grad_accum"] == 2


def test_a_cell_is_resolved_once_per_params_and_a_copy_resolves_its_own(cpu: Params) -> None:
    first = cell_params(cpu, "grad_accum")
    assert cell_params(cpu, "grad_accum") is first and cell_params(cpu, BASE) is not first
    # control: a replaced Params (other raw) never reads the first one's resolved cells
    other = dataclasses.replace(cpu, raw={**cpu.raw, "seed": cpu.raw["seed"] + 1})
    assert other.resolved_cells == {} and cpu.resolved_cells
    assert cell_params(other, "grad_accum").raw["seed"] == first.raw["seed"] + 1


def test_config_diff_names_the_keys_a_cell_changes(cpu: Params) -> None:
    assert config_diff(cpu, "dropout", BASE) == {"model.dropout", "model.attn_dropout"}
    assert config_diff(cpu, BASE, "resume") == {"train.ckpt_every"}


@pytest.fixture()
def extra_cells(monkeypatch) -> None:
    inert = ("model.dropout=0.1", "model.attn_dropout=0.1", "model.recompute=true")
    inert += ("train.grad_accum=2", "train.fused_adamw=true", "train.ckpt_every=5")
    monkeypatch.setitem(pilot_cells.CELLS, "seeded", Cell("seeded", ("seed=7",), BASE, "exact", "a seed"))
    monkeypatch.setitem(pilot_cells.CELLS, "inert", Cell("inert", inert, BASE, "exact", "every inert key"))


def test_a_changed_seed_is_a_difference_and_no_eval_identity(cpu: Params, extra_cells) -> None:
    assert config_diff(cpu, "seeded", BASE) == {"seed"}
    assert eval_identity(cpu, "seeded") is False


def test_eval_identity_holds_up_to_every_inert_key_at_once(cpu: Params, extra_cells) -> None:
    assert config_diff(cpu, "inert", BASE) == EVAL_INERT
    assert eval_identity(cpu, "inert") is True
    assert eval_identity(cpu, BASE) is False  # its own reference: nothing to compare


def test_on_cuda_only_the_all_cell_adds_bf16(cpu: Params) -> None:
    cuda = Params(raw={**cpu.raw, "train": {**cpu.raw["train"], "device": "cuda"}}, source="p.yaml")
    assert cell_sets(cuda, "all") == [*cell_sets(cpu, "all"), "train.precision=bf16"]
    assert cell_sets(cuda, "dropout") == cell_sets(cpu, "dropout")
