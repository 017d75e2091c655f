"""contracts/outputs.py's recognisers and helpers called in-process (issue #37): the factories that
build the kinds at import (files_folder, starts_with) had no test of their own, the git question
`_tracked` and `leftovers` none at all. tests/process/test_judge_contracts_outputs.py judges `check`'s
refusals and the staged swap."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from contracts import outputs
from contracts.outputs import ONNX_GRAPH, PICTURE, OutputRefused, check, files_folder, leftovers, starts_with


@pytest.fixture
def bench() -> outputs.Kind:
    """Built in the test, not at import: a mutation run imports the tests before it picks the mutant."""
    return files_folder("bench folder", ("a.json", "b.png"))


def refusal(path: Path, kind: outputs.Kind) -> str:
    with pytest.raises(OutputRefused) as e:
        check(path, kind)
    return str(e.value)


def entries(folder: Path, names: dict[str, str | None]) -> Path:
    """Files (text) and folders (None) under `folder`, made with their parents."""
    for name, text in names.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if text is None else path.write_text(text)
    return folder


# ---- files_folder: only its files, DVC's .gitignore and folders of the same kind ------------------


@pytest.mark.parametrize(
    "names",
    [
        {"a.json": "{}"},
        {"a.json": "{}", "b.png": "x", ".gitignore": "/a.json\n"},
        {"sub/a.json": "{}", "sub/deeper/b.png": "x", "sub/.gitignore": ""},
        {"empty": None},
    ],
)
def test_files_folder_recognises_its_files(tmp_path: Path, names: dict, bench: outputs.Kind) -> None:
    folder = entries(tmp_path / "bench", names)
    assert bench.recognise(folder) is True
    assert check(folder, bench) == folder
    assert (bench.name, bench.folder, bench.marker) == ("bench folder", True, False)


@pytest.mark.parametrize(
    "names",
    [
        {"a.json": "{}", "notes.txt": "mine"},
        {"a.json": "{}", "sub/notes.txt": "mine"},
        {"sub/deeper/c.json": "{}"},
        {"A.json": "{}"},
    ],
)
def test_files_folder_refuses_anything_else(tmp_path: Path, names: dict, bench: outputs.Kind) -> None:
    folder = entries(tmp_path / "bench", names)
    assert bench.recognise(folder) is False
    count = len(list(folder.iterdir()))
    assert refusal(folder, bench) == (
        f"{folder}: refusing to write the bench folder here: a folder of {count} entries that is not a previous "
        "bench folder (no .xtrain-output.json); next: name a new path, or move that one away yourself"
    )


def test_files_folder_refuses_links_even_by_its_own_names(tmp_path: Path, bench: outputs.Kind) -> None:
    folder = entries(tmp_path / "bench", {"a.json": "{}"})
    (tmp_path / "elsewhere").mkdir()
    (folder / "b.png").symlink_to(tmp_path / "elsewhere")  # a link to a folder, named as one of its files
    assert bench.recognise(folder) is False
    (folder / "b.png").unlink()
    (folder / "b.png").symlink_to(folder / "a.json")
    assert bench.recognise(folder) is False


# ---- starts_with, _names: files known by their first bytes ---------------------------------------


@pytest.mark.parametrize(
    ("data", "known"),
    [
        (b"ABCD", True),
        (b"ABCDE and more", True),
        (b"ABC", False),
        (b"xABCD", False),
        (b"", False),
        (b"abcd", False),
    ],
)
def test_starts_with(tmp_path: Path, data: bytes, known: bool) -> None:
    (tmp_path / "f").write_bytes(data)
    assert starts_with(b"ABCD")(tmp_path / "f") is known


def test_a_png_picture_by_its_signature(tmp_path: Path) -> None:
    (tmp_path / "p.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    assert check(tmp_path / "p.png", PICTURE) == tmp_path / "p.png"
    (tmp_path / "p.png").write_bytes(b"\x89PNG\r\n" + b"\0" * 20)
    assert "the file there is not a previous PNG picture" in refusal(tmp_path / "p.png", PICTURE)


@pytest.mark.parametrize(
    ("data", "named", "known"),
    [
        (b"\x08\x07\x12\x07pytorch", True, True),
        (b"\x08" + b"\0" * 4088 + b"pytorch", True, True),  # the word ends at byte 4096
        (b"\x08" + b"\0" * 4089 + b"pytorch", False, False),  # one byte further: past what is read
        (b"\x09\x07\x12\x07pytorch", True, False),  # not field 1 first
        (b"\x08\x07\x12\x07tensorflow", False, False),
    ],
    ids=["producer", "at-4096", "past-4096", "other-first-field", "other-producer"],
)
def test_an_onnx_graph_by_its_first_field_and_producer(
    tmp_path: Path, data: bytes, named: bool, known: bool
) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    assert outputs._names(path, b"pytorch") is named
    assert bool(ONNX_GRAPH.recognise(path)) is known


# ---- _tracked and the empty file git tracks ------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    subprocess.run(["git", "add", "pkg/__init__.py"], cwd=tmp_path, check=True)
    (tmp_path / "pkg" / "summary.md").write_text("")
    return tmp_path


def test_tracked(repo: Path, tmp_path_factory: pytest.TempPathFactory, capfd: pytest.CaptureFixture) -> None:
    outside = tmp_path_factory.mktemp("outside") / "x.md"
    outside.write_text("")
    assert outputs._tracked(repo / "pkg" / "__init__.py") is True
    assert outputs._tracked(repo / "pkg" / "summary.md") is False
    assert outputs._tracked(outside) is False
    assert capfd.readouterr() == ("", "")  # git's answer is captured, never printed


def test_tracked_asks_git_about_the_name_in_its_folder(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], dict[str, Any]]] = []
    real = subprocess.run

    def recording(argv: list[str], **kw: Any) -> subprocess.CompletedProcess:
        seen.append((argv, kw))
        return real(argv, **kw)

    monkeypatch.setattr(outputs.subprocess, "run", recording)
    assert outputs._tracked(repo / "pkg" / "__init__.py") is True
    argv = ["git", "-C", str(repo / "pkg"), "ls-files", "--error-unmatch", "--", "__init__.py"]
    assert seen == [(argv, {"capture_output": True, "timeout": 10})]


@pytest.mark.parametrize("error", [OSError(2, "no git"), subprocess.TimeoutExpired(["git"], 10)])
def test_tracked_without_git_is_false(repo: Path, monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def raising(*_a: Any, **_k: Any) -> None:
        raise error

    monkeypatch.setattr(outputs.subprocess, "run", raising)
    assert outputs._tracked(repo / "pkg" / "__init__.py") is False


def test_an_empty_file_is_free_unless_git_tracks_it(repo: Path) -> None:
    kind = outputs.MARKDOWN_REPORT
    assert check(repo / "pkg" / "summary.md", kind) == repo / "pkg" / "summary.md"
    assert refusal(repo / "pkg" / "__init__.py", kind) == (
        f"{repo / 'pkg' / '__init__.py'}: refusing to write the Markdown report here: it is an empty file git "
        "tracks (a source file, not a placeholder); next: name a new path, or move that one away yourself"
    )
    (repo / "pkg" / "one.md").write_text("x")  # not empty, not a report
    assert (
        outputs._file_problem(repo / "pkg" / "one.md", kind)
        == "the file there is not a previous Markdown report"
    )
    assert outputs._file_problem(repo / "pkg" / "summary.md", kind) is None


# ---- leftovers: the scratch twins an interrupted writer left -------------------------------------


def test_leftovers(tmp_path: Path) -> None:
    names = [
        ".run.b.tmp",
        ".run.a.old",
        ".run..tmp",
        ".run.c.tmp.x",
        ".runs.1.tmp",
        "run.1.tmp",
        ".run.1.bak",
        ".other.1.old",
    ]
    for name in names:
        (tmp_path / name).write_text("")
    (tmp_path / "run").mkdir()
    want = [tmp_path / n for n in (".run..tmp", ".run.a.old", ".run.b.tmp")]
    assert leftovers(tmp_path / "run") == want
    assert leftovers(str(tmp_path / "run")) == want
    assert leftovers(tmp_path / "absent") == []


def test_leftovers_where_the_folder_is_missing_or_a_file(tmp_path: Path) -> None:
    assert leftovers(tmp_path / "no" / "run") == []
    (tmp_path / "file").write_text("")
    assert leftovers(tmp_path / "file" / "run") == []


# ---- leaves_repository: a folder that leads through a link out of its repository ----------------


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """(a repository, a folder outside it) with repo/out -> outside and repo/inner -> repo/real."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / ".git").mkdir(parents=True)
    (repo / "real").mkdir()
    outside.mkdir()
    (repo / "out").symlink_to(outside)
    (repo / "inner").symlink_to(repo / "real")
    return repo, outside


