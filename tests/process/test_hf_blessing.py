"""Blessings know what made them (issue #52, item 2): examples/hf-trainer's md5 stage sets aside the
`transformers_version` that save_pretrained writes into config.json and generation_config.json.

A new transformers release alone never fails the stage; any other difference in those files does, in
one line naming the keys and the command that re-blesses; weights stay md5-exact. The blessing already
committed (format 1: name -> md5, the writer's version beside) stays readable. On main before this
change the stage compared raw md5s: every test below that expects a pass with a moved version failed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, code_first
from contracts.fileio import canonical_json, md5_file

EXAMPLE = REPO / "examples" / "hf-trainer"
sys.path.insert(0, str(EXAMPLE))
import hfblessing  # noqa: E402

# What transformers' save_pretrained writes for the example's pinned Qwen3 (5.25.0; canonical JSON)
CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "hidden_size": 32,
    "model_type": "qwen3",
    "num_hidden_layers": 2,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": True,
    "transformers_version": "5.25.0",
    "vocab_size": 2048,
}
GENERATION = {"_from_model_config": True, "transformers_version": "5.25.0", "use_cache": True}


def export(folder: Path, config: dict, weights: bytes = b"\x00weights") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(canonical_json(config))
    (folder / "generation_config.json").write_text(canonical_json(GENERATION))
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def blessed_from(folder: Path, version: str = "5.25.0") -> dict:
    """A format-2 blessing of `folder`, as hfregistry.py bless writes it."""
    files = {p.name: hfblessing.describe(p) for p in sorted(folder.iterdir())}
    return {"format": hfblessing.FORMAT, "files": files, "transformers": version}


def verdict(blessed: dict, folder: Path) -> tuple[dict[str, hfblessing.Row], str]:
    rows = hfblessing.compare(blessed, folder)
    return {r.file: r for r in rows}, hfblessing.verdict_line(rows, "exports/pinned", "v")


def test_a_blessing_records_the_json_without_the_writer_and_the_writer_beside(tmp_path: Path) -> None:
    entry = hfblessing.describe(export(tmp_path / "e", CONFIG) / "config.json")
    assert entry["md5"] == md5_file(tmp_path / "e" / "config.json")
    assert entry["writer"] == {"transformers_version": "5.25.0"}
    body = {k: v for k, v in CONFIG.items() if k != "transformers_version"}
    assert entry["without_writer"]["json"] == body
    assert entry["without_writer"]["md5"] == hfblessing.md5_text(canonical_json(body))
    weights = hfblessing.describe(tmp_path / "e" / "model.safetensors")
    assert weights == {"md5": md5_file(tmp_path / "e" / "model.safetensors")}  # md5-exact, nothing set aside


def test_a_new_transformers_release_alone_passes(tmp_path: Path) -> None:
    blessed = blessed_from(export(tmp_path / "then", {**CONFIG, "transformers_version": "5.24.0"}), "5.24.0")
    now = export(tmp_path / "now", CONFIG)
    rows, line = verdict(blessed, now)
    assert rows["config.json"].expected != rows["config.json"].actual  # the raw md5s moved (main failed here)
    assert rows["config.json"].status == "writer" and rows["config.json"].ok
    assert "written by 5.25.0, blessed with 5.24.0" in rows["config.json"].what
    assert rows["model.safetensors"].status == "equal"
    assert (
        line.startswith("md5: 3 files of exports/pinned equal")
        and "only transformers_version differs" in line
    )


def test_a_real_config_difference_still_fails_in_one_line_naming_the_key(tmp_path: Path) -> None:
    blessed = blessed_from(export(tmp_path / "then", {**CONFIG, "transformers_version": "5.24.0"}), "5.24.0")
    rows, line = verdict(blessed, export(tmp_path / "now", {**CONFIG, "hidden_size": 64}))
    assert not rows["config.json"].ok
    assert rows["config.json"].what == "hidden_size 32 -> 64 (transformers_version set aside)"
    assert rows["generation_config.json"].ok  # its version alone moved
    assert "\n" not in line and line.endswith(f"next: an intended change: {hfblessing.REBLESS}")
    assert "config.json: hidden_size 32 -> 64" in line
    # a key added, one removed, a writer key that is not transformers' own: all named
    other = {**{k: v for k, v in CONFIG.items() if k != "vocab_size"}, "peft_version": "1.0"}
    rows, _ = verdict(blessed, export(tmp_path / "other", other))
    assert rows["config.json"].what.startswith('peft_version (absent) -> "1.0", vocab_size 2048 -> (absent)')


def test_weights_stay_md5_exact(tmp_path: Path) -> None:
    blessed = blessed_from(export(tmp_path / "then", CONFIG))
    rows, _ = verdict(blessed, export(tmp_path / "now", CONFIG, weights=b"\x01weights"))
    assert not rows["model.safetensors"].ok and rows["model.safetensors"].what.startswith("md5 ")
    assert [r for r in rows.values() if not r.ok] == [rows["model.safetensors"]]
    # a file the export gained, and one it lost
    (tmp_path / "now" / "extra.json").write_text("{}")
    (tmp_path / "now" / "model.safetensors").unlink()
    rows, _ = verdict(blessed, tmp_path / "now")
    assert (
        rows["extra.json"].what == "not blessed"
        and rows["model.safetensors"].what == "missing from the export"
    )


def committed() -> dict:
    return json.loads((EXAMPLE / "hf_registry" / "md5.json").read_text())


def test_a_format1_blessing_stays_readable(tmp_path: Path) -> None:
    """Format 1, as the committed hf_registry/md5.json (no `format`: name -> md5, the writer's version
    beside): a file whose only change is the version reads as such, by re-rendering it with the
    blessed version; the same file with a real change still fails (no keys recorded to name)."""
    assert "format" not in committed() and isinstance(committed()["files"]["config.json"], str)
    then = export(tmp_path / "then", {**CONFIG, "transformers_version": "5.24.0"})
    (then / "generation_config.json").write_text(
        canonical_json({**GENERATION, "transformers_version": "5.24.0"})
    )
    old = {"files": {p.name: md5_file(p) for p in then.iterdir()}, "transformers": "5.24.0"}
    rows, _ = verdict(old, export(tmp_path / "now", CONFIG))
    assert [rows[n].status for n in sorted(rows)] == ["writer", "writer", "equal"], rows
    rows, line = verdict(old, export(tmp_path / "changed", {**CONFIG, "hidden_size": 64}))
    assert rows["config.json"].what.startswith("differs beyond transformers_version (md5 ")
    assert not rows["config.json"].ok and line.endswith(hfblessing.REBLESS)
    assert rows["generation_config.json"].ok


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda b: b.update(format="xtrain-hf-registry/9"), "format: 'xtrain-hf-registry/9' is not"),
        (
            lambda b: b["files"]["config.json"]["without_writer"]["json"].update(hidden_size=64),
            "edited by hand?",
        ),
        (lambda b: b["files"]["model.safetensors"].pop("md5"), "files.model.safetensors: no md5"),
        (lambda b: b.update(files={}), "files: missing or empty"),
    ],
)
def test_a_blessing_that_cannot_be_read_is_one_line(tmp_path: Path, edit, said: str) -> None:
    blessed = blessed_from(export(tmp_path / "e", CONFIG))
    edit(blessed)
    with pytest.raises(hfblessing.BlessingError) as e:
        hfblessing.compare(blessed, tmp_path / "e")
    assert said in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("error: ")


def scratch_example(tmp_path: Path) -> Path:
    root = tmp_path / "hf-trainer"
    root.mkdir()
    for name in ("hfregistry.py", "hfblessing.py", "hfconfig.py", "params.yaml"):
        shutil.copy(EXAMPLE / name, root / name)
    shutil.copytree(EXAMPLE / "hf_registry", root / "hf_registry")
    (root / "data").mkdir()
    # the tokenizer stage's data/tokens.json: the md5 stage reads its vocab_size (params tokenizer.vocab_size)
    (root / "data" / "tokens.json").write_text(json.dumps({"vocab_size": 2048}))
    return root


def hfregistry(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "hfregistry.py", *args],
        cwd=root,
        env=code_first(REPO),
        capture_output=True,
        text=True,
        timeout=300,
    )


def moved_rope(root: Path) -> subprocess.CompletedProcess[str]:
    """A real change of config.json: params.yaml's rope_theta (the weights still load)."""
    params = (root / "params.yaml").read_text()
    assert "rope_theta: 10000.0" in params
    (root / "params.yaml").write_text(params.replace("rope_theta: 10000.0", "rope_theta: 20000.0", 1))
    return hfregistry(root, "check")


