"""registry/__main__.py under mutation (docs/judge-mutation.md): the CLI's commands, in-process.

tests/process/test_judge_registry_cli.py holds verify and bless of a version; this file the rest: which
folder a command may write into, the golden (its diff, each reason to bless again, the run alone),
pin, list, the parser's defaults, bless's dispatch and main() over each command, on registries
built in a tmp folder (tests/judge_trees.py) with hand-written run records. Each asserts the exit
code, the files written, the printed text and the one-line error exactly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from test_judge_registry_baselines import record, write_runs

from conftest import REPO
from contracts.errors import ValidationError
from contracts.fileio import md5_file
from contracts.outputs import OutputRefused
from judge_trees import PINNED_FILES, bless, make_registry, write_export, write_weights
from registry import __main__ as cli
from registry.checks import NAME_RULE
from registry.sealed import seal
from registry.store import ROOT, Registry, RegistryError, write_once

ENV = "cpu-test-env"


@pytest.fixture()
def reg(tmp_path: Path) -> Registry:
    return make_registry(tmp_path / "registry")


def params_file(tmp_path: Path, model: str = "tiny") -> str:
    """The repository's params.yaml with export.pinned_model set to `model`."""
    text = (REPO / "params.yaml").read_text().replace("pinned_model: xtrain-tiny", f"pinned_model: {model}")
    (tmp_path / "params.yaml").write_text(text)
    return str(tmp_path / "params.yaml")


# -- check_root -------------------------------------------------------------------------------------


NOT_A_REGISTRY = (
    "not a registry (none of index.json, models, pinned, goldens, baselines there); "
    "next: name the registry folder with --root (default: the registry package)"
)


@pytest.mark.parametrize("part", cli.REGISTRY_PARTS)
def test_a_folder_holding_any_registry_part_is_a_registry(tmp_path: Path, part: str) -> None:
    (tmp_path / "other.txt").write_text("x")
    (tmp_path / part).mkdir()
    assert cli.check_root(Registry(tmp_path)) is None


def test_an_absent_or_empty_folder_is_a_new_registry(tmp_path: Path) -> None:
    assert cli.check_root(Registry(tmp_path / "absent")) is None
    (tmp_path / "empty").mkdir()
    assert cli.check_root(Registry(tmp_path / "empty")) is None
    assert cli.REGISTRY_PARTS == ("index.json", "models", "pinned", "goldens", "baselines")


def test_any_other_folder_a_file_or_a_link_is_refused(tmp_path: Path, reg: Registry) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "code.py").write_text("x")
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(reg.root)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name in ("src", "file", "link", "dangling"):
        with pytest.raises(RegistryError) as e:
            cli.check_root(Registry(tmp_path / name))
        assert str(e.value) == f"{tmp_path / name}: {NOT_A_REGISTRY}"


# -- default_model, golden_export, golden_registry --------------------------------------------------


def test_the_default_model_is_the_params_pinned_model(tmp_path: Path, monkeypatch) -> None:
    assert cli.default_model(params_file(tmp_path, "my-model")) == "my-model"
    import params.config

    # params.schema.json refuses such a name first; the registry checks it again (its own rule)
    monkeypatch.setattr(params.config, "load_params", lambda path: {"export": {"pinned_model": f"{path}/x"}})
    with pytest.raises(ValidationError) as e:
        cli.default_model("p.yaml")
    assert (
        str(e.value)
        == f"p.yaml: export.pinned_model: 'p.yaml/x' is not a valid registry name (rule: {NAME_RULE})"
    )


