"""examples/hf-trainer as a DVC project of its own (issue #25): the cheap, torch-free parts.

The runs themselves are judged in tests/process/test_byo_trainer.py; here: the example's params.yaml is its
own (no section of our schema that it does not use), the gates and our data stages accept it, the
run record's config carries the shape the gates check, the example refuses a knob it cannot honour,
its dvc.yaml deps are its commands' import closures, and the gates read the dvc.lock of the project
they judge when it is a subdirectory of the git repository.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS, REPO
from contracts.validate import ValidationError
from gates.reading.dvclock import DvcLock
from params.cadence import eval_steps
from params.config import load_params
from params.identity import config_identity
from params.project import HARNESS_PARAMS, load_judging, load_sections

EXAMPLE = REPO / "examples" / "hf-trainer"


def hfconfig():
    spec = importlib.util.spec_from_file_location("hfconfig", EXAMPLE / "hfconfig.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_example_params_are_its_own() -> None:
    raw = yaml.safe_load((EXAMPLE / "params.yaml").read_text())
    # what its train.py, its stages and the gates read; nothing there because our schema requires it
    assert set(raw) == {"seed", "data", "tokenizer", "qwen3", "trainer", "torchrun", "reload", "gates"}
    params = load_judging(EXAMPLE / "params.yaml")
    assert not params.describes_runs  # runs are judged from their records
    assert set(raw["gates"]) == {"scope", "loss_match", "cross_rank"}
    assert params.thresholds["loss_match"] == raw["gates"]["loss_match"]  # its own, as written
    harness = load_params(HARNESS_PARAMS).thresholds
    assert params.thresholds["fresh_train"] == harness["fresh_train"]  # the rest: the harness's
    assert set(params.defaults) == set(harness) - set(raw["gates"])


def test_the_record_carries_the_shape_the_gates_check() -> None:
    hf = hfconfig()
    p = hf.load(EXAMPLE / "params.yaml")
    config = hf.record_config(p, 2048)
    assert config["train"]["steps"] == 24 and eval_steps(config["train"]) == [0, 8, 16, 24]
    assert config["model"]["vocab_size"] == 2048 and config["model"]["dim"] == 32
    changed = hf.load(EXAMPLE / "params.yaml")
    changed["trainer"]["grad_accum"] = 2  # negative control: a changed knob changes the identity
    assert config_identity(hf.record_config(changed, 2048)) != config_identity(config)


@pytest.mark.parametrize(
    ("section", "key", "value", "named"),
    [
        ("qwen3", "dropout", 0.1, "params.yaml: qwen3.dropout: unknown key"),  # Qwen3 has no residual dropout
        ("trainer", "steps", 2.5, "params.yaml: trainer.steps: 2.5 is not an integer"),
        ("trainer", "deterministic", "yes", "params.yaml: trainer.deterministic: 'yes' is not true or false"),
        ("torchrun", "world", None, "params.yaml: torchrun.world: None is not an integer"),
    ],
)
def test_a_knob_the_trainer_cannot_honour_is_refused(tmp_path: Path, section, key, value, named) -> None:
    hf = hfconfig()
    raw = yaml.safe_load((EXAMPLE / "params.yaml").read_text())
    raw[section][key] = value
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(hf.ParamsError) as e:
        hf.load(tmp_path / "params.yaml")
    assert str(e.value).startswith(f"error: {named}"), str(e.value)


def test_our_data_stages_read_only_their_sections_of_a_project_file(tmp_path: Path) -> None:
    own = load_sections(EXAMPLE / "params.yaml", [], ("data",))
    assert own.raw == {"data": yaml.safe_load((EXAMPLE / "params.yaml").read_text())["data"]}
    assert load_sections(EXAMPLE / "params.yaml", ["tokenizer.vocab_size=300"], ("tokenizer",))[
        "tokenizer"
    ] == {"vocab_size": 300, "min_frequency": 2}
    # our pipeline's params.yaml: all of it, exactly as load_params reads it
    assert load_sections(PARAMS, [], ("data",)).raw == load_params(PARAMS).raw
    # negative controls: one line naming the file and the key
    raw = yaml.safe_load((EXAMPLE / "params.yaml").read_text())
    raw["data"]["val_fraction"] = 0.9
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ValidationError, match=r"params\.yaml: data\.val_fraction: 0\.9 is invalid"):
        load_sections(tmp_path / "params.yaml", [], ("data",))
    raw["data"] = {**raw["data"], "val_fraction": 0.05, "source": "file"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ValidationError, match=r"params\.yaml: data\.path: data\.source is 'file'"):
        load_sections(tmp_path / "params.yaml", [], ("data",))
    with pytest.raises(ValidationError, match=r"qwen3: not read by this stage"):
        load_sections(EXAMPLE / "params.yaml", ["qwen3.dim=64"], ("tokenizer",))
    del raw["tokenizer"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ValidationError, match=r"params\.yaml: tokenizer: missing required key"):
        load_sections(tmp_path / "params.yaml", [], ("tokenizer",))


def test_the_example_dvc_yaml_deps_are_its_commands_import_closures() -> None:
    """The example declares its stages (params.yaml gates.scope) and each declares every file its command
    imports: our corpus and tokenizer stages (../../), train.py through runrecord, hfconfig.py through
    contracts (gates/reading/scope.py, the computation tests/process/test_dvc_deps.py holds our dvc.yaml to)."""
    from gates.reading.dvcyaml import pipeline_stages
    from gates.reading.scope import Sources, declared_stages, scope_problems

    declared = declared_stages(load_judging(EXAMPLE / "params.yaml").thresholds)
    assert declared == ["corpus", "tokenizer", "train_single", "train@proc", "md5", "reload"]
    definitions = pipeline_stages(EXAMPLE)
    assert scope_problems(definitions, declared, Sources(EXAMPLE)) == []
    train = Sources(EXAMPLE).required(definitions["train_single"].cmd)
    assert {"train.py", "hfconfig.py", "../../runrecord/hf.py", "../../contracts/yamlfile.py"} <= set(train)
    for name in ("md5", "reload"):  # the example's own modules, through its scripts
        assert "hfconfig.py" in definitions[name].deps


def test_the_required_deps_see_an_import_through_a_module_of_the_example() -> None:
    """Negative control for the deps check above: hfregistry.py reaches contracts/fileio.py through
    hfblessing.py and contracts/yamlfile.py through hfconfig.py; reload.py never imports hfblessing.py."""
    from gates.reading.scope import Sources

    sources = Sources(EXAMPLE)
    md5 = set(sources.required("python3 hfregistry.py check") or [])
    assert {"hfregistry.py", "hfblessing.py", "hfconfig.py"} <= md5
    assert {"../../contracts/fileio.py", "../../contracts/yamlfile.py"} <= md5
    reload = set(sources.required("python3 reload.py") or [])
    assert {"reload.py", "hfconfig.py"} <= reload and "hfblessing.py" not in reload


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_a_subdirectory_project_reads_its_own_committed_lock(tmp_path: Path) -> None:
    """HEAD:dvc.lock names the repository root's lock: its stages looked 'removed' from the example's."""
    sub = tmp_path / "examples" / "hf"
    sub.mkdir(parents=True)
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n  train@thread: {cmd: x}\n")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (sub / "dvc.lock").write_text("schema: '2.0'\nstages:\n  train@proc: {cmd: x}\n")
    (sub / "dvc.yaml").write_text("stages: {}\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert DvcLock.read(sub).committed == {"train@proc"}
    assert not DvcLock.read(sub).removed("train@thread")
    assert DvcLock.read(tmp_path).committed == {"train@thread"}