def test_leaves_repository_through_a_link(linked: tuple[Path, Path]) -> None:
    repo, outside = linked
    said = f"its folder leads through a symbolic link to {outside}, outside the repository {repo}"
    assert outputs.leaves_repository(repo / "out" / "report.md") == said
    assert outputs.leaves_repository(repo / "out" / "not" / "yet" / "report.md") == said  # folders to be made
    assert refusal(repo / "out" / "r.md", outputs.MARKDOWN_REPORT) == (
        f"{repo / 'out' / 'r.md'}: refusing to write the Markdown report here: {said}; next: name a new "
        "path, or move that one away yourself"
    )


def test_leaves_repository_not_within_or_outside_any(linked: tuple[Path, Path], tmp_path: Path) -> None:
    repo, outside = linked
    assert outputs.leaves_repository(repo / "inner" / "r.md") is None  # a link inside the repository
    assert outputs.leaves_repository(repo / "real" / "r.md") is None
    assert outputs.leaves_repository(repo / "r.md") is None
    (outside / "back").symlink_to(repo / "real")
    assert outputs.leaves_repository(outside / "back" / "r.md") is None  # named outside any repository
    assert outputs._repository(repo / "real") == repo and outputs._repository(repo) == repo
    assert outputs._repository(outside) is None