def ns(**kw) -> argparse.Namespace:
    base = {"root": None, "params": "params.yaml", "export": None, "model": None, "reason": None, "perf": False,
            "golden": False, "metrics": "runs/single/metrics.json", "runs": "runs", "tier": None}  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def test_the_export_a_golden_records(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.golden_export(ns()) is None
    (tmp_path / "exports" / "fresh").mkdir(parents=True)
    assert cli.golden_export(ns()) == Path("exports/fresh")
    assert cli.golden_export(ns(export="elsewhere")) == Path("elsewhere")


def test_the_registry_a_golden_goes_to(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.golden_registry(ns()).root == ROOT
    (tmp_path / "dvc.yaml").mkdir()  # only a file marks a project
    assert cli.golden_registry(ns()).root == ROOT
    (tmp_path / "dvc.yaml").rmdir()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    assert cli.golden_registry(ns()).root == Path("registry")
    assert cli.golden_registry(ns(root=str(tmp_path / "r"))).root == tmp_path / "r"


# -- verify (what tests/process/test_judge_registry_cli.py leaves) ------------------------------------------


@pytest.fixture()
def blessed(reg: Registry, tmp_path: Path) -> tuple[Registry, Path]:
    """An export blessed as v1, then changed and blessed as v2 (fp32)."""
    export = tmp_path / "export"
    md5 = reg.pin("tiny")["model_md5"]
    manifest = write_export(export, source_md5=md5)
    bless(reg, "tiny", {n: f["md5"] for n, f in manifest["files"].items()}, "fp32", md5)
    manifest = write_export(export, source_md5=md5, salt=" two")
    bless(reg, "tiny", {n: f["md5"] for n, f in manifest["files"].items()}, "fp32", md5)
    return Registry(reg.root), export


def test_verify_compares_with_the_version_asked_for(blessed) -> None:
    reg, export = blessed
    assert (cli.verify(reg, export, "tiny", None)["version"], cli.verify(reg, export, "tiny", None)["passed"]) == (
        2, True)  # fmt: skip
    old = cli.verify(reg, export, "tiny", 1)
    assert (old["version"], old["passed"]) == (1, False)
    with pytest.raises(ValidationError) as e:
        cli.verify(reg, export, "Bad", None)
    assert str(e.value) == f"--model: model: 'Bad' is not a valid registry name (rule: {NAME_RULE})"


def test_the_verify_table_marks_absent_md5s_and_each_verdict(tmp_path: Path, capsys) -> None:
    report = {"model": "tiny", "version": 3, "dtype": "bf16", "passed": False,
              "files": [{"name": "a", "expected": None, "actual": "1" * 32, "ok": False},
                        {"name": "b", "expected": "2" * 32, "actual": None, "ok": False},
                        {"name": "c", "expected": "3" * 32, "actual": "3" * 32, "ok": True}],
              "source_checkpoint": {"expected": "4" * 32, "actual": "5" * 32, "ok": False}}  # fmt: skip
    cli.print_verify(report, tmp_path)
    dash = "-" + " " * 33
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path} vs registry tiny v3 (bf16):",
        f"  {'file':<24} {'expected md5':<34} {'actual md5':<34} ok",
        f"  {'a':<24} {dash} {'1' * 32}   NO",
        f"  {'b':<24} {'2' * 32}   {dash} NO",
        f"  {'c':<24} {'3' * 32}   {'3' * 32}   yes",
        f"  {'(source checkpoint)':<24} {'4' * 32}   {'5' * 32}   NO",
        "FAIL: the export differs from the blessed version",
    ]
    report["source_checkpoint"]["ok"] = report["passed"] = True
    cli.print_verify(report, tmp_path)
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [f"  {'(source checkpoint)':<24} {'4' * 32}   {'5' * 32}   yes", "PASS"]


def vargs(**kw) -> argparse.Namespace:
    base = {"export_dir": "exports/pinned", "model": None, "version": None, "report": None, "no_fail": False,
            "params": "params.yaml"}  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


def test_verify_command_reads_the_model_and_version_asked_for(blessed, tmp_path: Path, capsys) -> None:
    reg, export = blessed
    params = params_file(tmp_path)
    assert cli.verify_command(reg, vargs(export_dir=str(export), params=params)) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{export} vs registry tiny v2 (fp32):"
    assert cli.verify_command(reg, vargs(export_dir=str(export), params=params, version=1)) == 1
    out = capsys.readouterr().out.splitlines()
    assert (out[0], out[-1]) == (
        f"{export} vs registry tiny v1 (fp32):",
        "FAIL: the export differs from the blessed version",
    )


def test_verify_never_writes_its_report_over_another_file(blessed, tmp_path: Path) -> None:
    reg, export = blessed
    other = tmp_path / "notes.json"
    other.write_text('{"mine": 1}\n')
    with pytest.raises(OutputRefused) as e:
        cli.verify_command(reg, vargs(export_dir=str(export), model="tiny", report=str(other)))
    assert "the file there is not a previous registry check" in str(e.value)
    assert other.read_text() == '{"mine": 1}\n'


# -- the golden -------------------------------------------------------------------------------------


