"""gates/reading/goldens.py under mutation (docs/judge-mutation.md): what tests/unit/test_judge_fresh_train.py
leaves open. Step keys are numbers (step 10 comes after step 2), an env_id's device type is the
part before its first '-', and the run's own environment is skipped, not the end of the search.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.reading.goldens import choose, coverage_problems, golden_env
from judge_trees import make_golden, make_registry
from registry.store import Entry, Registry


def golden(train_steps: int, eval_steps: list[int]) -> dict:
    values = {str(s): 1.0 for s in range(train_steps)}
    return {
        "env_id": "e",
        "version": 2,
        "metrics": {
            "train_loss": {"values": values},
            "val_loss": {"values": {str(s): 1.0 for s in eval_steps}},
        },
    }


def test_steps_are_ordered_as_numbers() -> None:
    train = {"steps": 12, "eval_every": 5}
    assert coverage_problems(golden(12, [0, 5, 10, 12]), train) == []
    assert coverage_problems(golden(11, [0, 5, 12]), train) == [
        "golden e v2 holds train losses for 11 steps, the config has 12",
        "golden e v2 holds val losses at steps ['0', '5', '12'], the config implies ['0', '5', '10', '12']",
    ]


@pytest.mark.parametrize(
    ("env_id", "env", "want"),
    [
        ("cuda-h200-x2", {"precision": "bf16"}, ("cuda", "bf16")),
        ("plain", {}, ("plain", "fp32")),
        ("cpu-x", {"device_type": "mps", "precision": "fp16"}, ("mps", "fp16")),
        ("cpu-x", {"device_type": ""}, ("cpu", "fp32")),
    ],
)
def test_the_device_type_is_the_env_ids_first_part(env_id: str, env: dict, want: tuple) -> None:
    entry = Entry(Path("v1.json"), {"env_id": env_id, "provenance": {"env": env}})
    assert golden_env(entry) == want


def test_the_own_environment_is_skipped_not_the_end_of_the_search(tmp_path: Path) -> None:
    reg = make_registry(tmp_path / "registry")
    make_golden(reg, "a-own", config_hash="old")  # sorts first: the search goes on past it
    make_golden(reg, "b-cpu", config_hash="cfg1")
    c = choose(Registry(reg.root), "a-own", "cfg1", "cpu", "fp32")
    assert c is not None and (c.name, c.tier, c.cross_env) == ("b-cpu v1", "approx", True)
