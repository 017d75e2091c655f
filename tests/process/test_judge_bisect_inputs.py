"""gates/campaigns/bisect.py: a commit with the same pipeline inputs as one already judged takes its
verdict (docs/bisect.md), on a tiny real git repository with the build replaced by a recording fake.

Inputs are what DVC reruns on: dvc.yaml, params.yaml, `.dvc` files and every tracked file under a
stage's dep. A commit that changes anything else (docs, tests, the judge) is judged as the commit it
equals; one that changes a dep, a params file a stage names, or dvc.yaml is built. A dvc.yaml that
cannot be read literally (a `${...}` dep, no stages, too large) means: always build.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import PARAMS
from gates.campaigns import bisect
from gates.campaigns.bisect import Bisector, Verdict

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip

DVC_YAML = """\
stages:
  train:
    cmd: python train.py
    deps: [src/, train.py]  # a folder dep, written as a folder
    params: [train, {extra.yaml: [lr]}]
  each:
    foreach: [a, b]
    do:
      cmd: echo ${item}
      deps: [tool.py]
"""


def sh(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def commit(repo: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", "c")
    return sh(repo, "rev-parse", "HEAD")


def blob(repo: Path, commit_sha: str, path: str) -> str:
    return sh(repo, "rev-parse", f"{commit_sha}:{path}")


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    files = {"dvc.yaml": DVC_YAML, "params.yaml": "train: {lr: 1}\n", "extra.yaml": "lr: 2\n",
             "train.py": "t\n", "tool.py": "x\n", "src/a.py": "a\n", "src/sub/b.py": "b\n", "src/tab\tname.py": "t\n",
             "srcx.py": "not under src/\n", "data.dvc": "outs: []\n", "README.md": "r\n"}  # fmt: skip
    commit(root, files)
    return root


def test_the_inputs_are_dvc_yaml_params_dvc_files_and_every_tracked_dep(repo: Path) -> None:
    head = sh(repo, "rev-parse", "HEAD")
    expected = [
        "data.dvc",
        "dvc.yaml",
        "extra.yaml",
        "params.yaml",
        "src/a.py",
        "src/sub/b.py",
        "src/tab\tname.py",
        "tool.py",
        "train.py",
    ]  # fmt: skip (git lists a tab in a name as is with -z)
    assert bisect.pipeline_inputs(repo, head) == [[p, blob(repo, head, p)] for p in expected]


@pytest.mark.parametrize(
    ("files", "same"),
    [
        ({"README.md": "docs\n"}, True),
        ({"srcx.py": "a sibling named like a dep\n"}, True),
        ({"notes/new.md": "new\n"}, True),
        ({"src/sub/b.py": "B\n"}, False),  # under a folder dep
        ({"tool.py": "y\n"}, False),  # a foreach stage's dep
        ({"extra.yaml": "lr: 3\n"}, False),  # a params file a stage names
        ({"params.yaml": "train: {lr: 2}\n"}, False),
        ({"data.dvc": "outs: [x]\n"}, False),
        ({"dvc.yaml": DVC_YAML + "\n"}, False),
    ],
)
def test_equal_inputs_are_equal_only_when_no_dep_moved(repo: Path, files: dict[str, str], same: bool) -> None:
    before = bisect.pipeline_inputs(repo, "HEAD")
    after = bisect.pipeline_inputs(repo, commit(repo, files))
    assert after is not None and (after == before) is same


@pytest.mark.parametrize(
    "dvc_yaml",
    [
        "stages:\n  s:\n    cmd: x\n    deps: [runs/${key}]\n",  # a dep read through interpolation
        "stages:\n  s:\n    cmd: x\n    params: [{'${file}': [a]}]\n",
        "stages:\n  s:\n    cmd: x\n    deps: [{path: a}]\n",  # not a path string
        "stages:\n  s:\n    cmd: x\n    deps: a.py\n",  # not a list
        "stages:\n  s: [not, a, stage]\n",
        "stages:\n  s:\n    foreach: [a]\n    do: [x]\n",
        "stages: [s]\n",
        "- not a pipeline\n",
        "stages: {a: [unclosed\n",  # not YAML
    ],
)
def test_a_pipeline_that_cannot_be_read_literally_is_always_built(repo: Path, dvc_yaml: str) -> None:
    assert bisect.pipeline_inputs(repo, commit(repo, {"dvc.yaml": dvc_yaml})) is None


def test_a_commit_without_dvc_yaml_or_with_a_huge_one_is_always_built(repo: Path, monkeypatch) -> None:
    sh(repo, "rm", "-q", "dvc.yaml")
    sh(repo, "commit", "-q", "-m", "no pipeline")
    assert bisect.pipeline_inputs(repo, "HEAD") is None
    commit(repo, {"dvc.yaml": DVC_YAML})
    monkeypatch.setattr(bisect, "PIPELINE_BYTES", len(DVC_YAML) - 1)
    assert bisect.pipeline_inputs(repo, "HEAD") is None
    monkeypatch.setattr(bisect, "PIPELINE_BYTES", len(DVC_YAML))
    assert bisect.pipeline_inputs(repo, "HEAD") is not None


def test_stage_inputs_lists_every_stages_deps_and_named_params_files() -> None:
    pipeline = {"stages": {"a": {"deps": ["x", "y/"], "params": ["p", {"f.yaml": ["k"]}, {}]},
                           "b": {"foreach": [1], "do": {"deps": ["z"]}}, "c": {"cmd": "true"}}}  # fmt: skip
    assert bisect.stage_inputs(pipeline) == ["x", "y/", "f.yaml", "z"]
    assert bisect.stage_inputs({"stages": {}}) == []


def bisector(repo: Path, tmp_path: Path, gate: str | None = "fresh_train", good: str = "g" * 40) -> Bisector:
    (tmp_path / "judge").mkdir(exist_ok=True)
    return Bisector(repo, tmp_path / "judge", PARAMS, gate, good, tmp_path / "cache")


def test_the_inputs_key_names_gate_good_judge_and_inputs(repo: Path, tmp_path: Path) -> None:
    b = bisector(repo, tmp_path)
    inputs = bisect.pipeline_inputs(repo, "HEAD")
    text = json.dumps(["v1", "fresh_train", "g" * 40, bisect.judge_fingerprint(b.judge, PARAMS), inputs])
    assert b.inputs_key("HEAD") == hashlib.sha256(text.encode()).hexdigest()[:24]
    assert bisector(repo, tmp_path, gate=None).inputs_key("HEAD") != b.inputs_key("HEAD")
    assert bisector(repo, tmp_path, good="h" * 40).inputs_key("HEAD") != b.inputs_key("HEAD")
    commit(repo, {"dvc.yaml": "stages: [s]\n"})
    assert b.inputs_key("HEAD") is None


class Builds:
    """Bisector.build replaced: records the commits it was asked to build, returns a verdict each."""

    def __init__(self) -> None:
        self.built: list[str] = []

    def __call__(self, b: Bisector, commit_sha: str) -> Verdict:
        self.built.append(commit_sha)
        return Verdict("fail", f"built {len(self.built)}", "cfg", True)


def test_a_commit_with_the_inputs_of_a_judged_one_takes_its_verdict(repo, tmp_path, monkeypatch) -> None:
    first = sh(repo, "rev-parse", "HEAD")
    docs = commit(repo, {"README.md": "docs\n"})
    code = commit(repo, {"src/a.py": "A\n"})
    builds = Builds()
    monkeypatch.setattr(Bisector, "build", lambda self, sha: builds(self, sha))
    b = bisector(repo, tmp_path)
    assert b.verdict(first) == Verdict("fail", "built 1", "cfg", True)
    shared = f"(as {first[:12]}: same pipeline inputs) built 1"
    assert b.verdict(docs) == Verdict("fail", shared, "cfg", True)
    assert b.verdict(code) == Verdict("fail", "built 2", "cfg", True)
    assert builds.built == [first, code]
    # each commit's verdict is in the cache under its own key; the shared one says whose it is
    saved = json.loads((b.cache / f"{b.key(docs)}.json").read_text())
    assert saved == {"status": "fail", "message": shared, "config": "cfg", "golden": True}
    assert json.loads((b.cache / "inputs" / f"{b.inputs_key(first)}.json").read_text()) == {
        "commit": first,
        "verdict": {"status": "fail", "message": "built 1", "config": "cfg", "golden": True},
    }
    assert b.verdict(docs) == Verdict("fail", shared, "cfg", True) and len(builds.built) == 2


def test_another_judge_or_good_builds_again(repo, tmp_path, monkeypatch) -> None:
    first = sh(repo, "rev-parse", "HEAD")
    docs = commit(repo, {"README.md": "docs\n"})
    builds = Builds()
    monkeypatch.setattr(Bisector, "build", lambda self, sha: builds(self, sha))
    bisector(repo, tmp_path).verdict(first)
    bisector(repo, tmp_path, good="h" * 40).verdict(docs)
    assert builds.built == [first, docs]


def test_a_pipeline_read_no_other_way_is_built_every_time(repo, tmp_path, monkeypatch) -> None:
    first = commit(repo, {"dvc.yaml": "stages: [s]\n"})
    docs = commit(repo, {"README.md": "docs\n"})
    builds = Builds()
    monkeypatch.setattr(Bisector, "build", lambda self, sha: builds(self, sha))
    b = bisector(repo, tmp_path)
    b.verdict(first)
    b.verdict(docs)
    assert builds.built == [first, docs] and not (b.cache / "inputs").exists()