def write_run(tmp_path: Path, env_id: str = ENV, **kw) -> Path:
    m = record("single", env_id=env_id)
    m.update(train_loss=[4.0, 3.5, 3.0, 2.5], grad_norm=[1.0, 2.0, 3.0, 4.0], lr=[0.1] * 4, steps=4,
             eval=[{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.5}, {"step": 4, "loss": 2.0}])  # fmt: skip
    m.update(kw)
    return write_runs(tmp_path, single=m) / "single" / "metrics.json"


def series(values: dict) -> dict:
    steps = sorted(values)
    return {"start_step": steps[0], "end_step": steps[-1], "step_interval": steps[1] - steps[0] if len(steps) > 1 else 1,
            "values": {str(s): values[s] for s in steps}}  # fmt: skip


def test_a_first_golden_with_its_export(reg: Registry, tmp_path: Path, capsys) -> None:
    run = write_run(tmp_path)
    manifest = write_export(tmp_path / "export")
    params = params_file(tmp_path)
    assert cli.bless_golden(reg, run, tmp_path / "export", None, "the first golden here", params) == 0
    path = reg.root / "goldens" / ENV / "v1.json"
    assert capsys.readouterr().out == f"blessed golden {path} (exact tier)\n"
    data = json.loads(path.read_text())
    assert data == seal({
        "format": "xtrain-golden/1", "env_id": ENV, "version": 1, "tier": "exact", "config_hash": "cfg12345",
        "metrics": {"train_loss": series({0: 4.0, 1: 3.5, 2: 3.0, 3: 2.5}), "val_loss": series({0: 4.5, 2: 3.5, 4: 2.0}),
                    "grad_norm": series({0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0})},
        "export": {"dtype": "fp32", "files": {n: f["md5"] for n, f in manifest["files"].items()}},
        "run": {"param_digest": "d" * 64}, "provenance": data["provenance"], "reason": "the first golden here",
    })  # fmt: skip
    assert data["provenance"]["env"] == record("single")["env"]
    assert data["provenance"]["params_hash"] == hashlib.sha256(Path(params).read_bytes()).hexdigest()[:16]
    assert Registry(reg.root).golden(ENV).version == 1  # indexed: a new reader accepts it


def test_a_golden_of_the_run_alone_and_its_tier(reg: Registry, tmp_path: Path, capsys) -> None:
    run = write_run(tmp_path, device="cuda")
    assert cli.bless_golden(reg, run, None, None, "a run without export", params_file(tmp_path)) == 0
    path = reg.root / "goldens" / ENV / "v1.json"
    assert capsys.readouterr().out == f"blessed golden {path} (approx tier, the run alone: no export)\n"
    data = json.loads(path.read_text())
    assert "export" not in data and data["tier"] == "approx"
    assert cli.bless_golden(reg, run, None, "exact", "the exact tier asked", params_file(tmp_path)) == 0
    assert json.loads((path.parent / "v2.json").read_text())["tier"] == "exact"


def test_a_golden_env_id_must_be_a_registry_name(reg: Registry, tmp_path: Path, monkeypatch) -> None:
    run = write_run(tmp_path, env_id="../escape")
    # metrics.schema.json refuses such an env_id first; the registry checks it again (its own rule)
    monkeypatch.setattr(cli.artifact_table, "read", lambda kind, path: json.loads(Path(path).read_text()))
    with pytest.raises(ValidationError) as e:
        cli.bless_golden(reg, run, None, None, "an escaping golden", params_file(tmp_path))
    assert str(e.value) == f"{run}: env.env_id: '../escape' is not a valid registry name (rule: {NAME_RULE})"
    assert not (reg.root / "goldens").exists()


def test_an_export_edited_since_its_manifest_is_refused(reg: Registry, tmp_path: Path) -> None:
    write_export(tmp_path / "export")
    (tmp_path / "export" / "config.json").write_text("edited\n")
    with pytest.raises(Exception, match=r"config\.json"):
        cli.bless_golden(
            reg, write_run(tmp_path), tmp_path / "export", None, "an edited export", "params.yaml"
        )
    assert not (reg.root / "goldens").exists()


