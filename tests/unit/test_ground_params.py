"""params/ on the ground floor (issue #26): config identity pinned, one eval cadence, one loader of
params.yaml for trainer and gates, and the proc launcher's resolved run read back unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO
from contracts.validate import ValidationError
from params.cadence import eval_due, eval_steps
from params.config import RunConfig, load_params, load_thresholds
from params.identity import BOOKKEEPING, config_diff, config_identity

PARAMS = REPO / "params.yaml"
# The config_hash of the committed params.yaml per profile, at the vocabulary its tokenizer trains
# (tokenizer.vocab_size): the goldens and baselines in registry/ are keyed by these. A change here
# means every golden needs a bless: change the hash only on purpose.
PINNED = {"cpu": (2048, "774ca18212c4efaf"), "gpu": (8192, "33fa7f540ac5b9d8")}


@pytest.mark.parametrize("profile", sorted(PINNED))
def test_the_config_hash_of_params_yaml_is_pinned(profile: str) -> None:
    vocab, want = PINNED[profile]
    params = load_params(PARAMS, [f"profile={profile}"])
    assert params["tokenizer"]["vocab_size"] == vocab
    assert params.run_config(vocab).config_hash() == want
    # control: a value that changes the numbers changes the hash; bookkeeping does not
    assert load_params(PARAMS, [f"profile={profile}", "seed=7"]).run_config(vocab).config_hash() != want
    assert (
        load_params(PARAMS, [f"profile={profile}", "train.log_every=7"]).run_config(vocab).config_hash()
        == want
    )


def test_one_identity_for_the_trainer_the_recorder_and_the_gates() -> None:
    """RunConfig.config_hash, a record's config read back from JSON and a runrecord config are one
    function: the pinned hashes come out of the plain dict of the config too."""
    for profile, (vocab, want) in PINNED.items():
        run = load_params(PARAMS, [f"profile={profile}"]).run_config(vocab)
        record_config = json.loads(json.dumps(run.to_dict()))  # what metrics.json holds (bookkeeping in)
        assert config_identity(record_config) == run.config_hash() == want
        assert "log_every" in record_config["train"]


SCALARS = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=8),
)
KEYS = st.text(min_size=1, max_size=8).filter(lambda k: k not in BOOKKEEPING)


@given(
    seed=st.integers(0, 2**31),
    model=st.dictionaries(KEYS, SCALARS, max_size=5),
    train=st.dictionaries(KEYS, SCALARS, max_size=5),
    bookkeeping=st.dictionaries(st.sampled_from(BOOKKEEPING), st.integers(0, 1000)),
    key=KEYS,
)
def test_identity_ignores_bookkeeping_and_sees_every_other_key(seed, model, train, bookkeeping, key) -> None:
    config = {"seed": seed, "model": model, "train": train}
    h = config_identity(config)
    assert config_identity({**config, "train": {**train, **bookkeeping}}) == h
    assert config_identity(json.loads(json.dumps(config))) == h  # a record read back: the same identity
    # negative controls: a key that determines the numbers changes the identity, and config_diff names it
    changed = {**config, "train": {**train, key: ["changed", train.get(key)]}}
    assert config_identity(changed) != h
    assert f"train.{key} " in config_diff(config, changed)
    assert config_identity({**config, "seed": seed + 1}) != h


def old_eval_steps(every: int, steps: int) -> list[int]:
    """gates/reading/expect.py's rule before it moved here (the trainer's was xtrain/core/train.py eval_due)."""
    return [0, *(s for s in range(1, steps + 1) if s % every == 0 or s == steps)] if every else []


@pytest.mark.parametrize(("every", "steps"), [(0, 5), (1, 3), (4, 10), (5, 10), (7, 7), (30, 12)])
def test_one_eval_cadence(every: int, steps: int) -> None:
    """The steps the gates expect are exactly the steps the trainer evaluates at (step 0 included)."""
    train = {"eval_every": every, "steps": steps}
    assert eval_steps(train) == old_eval_steps(every, steps)
    assert eval_steps(train) == [s for s in range(steps + 1) if eval_due(every, steps, s)]


def test_the_cadence_check_catches_an_off_by_one() -> None:
    """Negative control: a rule that forgot the last step differs from the one in use."""
    forgot_last = [s for s in range(11) if s % 4 == 0]
    assert eval_steps({"eval_every": 4, "steps": 10}) != forgot_last


def test_thresholds_come_from_the_one_loader(tmp_path: Path) -> None:
    assert load_thresholds(PARAMS) == load_params(PARAMS).thresholds == load_params(PARAMS).raw["gates"]
    # control: the thresholds loader refuses what the params loader refuses, outside gates: too
    bad = tmp_path / "params.yaml"
    bad.write_text(PARAMS.read_text().replace("seed: 1337", "seed: x", 1))
    with pytest.raises(ValidationError):
        load_params(bad)
    with pytest.raises(ValidationError):
        load_thresholds(bad)


def test_the_resolved_run_reads_back_with_its_identity(tmp_path: Path) -> None:
    """The proc launcher stages its resolved run (xtrain/core/launch.py stage_launch); its workers read the
    same run, the same config_hash; a file whose run was edited is refused (negative control); after
    the tree the launch file goes, and an otherwise empty staging folder with it."""
    from contracts.outputs import LAUNCH_FILE
    from params.config import LaunchConfig
    from xtrain.core import rundir
    from xtrain.core.launch_plan import RunSpec, read_launch, stage_launch, unstage_launch

    run = load_params(PARAMS).run_config(2048)
    assert RunConfig.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    run_dir = str(tmp_path / "runs" / "proc")
    spec = RunSpec(run=run, tokens_path="t", launcher="proc", run_dir=run_dir, tokenizer_path="k")
    cfg = LaunchConfig(2, 2, 60.0, "ddp")
    path = stage_launch(spec, cfg)
    assert path == rundir.partial_dir(run_dir) / LAUNCH_FILE
    assert read_launch(path) == (cfg, spec, False)
    record = json.loads(path.read_text())
    record["run"]["train"]["lr"] *= 2
    path.write_text(json.dumps(record))
    with pytest.raises(ValidationError, match="config_hash"):
        read_launch(path)
    unstage_launch(path)
    assert not path.parent.exists()
