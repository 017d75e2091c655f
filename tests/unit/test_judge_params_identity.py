"""params/identity.py config_diff under mutation (docs/judge-mutation.md): the keys a gate names."""

from __future__ import annotations

import pytest

from params.identity import (
    COSMETIC,
    config_changes,
    config_diff,
    config_identity,
    describe_changes,
    is_cosmetic,
)


@pytest.mark.parametrize(
    ("a", "b", "line"),
    [
        ({"x": 1}, {"x": 1}, "the configs are equal: a hash was edited"),
        ({"t": {"g": 1}}, {"t": {"g": 2}}, "differing keys: t.g 2 vs 1"),
        ({}, {"x": None}, "differing keys: x None vs '<absent>'"),
        ({"x": None}, {}, "differing keys: x '<absent>' vs None"),
        ({}, {"x": "<absent>"}, "differing keys: x '<absent>' vs '<absent>'"),  # a value, not absence
        ({"x": 1, "y": 2}, {"x": 1, "y": 3}, "differing keys: y 3 vs 2"),
        (
            {"a": 1, "b": 1, "c": 1},
            {},
            "differing keys: a '<absent>' vs 1, b '<absent>' vs 1, c '<absent>' vs 1",
        ),
        (
            {"a": 1, "b": 1, "c": 1, "d": 1},
            {},
            "differing keys: a '<absent>' vs 1, b '<absent>' vs 1, c '<absent>' vs 1 and 1 more",
        ),
    ],
)
def test_config_diff_names_each_differing_key_b_then_a(a: dict, b: dict, line: str) -> None:
    assert config_diff(a, b) == line


def test_config_diff_limit_is_the_number_shown() -> None:
    a = {k: 1 for k in "abcde"}
    assert config_diff(a, {}, limit=1) == "differing keys: a '<absent>' vs 1 and 4 more"
    assert config_diff(a, {}, limit=5).endswith("e '<absent>' vs 1")


# ---- cosmetic keys: never blamed for what two runs did (gates/judges/ddp.py check_observed) ----------


@pytest.mark.parametrize(
    ("key", "extra", "cosmetic"),
    [
        ("out_dir", (), True),
        ("train.out_dir", (), True),  # the last part matches
        ("trainer.logging.log_interval", (), True),  # the last part, not all after the first dot
        ("data_dir", (), True),
        ("train.checkpoint_path", (), True),
        ("log_interval", (), True),
        ("train.log_every", (), True),
        ("ckpt_every", (), True),
        ("keep_checkpoints", (), True),
        ("always_save_checkpoint", (), True),
        ("wandb_project", (), True),
        ("mlflow_uri", (), True),
        ("tensorboard", (), True),
        ("run_name", (), True),
        ("eval_interval", (), False),  # eval cadence draws eval batches: it may change the training
        ("gradient_accumulation_steps", (), False),
        ("dir", (), False),  # *_dir needs the underscore
        ("out_dir_x", (), False),
        ("Out_Dir", (), False),  # case matters
        ("train.notes", ("notes",), True),
        ("train.notes", ("train.notes",), True),  # the whole key matches
        ("train.notes", ("train.*",), True),
        ("model.notes", ("train.notes",), False),
        ("notes", (), False),
    ],
)
def test_is_cosmetic_by_default_or_by_the_projects_patterns(key: str, extra: tuple, cosmetic: bool) -> None:
    assert is_cosmetic(key, extra) is cosmetic


def test_the_defaults_are_the_documented_ones() -> None:
    assert COSMETIC == (
        "out_dir", "*_dir", "*_path", "log_interval", "log_every", "ckpt_every", "keep_checkpoints",
        "always_save_checkpoint", "wandb_*", "mlflow_*", "tensorboard*", "run_name",
    )  # fmt: skip


def test_config_changes_lists_every_key_b_then_a() -> None:
    a = {"seed": 1, "train": {"out_dir": "x", "lr": 0.1}, "gone": 2}
    b = {"seed": 1, "train": {"out_dir": "y", "lr": 0.1}, "new": None}
    assert config_changes(a, b) == [
        ("gone", "<absent>", 2),
        ("new", None, "<absent>"),
        ("train.out_dir", "y", "x"),
    ]
    assert config_changes(a, a) == []
    assert (
        describe_changes(config_changes(a, b))
        == "gone '<absent>' vs 2, new None vs '<absent>', train.out_dir 'y' vs 'x'"
    )
    assert describe_changes([]) == ""


def test_cosmetic_keys_leave_the_identity_as_it_was() -> None:
    """Goldens are keyed by config_hash: only BOOKKEEPING leaves the identity; out_dir does not."""
    base = {"seed": 0, "model": {}, "train": {"steps": 2, "log_every": 1}}
    assert config_identity(base) == config_identity({**base, "train": {"steps": 2, "log_every": 9}})
    assert config_identity(base) != config_identity({**base, "out_dir": "x"})