@pytest.mark.parametrize(
    ("change", "key", "value"),
    [
        ({"train_loss": [4.0, float("nan"), 3.0, 2.5]}, "train_loss[1]", "nan"),
        ({"eval": [{"step": 0, "loss": 4.5}, {"step": 2, "loss": 3.5}, {"step": 4, "loss": float("inf")}]},
         "eval[2].loss", "inf"),
        ({"grad_norm": [1.0, 2.0, 3.0, -float("inf")]}, "grad_norm[3]", "-inf"),
        ({"tokens_per_s": float("nan")}, "tokens_per_s", "nan"),  # anywhere: the gates refuse it too
    ],
)  # fmt: skip
def test_a_golden_of_a_non_finite_run_is_refused_before_anything_is_written(
    reg: Registry, tmp_path: Path, change: dict, key: str, value: str
) -> None:
    """A NaN loss blessed with exit 0 was a golden never to be taken back: every later check failed."""
    run = write_run(tmp_path, **change)
    before = sorted(p.relative_to(reg.root) for p in reg.root.rglob("*"))
    with pytest.raises(ValidationError) as e:
        cli.bless_golden(reg, run, None, None, "a golden of a diverged run", "params.yaml")
    assert str(e.value) == (
        f"{run}: {key}: {value} is not a finite number: the gates fail this run, and a blessing is never "
        "taken back (rule: a finite run record); next: fix the run and re-run it (dvc repro), then bless"
    )
    assert e.value.exit_code == 2
    assert sorted(p.relative_to(reg.root) for p in reg.root.rglob("*")) == before


@pytest.fixture()
def golden(reg: Registry, tmp_path: Path, capsys) -> tuple[Registry, Path]:
    write_export(tmp_path / "export")
    cli.bless_golden(
        reg, write_run(tmp_path), tmp_path / "export", None, "the first golden here", "params.yaml"
    )
    capsys.readouterr()
    return Registry(reg.root), tmp_path


def diff(rel: str, n: int, export: str = "unchanged", digest: str = "unchanged", cfg: str = "cfg12345",
         tier: str = "exact") -> str:  # fmt: skip
    return (f"diff from {ENV} v1: train loss max rel {rel} over {n} steps, export md5 {export}, parameter digest "
            f"{digest}, config_hash cfg12345 -> {cfg}, tier exact -> {tier}")  # fmt: skip


def test_the_same_golden_again_is_not_blessed(golden, capsys) -> None:
    reg, tmp = golden
    assert (
        cli.bless_golden(reg, tmp / "runs/single/metrics.json", tmp / "export", None, "again", "params.yaml")
        == 0
    )
    assert capsys.readouterr().out == f"golden for {ENV} is identical to v1: nothing to bless\n"
    assert sorted(p.name for p in (reg.root / "goldens" / ENV).iterdir()) == ["v1.json"]


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"train_loss": [4.0, 3.5, 3.0, 2.0]}, diff("0.2", 4)),
        ({"train_loss": [4.0, 3.5, 3.0, 2.0, 1.5]}, diff("0.2", 4)),  # a longer run: the common steps
        ({"train_loss": [4.0, 3.5, 3.1]}, diff("0.0333", 3)),
        ({"param_digest": "e" * 64}, diff("0", 4, digest="changed")),
        ({"config_hash": "cfg99999"}, diff("0", 4, cfg="cfg99999")),
        ({"device": "cuda"}, diff("0", 4, tier="approx")),
    ],
)
def test_each_change_blesses_the_next_golden_with_its_diff(
    golden, capsys, change: dict, expected: str
) -> None:
    reg, tmp = golden
    run = write_run(tmp, **change)
    assert cli.bless_golden(reg, run, tmp / "export", None, "a change on purpose", "params.yaml") == 0
    v2 = reg.root / "goldens" / ENV / "v2.json"
    assert capsys.readouterr().out.splitlines() == [
        expected,
        f"blessed golden {v2} ({json.loads(v2.read_text())['tier']} tier)",
    ]
    assert json.loads(v2.read_text())["version"] == 2


def test_a_changed_export_or_none_blesses_the_next_golden(golden, capsys) -> None:
    reg, tmp = golden
    write_export(tmp / "export", salt=" new")
    run = tmp / "runs/single/metrics.json"
    assert cli.bless_golden(reg, run, tmp / "export", None, "a new export", "params.yaml") == 0
    assert capsys.readouterr().out.splitlines()[0] == diff("0", 4, export="changed")
    assert cli.bless_golden(Registry(reg.root), run, None, None, "the run alone now", "params.yaml") == 0
    assert capsys.readouterr().out.splitlines()[0] == diff("0", 4, export="changed").replace(" v1:", " v2:")


