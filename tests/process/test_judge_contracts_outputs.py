"""contracts/outputs.py under mutation (docs/judge-mutation.md): never destroy what you did not make.

Each kind of output against each thing that can stand where it goes (absent, empty, its own previous
output by marker or content, another kind's, a file for a folder and back, a link, the working
directory, a git root), each refusal's exact line, and the staged swap: marker, mode, a re-check just
before the swap, nothing left behind on failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from contracts import outputs
from contracts.outputs import (
    CHECKPOINT,
    EXPORT,
    HTML_REPORT,
    JUNIT_REPORT,
    MARKDOWN_REPORT,
    MARKER,
    PINNED,
    RUN,
    OutputRefused,
    check,
    json_kind,
    staged_folder,
    write_file,
)


def refused(path: Path, kind) -> str:
    with pytest.raises(OutputRefused) as e:
        check(path, kind)
    assert e.value.path == str(path) and e.value.exit_code == 2
    return str(e.value)


def tail(kind: str, problem: str, path: Path) -> str:
    return f"{path}: refusing to write the {kind} here: {problem}; next: name a new path, or move that one away yourself"


def test_absent_and_empty_targets_are_free(tmp_path: Path) -> None:
    assert check(tmp_path / "none", RUN) == tmp_path / "none"
    (tmp_path / "empty").mkdir()
    assert check(str(tmp_path / "empty"), PINNED) == tmp_path / "empty"
    (tmp_path / "empty.json").write_text("")
    assert check(tmp_path / "empty.json", json_kind("report", "xtrain-x/1")) == tmp_path / "empty.json"


def test_a_folder_with_its_own_marker_or_another_kinds(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "anything").write_text("x")
    (run / MARKER).write_text(json.dumps({"kind": "run"}))
    assert check(run, RUN) == run
    assert refused(run, EXPORT) == tail("export", f"its {MARKER} says a 'run' output is there", run)
    (run / MARKER).write_text(json.dumps({"kind": 3}))
    assert refused(run, RUN) == tail("run", f"its {MARKER} says a '?' output is there", run)
    (run / MARKER).write_text("[1]")
    assert "says a '?' output" in refused(run, RUN)


def test_a_run_written_before_markers_is_known_by_its_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in (*outputs.RUN_OUTPUTS, ".gitignore", outputs.LAUNCH_FILE):
        (run / name).write_text("x")
    assert check(run, RUN) == run
    (run / "notes.txt").write_text("mine")
    assert refused(run, RUN) == tail(
        "run", f"a folder of 8 entries that is not a previous run (no {MARKER})", run
    )


def export(folder: Path, files=("a.bin",), fmt: str = outputs.EXPORT_MANIFEST_FORMAT) -> Path:
    folder.mkdir()
    for name in files:
        (folder / name).write_text("x")
    (folder / "manifest.json").write_text(json.dumps({"format": fmt, "files": {"a.bin": {}, "b.bin": {}}}))
    return folder


def test_an_export_is_known_by_its_manifest(tmp_path: Path) -> None:
    assert check(export(tmp_path / "e1"), EXPORT) == tmp_path / "e1"
    assert check(export(tmp_path / "e2", ("a.bin", "b.bin")), EXPORT) == tmp_path / "e2"
    extra = export(tmp_path / "e3", ("a.bin", "c.bin"))
    assert refused(extra, EXPORT) == tail(
        "export", f"a folder of 3 entries that is not a previous export (no {MARKER})", extra
    )
    assert "not a previous export" in refused(export(tmp_path / "e4", fmt="xtrain-export-manifest/2"), EXPORT)
    bad = tmp_path / "e5"
    bad.mkdir()
    (bad / "manifest.json").write_text(json.dumps({"format": outputs.EXPORT_MANIFEST_FORMAT, "files": ["a"]}))
    assert "not a previous export" in refused(bad, EXPORT)
    (bad / "manifest.json").write_text("{not json")
    assert "not a previous export" in refused(bad, EXPORT)


def test_a_checkpoint_is_known_by_its_state(tmp_path: Path) -> None:
    ckpt = tmp_path / "c"
    ckpt.mkdir()
    (ckpt / "state.json").write_text(json.dumps({"format": outputs.CHECKPOINT_FORMAT}))
    assert check(ckpt, CHECKPOINT) == ckpt
    (ckpt / "state.json").write_text(json.dumps({"format": "xtrain-checkpoint/2"}))
    assert "not a previous checkpoint" in refused(ckpt, CHECKPOINT)
    assert "not a previous pinned checkpoint" in refused(ckpt, PINNED)  # never replaced


def test_files_and_folders_in_each_others_place(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert refused(tmp_path / "f", RUN) == tail("run", "it is a file, not a folder", tmp_path / "f")
    (tmp_path / "d").mkdir()
    assert refused(tmp_path / "d", HTML_REPORT) == tail(
        "gates page", "it is a folder, not a file", tmp_path / "d"
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert refused(fifo, MARKDOWN_REPORT) == tail("Markdown report", "it is not a regular file", fifo)


def test_a_symbolic_link_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert refused(tmp_path / "link", RUN) == tail(
        "run", f"it is a symbolic link (to {tmp_path / 'real'})", tmp_path / "link"
    )
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert "it is a symbolic link" in refused(tmp_path / "dangling", HTML_REPORT)


def test_the_working_directory_its_parents_and_git_roots_are_never_replaced(
    tmp_path: Path, monkeypatch
) -> None:
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (work / "x").write_text("x")
    monkeypatch.chdir(work)
    for place in (work, tmp_path / "a", Path(".")):
        assert refused(place, RUN) == tail("run", "it is the working directory or a folder above it", place)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert refused(repo, RUN) == tail("run", "it is the root of a git repository", repo)


@pytest.mark.parametrize(
    ("kind", "good", "other"),
    [
        (HTML_REPORT, "<!DOCTYPE html>\n<html lang='en'><body>", "<html>"),
        (JUNIT_REPORT, '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="xtrain-gates" tests="1">', "<?xml version"),
        (MARKDOWN_REPORT, "## xtrain-gates: pass\n", "## other\n"),
    ],
)  # fmt: skip
def test_reports_are_known_by_how_they_start(tmp_path: Path, kind, good: str, other: str) -> None:
    path = tmp_path / "r"
    path.write_text(good)
    assert check(path, kind) == path
    path.write_text(other)
    assert refused(path, kind) == tail(kind.name, f"the file there is not a previous {kind.name}", path)


def test_json_kinds_by_format_family_or_any_object(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    kind = json_kind("gates report", "xtrain-gates-report/1")
    for fmt, ok in (("xtrain-gates-report/1", True), ("xtrain-gates-report/7", True), ("xtrain-other/1", False),
                    ("gates-report/1", False), (3, False)):  # fmt: skip
        path.write_text(json.dumps({"format": fmt}))
        assert (check(path, kind) == path) if ok else "not a previous gates report" in refused(path, kind)
    path.write_text("[1]")
    assert "not a previous gates report" in refused(path, kind)
    loose = json_kind("summary", None)
    path.write_text("{}")
    assert check(path, loose) == path
    path.write_text("[]")
    assert "not a previous summary" in refused(path, loose)


def test_a_recognised_file_must_be_small(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"format": "xtrain-x/1"}))
    monkeypatch.setattr(outputs, "MAX_RECOGNISED_BYTES", 5)
    assert "not a previous r" in refused(path, json_kind("r", "xtrain-x/1"))


def test_staged_folder_swaps_in_a_complete_output_with_its_marker(tmp_path: Path) -> None:
    dest = tmp_path / "out" / "run"
    with staged_folder(dest, RUN) as tmp:
        assert tmp.parent == dest.parent and tmp.name.startswith(".run.") and tmp.name.endswith(".tmp")
        (tmp / "metrics.json").write_text("{}")
    assert sorted(os.listdir(dest)) == [MARKER, "metrics.json"]
    assert json.loads((dest / MARKER).read_text()) == {"kind": "run"} and dest.stat().st_mode & 0o777 == 0o755
    with staged_folder(dest, RUN) as tmp:
        (tmp / "summary.json").write_text("{}")
    assert sorted(os.listdir(dest)) == [MARKER, "summary.json"] and os.listdir(dest.parent) == ["run"]
    with staged_folder(tmp_path / "exp", EXPORT) as tmp:
        (tmp / "manifest.json").write_text("{}")
    assert os.listdir(tmp_path / "exp") == ["manifest.json"]  # exports carry no marker


def test_a_failed_or_raced_stage_leaves_the_old_output_and_no_temporary(tmp_path: Path) -> None:
    dest = tmp_path / "run"
    with staged_folder(dest, RUN) as tmp:
        (tmp / "metrics.json").write_text("old")
    with pytest.raises(RuntimeError), staged_folder(dest, RUN) as tmp:
        (tmp / "metrics.json").write_text("new")
        raise RuntimeError("interrupted")
    assert (dest / "metrics.json").read_text() == "old" and os.listdir(tmp_path) == ["run"]
    with pytest.raises(OutputRefused), staged_folder(dest, RUN) as tmp:
        (dest / MARKER).write_text(json.dumps({"kind": "export"}))  # someone else's output appeared meanwhile
    assert (dest / "metrics.json").read_text() == "old" and os.listdir(tmp_path) == ["run"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputRefused), staged_folder(tmp_path / "file", RUN):
        pass
    assert sorted(os.listdir(tmp_path)) == ["file", "run"]


def test_write_file_writes_only_where_its_kind_may_go(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    write_file(path, "<!DOCTYPE html>\n<html lang='en'>é", HTML_REPORT)
    assert path.read_bytes() == "<!DOCTYPE html>\n<html lang='en'>é".encode()
    write_file(path, b"<!DOCTYPE html>\n<html lang='en'>2", HTML_REPORT)
    assert path.read_bytes().endswith(b"2")
    (tmp_path / "mine.html").write_text("my notes")
    with pytest.raises(OutputRefused):
        write_file(tmp_path / "mine.html", "<!DOCTYPE html>", HTML_REPORT)
    assert (tmp_path / "mine.html").read_text() == "my notes"