def test_the_md5_stage_passes_on_the_committed_blessing_and_fails_a_real_change(tmp_path: Path) -> None:
    """The real stage (torch, transformers' save_pretrained of the pinned weights) on the committed
    format-1 blessing (transformers 5.24.0): exit 0 whichever transformers is installed (main: exit 1
    with 5.25.0); rope_theta changed moves config.json for real: exit 1, one line, the re-bless command."""
    import transformers

    root = scratch_example(tmp_path)
    out = hfregistry(root, "check")
    assert out.returncode == 0, out.stderr[-2000:]
    report = {r["file"]: r for r in json.loads((root / "reports" / "md5.json").read_text())["files"]}
    assert set(report) == set(committed()["files"]) and report["model.safetensors"]["status"] == "equal"
    moved = "equal" if transformers.__version__ == committed()["transformers"] else "writer"
    assert report["config.json"]["status"] == report["generation_config.json"]["status"] == moved
    out = moved_rope(root)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and lines[-1].startswith(
        "md5: exports/pinned differs from hf_registry: config.json:"
    )
    assert "differs beyond transformers_version" in lines[-1] and lines[-1].endswith(hfblessing.REBLESS)
    assert "generation_config.json" not in lines[-1]  # its version alone moved


def test_bless_writes_format2_and_the_next_check_names_a_changed_key(tmp_path: Path) -> None:
    root = scratch_example(tmp_path)
    ckpt = root / "runs" / "single" / "checkpoints"
    (ckpt / "step_000024").mkdir(parents=True)
    shutil.copy(root / "hf_registry" / "pinned.safetensors", ckpt / "step_000024" / "model.safetensors")
    (ckpt / "latest").write_text("step_000024\n")
    out = hfregistry(root, "bless", "--reason", "format 2: the writer's version set aside")
    assert out.returncode == 0, out.stderr[-2000:]
    blessed = json.loads((root / "hf_registry" / "md5.json").read_text())
    assert blessed["format"] == hfblessing.FORMAT
    assert set(blessed["files"]["config.json"]) == {"md5", "without_writer", "writer"}
    assert blessed["files"]["model.safetensors"] == {"md5": committed()["files"]["model.safetensors"]}
    out = hfregistry(root, "check")
    assert out.returncode == 0 and "3 files of exports/pinned equal" in out.stdout, out.stderr[-2000:]
    out = moved_rope(root)
    line = out.stderr.strip().splitlines()[-1]
    assert (
        out.returncode == 1 and "config.json: rope_parameters {" in line and line.endswith(hfblessing.REBLESS)
    )