def test_a_last_golden_without_a_run_digest_is_the_same_run(golden, capsys) -> None:
    reg, _ = golden
    last = reg.golden(ENV).data
    assert cli._same_golden({k: v for k, v in last.items() if k != "run"}, last, ENV) is True
    assert capsys.readouterr().out == f"golden for {ENV} is identical to v1: nothing to bless\n"
    assert cli._same_golden(last, {**last, "run": {"param_digest": "f" * 64}}, ENV) is False
    assert "parameter digest changed" in capsys.readouterr().out


# -- pin --------------------------------------------------------------------------------------------


def checkpoint(folder: Path) -> Path:
    folder.mkdir(parents=True)
    write_weights(folder / "model.safetensors", 2.0)
    (folder / "state.json").write_text(json.dumps({"model_md5": md5_file(folder / "model.safetensors")}))
    (folder / "tokenizer.json").write_text("{}")
    (folder / "optimizer.safetensors").write_text("not copied")
    return folder


def test_pin_copies_the_checkpoint_seals_and_indexes_it(reg: Registry, tmp_path: Path, capsys) -> None:
    ckpt = checkpoint(tmp_path / "ckpt")
    assert cli.pin_checkpoint(reg, ckpt, "new-model", "a new reference") == 0
    dest = reg.root / "pinned" / "new-model"
    md5 = md5_file(ckpt / "model.safetensors")
    assert capsys.readouterr().out == f"pinned {ckpt} as {dest} (model md5 {md5})\n"
    assert sorted(p.name for p in dest.iterdir()) == [
        "model.safetensors",
        "pin.json",
        "state.json",
        "tokenizer.json",
    ]
    pin = Registry(reg.root).pin("new-model")  # a new reader: the four files are indexed
    assert {k: pin[k] for k in ("format", "model", "model_md5", "state_md5", "tokenizer_md5", "reason")} == {
        "format": "xtrain-registry-pin/1", "model": "new-model", "model_md5": md5,
        "state_md5": md5_file(ckpt / "state.json"), "tokenizer_md5": md5_file(ckpt / "tokenizer.json"),
        "reason": "a new reference"}  # fmt: skip
    assert Registry(reg.root).verify_index() == 2 * (len(PINNED_FILES) + 1)


def test_a_pin_is_never_replaced_nor_named_badly(reg: Registry, tmp_path: Path) -> None:
    ckpt = checkpoint(tmp_path / "ckpt")
    before = (reg.root / "pinned" / "tiny" / "pin.json").read_bytes()
    with pytest.raises(RegistryError) as e:
        cli.pin_checkpoint(reg, ckpt, "tiny", "replace it")
    assert str(e.value) == (
        f"{reg.root / 'pinned' / 'tiny'} exists: a pinned checkpoint is never replaced; pin under a new model name"
    )
    assert (reg.root / "pinned" / "tiny" / "pin.json").read_bytes() == before
    with pytest.raises(ValidationError) as e:
        cli.pin_checkpoint(reg, ckpt, "New", "a bad name")
    assert str(e.value) == f"--model: model: 'New' is not a valid registry name (rule: {NAME_RULE})"


def test_a_damaged_checkpoint_is_never_pinned(reg: Registry, tmp_path: Path) -> None:
    ckpt = checkpoint(tmp_path / "ckpt")
    write_weights(ckpt / "model.safetensors", 3.0)  # no longer what state.json recorded
    with pytest.raises(ValidationError, match=r"differs from the \w+ state\.json recorded"):
        cli.pin_checkpoint(reg, ckpt, "new-model", "a damaged checkpoint")
    assert not (reg.root / "pinned" / "new-model").exists()


# -- list -------------------------------------------------------------------------------------------


def test_list_shows_versions_goldens_and_baselines(golden, capsys) -> None:
    reg, tmp = golden
    from registry.baselines import bless_baseline

    runs = write_runs(tmp / "b", single=record("single"), thread=record("thread", peaks=(1, 2)))
    bless_baseline(reg, runs, "perf numbers here", "params.yaml")
    md5 = reg.pin("tiny")["model_md5"]
    bless(reg, "tiny", {"config.json": "9" * 32}, "bf16", md5)  # no model.safetensors: a dash
    capsys.readouterr()
    assert cli.list_all(Registry(reg.root)) == 0
    fresh = Registry(reg.root)
    v1, g1, b1 = fresh.versions("tiny")[0].data, fresh.golden(ENV).data, fresh.baseline(ENV).data
    assert capsys.readouterr().out.splitlines() == [
        "model tiny",
        f"  v1  bf16  model.safetensors -  {v1['provenance']['time_utc']}  a version for the judge tests",
        f"golden {ENV}",
        f"  v1  exact  4 steps  {g1['provenance']['time_utc']}  the first golden here",
        f"perf baseline {ENV}",
        f"  v1  single, thread  {b1['provenance']['time_utc']}  perf numbers here",
    ]


