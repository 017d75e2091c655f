"""The artifact contract: one folder of schemas, and writers that refuse an invalid record, naming the key."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import REPO, TinyData, tiny_spec
from contracts import artifact_table
from contracts.validate import ValidationError, load_schema


@pytest.fixture(scope="module")
def run_dir(tiny_data: TinyData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from xtrain.core.launch import run_single

    out = tmp_path_factory.mktemp("contract") / "single"
    run_single(tiny_spec(tiny_data, run_dir=out))
    return out


def test_every_schema_lives_in_contracts() -> None:
    stray = [
        p for pkg in ("xtrain", "gates", "registry", "pipeline") for p in (REPO / pkg).rglob("*.schema.json")
    ]
    assert not stray, f"schemas outside contracts/schemas: {stray}"
    on_disk = {p.name for p in (REPO / "contracts" / "schemas").glob("*.schema.json")}
    assert {a.schema for a in artifact_table.TABLE.values()} <= on_disk


@pytest.mark.parametrize("kind", sorted(artifact_table.TABLE))
def test_format_tag_is_the_schemas(kind: str) -> None:
    a = artifact_table.TABLE[kind]
    fmt = load_schema(a.schema)["properties"].get("format", {})
    # the writer's tag; a schema that still reads older versions lists them after it (gates_report: /2, /1)
    written = fmt["enum"][0] if "enum" in fmt else fmt.get("const")
    assert written == a.format
    assert all(old.rsplit("/", 1)[0] == a.format.rsplit("/", 1)[0] for old in fmt.get("enum", []))


def test_metrics_writer_refuses_an_invalid_record_naming_the_key(run_dir: Path, tmp_path: Path) -> None:
    from xtrain.core.train import write_metrics

    metrics = artifact_table.read("metrics", run_dir / "metrics.json")
    write_metrics(tmp_path / "good", metrics)  # positive control: the real record is accepted
    assert artifact_table.read("metrics", tmp_path / "good" / "metrics.json") == metrics

    bad = {**metrics, "world": "two"}
    with pytest.raises(ValidationError) as err:
        write_metrics(tmp_path / "bad", bad)
    assert err.value.key == "world" and "metrics.json" in err.value.source
    assert not (tmp_path / "bad" / "metrics.json").exists()

    missing = {k: v for k, v in metrics.items() if k != "final_val_loss"}
    with pytest.raises(ValidationError, match=r"metrics\.json: final_val_loss: missing required key"):
        write_metrics(tmp_path / "missing", missing)


def test_non_finite_losses_are_recorded_not_refused(run_dir: Path, tmp_path: Path) -> None:
    # a diverged run must reach the disk so the `finite` gate can fail it
    metrics = artifact_table.read("metrics", run_dir / "metrics.json")
    diverged = {**metrics, "final_val_loss": float("nan")}
    artifact_table.write("metrics", tmp_path / "metrics.json", diverged)
    assert math.isnan(json.loads((tmp_path / "metrics.json").read_text())["final_val_loss"])


def test_read_refuses_an_edited_file_naming_file_and_key(run_dir: Path, tmp_path: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    artifact_table.read("summary", run_dir / "summary.json")
    (tmp_path / "summary.json").write_text(json.dumps({**summary, "extra": 1}))
    with pytest.raises(ValidationError, match=r"summary\.json: extra: unknown key"):
        artifact_table.read("summary", tmp_path / "summary.json")


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown artifact kind"):
        artifact_table.write("metric", "x.json", {})


def test_one_relative_difference() -> None:
    from contracts.numbers import max_rel, rel_diff

    assert rel_diff(1.0, 1.0) == 0.0 and rel_diff(0.0, 0.0) == 0.0
    assert rel_diff(1.1, 1.0) == pytest.approx(0.1)
    # cannot be compared: never small, so no threshold passes it
    assert rel_diff(1.0, 0.0) == math.inf
    assert rel_diff(math.nan, 1.0) == math.inf and rel_diff(1.0, math.nan) == math.inf
    assert max_rel([1.0, 2.0, math.nan], [1.0, 2.0, 3.0]) == math.inf
    assert max_rel([1.0, 2.2], [1.0, 2.0]) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        max_rel([1.0], [1.0, 2.0])