# ---- the recognisers' own limits ------------------------------------------------------------------


def test_a_json_record_exactly_at_the_size_limit_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"format": "xtrain-x/1"}')
    monkeypatch.setattr(outputs, "MAX_RECOGNISED_BYTES", path.stat().st_size)
    assert outputs._json(path) == {"format": "xtrain-x/1"}
    monkeypatch.setattr(outputs, "MAX_RECOGNISED_BYTES", path.stat().st_size - 1)
    assert outputs._json(path) is None


def test_a_json_record_is_never_read_through_a_link_or_as_a_folder(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "bad.json").write_bytes(b"\xff{")
    assert outputs._json(tmp_path / "real.json") == {}
    for name in ("link.json", "dir.json", "bad.json", "absent.json"):
        assert outputs._json(tmp_path / name) is None


@pytest.mark.parametrize(
    ("tag", "family"),
    [("xtrain-gates-report/1", "xtrain-gates-report"), ("xtrain-x", "xtrain-x"), ("xtrain-a/b/c", "xtrain-a"),
     ("gates-report/1", None), ("Xtrain-x/1", None), (3, None), (None, None)],
)  # fmt: skip
def test_family(tag: object, family: str | None) -> None:
    assert outputs._family(tag) == family


def test_output_flag_marks_and_returns_the_action() -> None:
    class Action:
        pass

    action = Action()
    assert outputs.output_flag(action, outputs.RUN) is action
    assert action.xtrain_output is outputs.RUN


def test_write_marker_names_the_kind(tmp_path: Path) -> None:
    outputs.write_marker(tmp_path, outputs.RUN)
    assert (tmp_path / outputs.MARKER).read_text(encoding="utf-8") == '{\n  "kind": "run"\n}\n'
    assert outputs._marker_kind(tmp_path) == "run"


def test_json_kind_is_a_file_kind() -> None:
    for kind in (outputs.json_kind("summary", None), outputs.json_kind("report", "xtrain-x/1")):
        assert (kind.folder, kind.marker) == (False, False)