def test_list_escapes_what_a_blessing_wrote(reg: Registry, tmp_path: Path, capsys) -> None:
    """A reason with a newline printed a forged `v9` line; an ANSI escape recoloured the terminal."""
    md5 = reg.pin("tiny")["model_md5"]
    bless(reg, "tiny", {"model.safetensors": "9" * 32}, "fp32", md5)
    path = reg.root / "models" / "tiny" / "v1.json"
    data = json.loads(path.read_text())
    data = {k: v for k, v in data.items() if k != "content_sha256"}
    data["reason"] = "fine\n  v9  fp32  model.safetensors 0000  2026-01-01  \x1b[31mforged"
    data["dtype"] = "fp32"
    path.unlink()
    from registry import index

    (reg.root / "index.json").unlink()
    write_once(path, seal(data))
    index.create(reg.root)
    capsys.readouterr()
    assert cli.list_all(Registry(reg.root)) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].endswith(
        "  fine\\n  v9  fp32  model.safetensors 0000  2026-01-01  \\x1b[31mforged"
    )
    assert len(out.splitlines()) == 2 and "\x1b" not in out


def test_verify_and_the_version_diff_escape_file_names(tmp_path: Path, capsys) -> None:
    report = {
        "model": "tiny", "version": 1, "dtype": "fp32", "passed": False,
        "files": [{"name": "a\nb\x1b[2J", "expected": "e\n", "actual": None, "ok": False}],
        "source_checkpoint": {"expected": "s", "actual": "s", "ok": True},
    }  # fmt: skip
    cli.print_verify(report, tmp_path / "exp\nort")
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{tmp_path}/exp\\nort vs registry tiny v1 (fp32):"
    assert out.splitlines()[2].split() == ["a\\nb\\x1b[2J", "e\\n", "-", "NO"]
    assert len(out.splitlines()) == 5


# -- the parser, bless's dispatch, main -------------------------------------------------------------


def test_the_parsers_defaults(tmp_path: Path) -> None:
    p = cli.parser()
    v = p.parse_args(["verify"])
    assert (v.cmd, v.root, v.export_dir, v.model, v.version, v.report, v.no_fail) == (
        "verify", None, "exports/pinned", None, None, None, False)  # fmt: skip
    v = p.parse_args(["--root", "r", "verify", "e", "--model", "m", "--version", "3", "--no-fail"])
    assert (v.root, v.export_dir, v.model, v.version, v.no_fail) == ("r", "e", "m", 3, True)
    b = p.parse_args(["bless"])
    assert (b.reason, b.model, b.export, b.golden, b.metrics, b.perf, b.runs, b.tier) == (
        None, None, None, False, "runs/single/metrics.json", False, "runs", None)  # fmt: skip
    assert p.parse_args(["bless", "--golden", "--perf", "--tier", "approx"]).tier == "approx"
    assert p.parse_args(["bless", "--tier", "exact"]).tier == "exact"
    pin = p.parse_args(["pin", "ckpt", "--model", "m"])
    assert (pin.checkpoint, pin.model, pin.reason) == ("ckpt", "m", None)
    assert p.parse_args(["list"]).cmd == "list" and p.parse_args(["index"]).cmd == "index"
    assert p.parse_args(["validate"]).params == "params.yaml"
    for bad in ([], ["pin", "ckpt"], ["bless", "--tier", "loose"], ["nothing"]):
        with pytest.raises(SystemExit) as e:
            p.parse_args(bad)
        assert e.value.code == 2
    assert p.prog == "python -m registry" and p.description == cli.__doc__


def helps(p: argparse.ArgumentParser) -> dict[str, str | None]:
    return {a.option_strings[-1] if a.option_strings else a.dest: a.help for a in p._actions}


