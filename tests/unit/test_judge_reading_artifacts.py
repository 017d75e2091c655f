"""gates/reading/artifacts.py under mutation (docs/judge-mutation.md): what tests/unit/test_judge_artifacts.py
leaves open. A gate's view keeps the check's params and scope; an artifact at its own path is hashed
once per check (the lock's shared md5), any other file is hashed itself; a schema error names the
file relative to the tree once, keeping the value the user wrote verbatim.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from contracts.fileio import md5_file
from gates.reading.artifacts import ArtifactError, Artifacts
from gates.reading.dvclock import DvcLock
from judge_trees import Tree, write_export


def test_a_gates_view_keeps_the_checks_params_and_scope(tmp_path: Path) -> None:
    params, validated = object(), {("a", "s", "m"): 1}
    a = Artifacts(tmp_path, DvcLock(tmp_path, {}), params, ["export"], {"x": {}}, validated)  # type: ignore[arg-type]
    gate = a.for_gate()
    assert (gate.root, gate.lock, gate.params, gate.scope) == (tmp_path, a.lock, params, ["export"])
    assert gate.params is params and gate.validated is validated and gate.read == {}


def test_the_artifact_itself_is_hashed_once_per_check_and_another_file_itself(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("first\n")
    (tmp_path / "b.txt").write_text("other\n")
    a = Artifacts(tmp_path, DvcLock(tmp_path, {}))
    first = a.lock.md5("a.txt")  # the seals hashed it earlier in this check
    (tmp_path / "a.txt").write_text("second\n")
    assert a.record("a.txt", tmp_path / "a.txt") == first != md5_file(tmp_path / "a.txt")
    other = md5_file(tmp_path / "b.txt")
    assert a.record("a.txt", tmp_path / "b.txt") == other != first
    assert a.read == {"a.txt": {"md5": other, "matches_dvc_lock": None}}


def test_a_schema_error_names_the_file_relative_once_and_keeps_the_value() -> None:
    with tempfile.TemporaryDirectory(prefix="j") as short:  # the value is quoted whole up to ~80 characters
        schema_error_of_a_path_valued_dtype(Path(short))


def schema_error_of_a_path_valued_dtype(tmp_path: Path) -> None:
    t = Tree(tmp_path)
    write_export(tmp_path / "exports" / "pinned")
    path = tmp_path / "exports/pinned/manifest.json"
    data = json.loads(path.read_text())
    data["dtype"] = str(path)  # the absolute path, as a value the schema refuses
    path.write_text(json.dumps(data))
    t.record_out("export", "exports/pinned")
    with pytest.raises(ArtifactError) as e:
        t.artifacts().json("exports/pinned/manifest.json", "manifest.schema.json", "export")
    assert str(e.value) == (
        f'exports/pinned/manifest.json: dtype: "{path}" is invalid (rule: one of "fp32", "bf16")'
    )