def test_the_help_of_each_option_and_the_usage_text(capsys) -> None:
    p = cli.parser()
    subs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    assert helps(p)["--root"] == "registry folder (default: the registry package)"
    assert [(c.dest, c.help) for c in subs._choices_actions] == [
        ("index", "write registry/index.json for a registry that has none")]  # fmt: skip
    verify = helps(subs.choices["verify"])
    assert (verify["--report"], verify["--no-fail"]) == (
        "also write the result as JSON", "exit 0 on a mismatch (record only; the gates decide)")  # fmt: skip
    bless = helps(subs.choices["bless"])
    assert {k: bless[k] for k in ("--export", "--golden", "--perf", "--runs", "--tier")} == {
        "--export": "default: exports/pinned (version) or exports/fresh (golden)",
        "--golden": "bless this environment's golden from a fresh run",
        "--perf": "bless this environment's perf baseline from --runs",
        "--runs": "--perf: folder of the training stages' run folders",
        "--tier": "golden tier (default: exact on cpu)",
    }
    report = next(a for a in subs.choices["verify"]._actions if "--report" in a.option_strings)
    assert report.xtrain_output is cli.CHECK_REPORT  # the output guard knows what --report writes
    with pytest.raises(SystemExit):
        p.parse_args(["--help"])
    assert "\n    python -m registry list\n" in capsys.readouterr().out  # the usage block kept as written
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--set", "seed=2", "list"])  # registry commands take no params overrides
    assert e.value.code == 2
    capsys.readouterr()


def test_bless_dispatches_a_version_from_its_defaults(blessed, tmp_path: Path, monkeypatch, capsys) -> None:
    reg, export = blessed
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exports").mkdir()
    shutil.copytree(export, tmp_path / "exports" / "pinned")
    assert cli.bless(reg, ns(reason="  the same export  ", params=params_file(tmp_path))) == 0
    assert (
        capsys.readouterr().out
        == f"{Path('exports/pinned')} is identical to tiny v2 (fp32): nothing to bless\n"
    )
    write_export(tmp_path / "other", source_md5=reg.pin("tiny")["model_md5"], salt=" three")
    assert cli.bless(reg, ns(reason="a third export", export=str(tmp_path / "other"), model="tiny")) == 0
    v3 = Registry(reg.root).version("tiny", "fp32")
    assert (v3.version, v3.data["reason"]) == (3, "a third export")
    with pytest.raises(RegistryError, match="bless needs --reason"):
        cli.bless(reg, ns(reason="short", perf=True))


def test_bless_dispatches_perf_and_golden(reg: Registry, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path)
    assert cli.bless(reg, ns(reason="  perf numbers here ", perf=True, golden=True)) == 0
    assert Registry(reg.root).baseline(ENV).data["reason"] == "perf numbers here"
    assert not (reg.root / "goldens").exists()
    assert cli.bless(reg, ns(reason="  a golden of the run ", golden=True, tier="approx")) == 0
    g = Registry(reg.root).golden(ENV).data
    assert (g["reason"], g["tier"], "export" in g) == ("a golden of the run", "approx", False)
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"blessed golden {reg.root / 'goldens' / ENV / 'v1.json'} (approx tier, the run alone: no export)"
    )


def test_main_runs_each_command_and_turns_errors_into_one_line(reg: Registry, tmp_path: Path, capsys) -> None:
    root = str(reg.root)
    assert cli.main(["--root", root, "list"]) == 0
    assert capsys.readouterr().out == ""  # a pin alone lists nothing
    assert cli.main(["--root", root, "validate"]) == 0
    assert capsys.readouterr().out == "registry: 4 files valid, 4 indexed\n"
    ckpt = checkpoint(tmp_path / "ckpt")
    assert (
        cli.main(["--root", root, "pin", str(ckpt), "--model", "second", "--reason", "a second model"]) == 0
    )
    assert capsys.readouterr().out.startswith(f"pinned {ckpt} as {reg.root / 'pinned' / 'second'}")
    assert cli.main(["--root", root, "pin", str(ckpt), "--model", "third", "--reason", "short"]) == 2
    assert capsys.readouterr().err.startswith("error: bless needs --reason with at least 10 characters")
    assert not (reg.root / "pinned" / "third").exists()
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("x")
    for cmd in (
        ["index"],
        ["bless", "--reason", "a reason here"],
        ["pin", str(ckpt), "--model", "m", "--reason", "a reason here"],
    ):
        assert cli.main(["--root", str(tmp_path / "plain"), *cmd]) == 2
        assert capsys.readouterr().err == f"error: {tmp_path / 'plain'}: {NOT_A_REGISTRY}\n"
    assert sorted(os.listdir(tmp_path / "plain")) == ["x.txt"]


def test_main_blesses_a_golden_into_the_projects_registry(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    write_run(tmp_path)
    assert cli.main(["bless", "--golden", "--reason", "the project's golden"]) == 0
    path = Path("registry") / "goldens" / ENV / "v1.json"
    assert capsys.readouterr().out == f"blessed golden {path} (exact tier, the run alone: no export)\n"
    assert Registry(tmp_path / "registry").golden(ENV).version == 1
    assert cli.main(["--root", str(tmp_path / "registry"), "verify", "--model", "tiny"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_series_interval_is_the_smallest_step_gap() -> None:
    assert cli.series({2: 1.0, 4: 2.0})["step_interval"] == 2
    assert cli.series({5: 1.0, 6: 2.0, 9: 3.0})["step_interval"] == 1
    assert cli.series({7: 1.0}) == {"start_step": 7, "end_step": 7, "step_interval": 1, "values": {"7": 1.0}}


def test_bless_version_names_a_bad_model_and_an_entry_its_schema_refuses(blessed, tmp_path: Path) -> None:
    reg, export = blessed
    with pytest.raises(ValidationError) as e:
        cli.bless_version(reg, export, "Bad", "a reason here", "params.yaml")
    assert str(e.value) == f"--model: model: 'Bad' is not a valid registry name (rule: {NAME_RULE})"
    write_export(export, source_md5=reg.pin("tiny")["model_md5"], salt=" three")
    v3 = reg.root / "models" / "tiny" / "v3.json"
    with pytest.raises(ValidationError) as e:
        cli.bless_version(reg, export, "tiny", "too short", "params.yaml")  # the CLI asks 10 characters first
    assert str(e.value) == f'{v3}: reason: "too short" is invalid (rule: minLength 10)'
    assert not v3.exists()


def test_the_version_diff_names_a_file_added_and_one_removed(blessed, capsys) -> None:
    reg, export = blessed
    (export / "extra.txt").write_text("x\n")
    manifest = json.loads((export / "manifest.json").read_text())
    manifest["files"]["extra.txt"] = {"md5": md5_file(export / "extra.txt"), "bytes": 2}
    (export / "manifest.json").write_text(json.dumps(manifest))
    assert cli.bless_version(reg, export, "tiny", "a file added to the export", "params.yaml") == 0
    assert capsys.readouterr().out.splitlines() == [
        "diff from tiny v2:",
        f"  extra.txt: (absent) -> {md5_file(export / 'extra.txt')}",
        f"blessed {reg.root / 'models' / 'tiny' / 'v3.json'}",
    ]
    added = md5_file(export / "extra.txt")
    (export / "extra.txt").unlink()
    del manifest["files"]["extra.txt"]
    (export / "manifest.json").write_text(json.dumps(manifest))
    assert cli.bless_version(reg, export, "tiny", "the file removed again", "params.yaml") == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "diff from tiny v3:",
        f"  extra.txt: {added} -> (absent)",
    ]


def test_a_golden_or_pin_its_schema_refuses_names_the_file_never_written(
    reg: Registry, tmp_path: Path
) -> None:
    run = write_run(tmp_path)
    with pytest.raises(ValidationError) as e:
        cli.bless_golden(reg, run, None, None, "too short", "params.yaml")
    assert (
        str(e.value)
        == f'{reg.root / "goldens" / ENV / "v1.json"}: reason: "too short" is invalid (rule: minLength 10)'
    )
    assert not (reg.root / "goldens").exists()
    with pytest.raises(ValidationError) as e:
        cli.pin_checkpoint(reg, checkpoint(tmp_path / "ckpt"), "new-model", "too short")
    dest = reg.root / "pinned" / "new-model"
    assert str(e.value) == f'{dest / "pin.json"}: reason: "too short" is invalid (rule: minLength 10)'
    assert not dest.exists()


def test_bless_golden_records_the_export_asked_for(reg: Registry, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path)
    manifest = write_export(tmp_path / "mine")
    assert (
        cli.bless(reg, ns(reason="a golden with its export", golden=True, export=str(tmp_path / "mine"))) == 0
    )
    g = Registry(reg.root).golden(ENV).data
    assert g["export"] == {"dtype": "fp32", "files": {n: f["md5"] for n, f in manifest["files"].items()}}
