"""Issue #36 item 1: the gates' staleness agrees with `dvc status` on every stage.

Before: deleting dvc.lock's entries for xtrain/core/optim.py and editing it, or deleting
closed_loop's `params:` block and changing closed_loop.new_tokens, passed every gate (exit 0) while
`dvc status` named the stage. Now gates/reading/dvcstatus.py decides as DVC does; this property holds it to
DVC itself. A small real DVC project (a folder dep and out, a foreach, params by key, by dotted key
and a whole params file, an `always_changed` stage, uncached outs) is built once with `dvc repro`;
Hypothesis draws up to three edits of dvc.lock (thinnings: a dep, out, params block, params key or
whole stage deleted; a recorded md5, value or cmd changed) and of the workspace (params values,
code deps, a folder dep, outs); on each copy the set of stages `dvc status` lists (DVC's own
Repo.status(), the code `dvc status` runs; "always changed" alone is DVC's design, not staleness)
must equal the gates', and `gates check --only seals` must exit 2 exactly when it is not empty.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from gates.__main__ import main as gates_main
from gates.reading import dvcstatus
from gates.reading.dvclock import DvcLock
from hypothesis_profiles import examples

PARAMS = """seed: 1
net:
  dim: 32
  lr: 1.0e-3
  layers: [2, 4]
closed_loop:
  new_tokens: 40
  prompts: 3
unrelated: 7
"""
EXTRA = "alpha: 1\nbeta: two\n"
DVC_YAML = """stages:
  env:
    cmd: python3 src/env.py
    always_changed: true
    outs:
      - out/env.json:
          cache: false
  prep:
    cmd: mkdir -p out/prep && cp src/a.py out/prep/a && cp -r data/in out/prep/in
    deps: [src/a.py, data/in]
    params: [seed]
    outs: [out/prep]
  train:
    foreach:
      one: {cmd: echo one}
      two: {cmd: echo two}
    do:
      cmd: ${item.cmd} > out/${key}.txt && cat out/env.json >> out/${key}.txt
      deps: [src/b.py, out/prep, out/env.json]
      params: [net, seed]
      outs:
        - out/${key}.txt:
            cache: false
  report:
    cmd: python3 src/report.py
    deps: [out/one.txt, src/report.py]
    params:
      - closed_loop.new_tokens
      - closed_loop.prompts
      - extra.yaml:
    metrics:
      - out/report.json:
          cache: false
"""
FILES = {
    "params.yaml": PARAMS,
    "extra.yaml": EXTRA,
    "dvc.yaml": DVC_YAML,
    "src/a.py": "a = 1\n",
    "src/b.py": "b = 1\n",
    "src/env.py": "import json\njson.dump({'env_id': 'cpu-test'}, open('out/env.json', 'w'))\n",
    "src/report.py": "import json\njson.dump({'ok': 1}, open('out/report.json', 'w'))\n",
    "data/in/x": "x\n",
    "data/in/y": "y\n",
}
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1"}
TRIED: Counter[str] = Counter()


def dvc(root: Path, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True, text=True, env=ENV
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dvcstatus") / "p"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "out").mkdir()
    dvc(root, "init", "--no-scm", "-q")
    dvc(root, "config", "core.analytics", "false")
    dvc(root, "repro", "-q")
    yield root
    print(f"\ndvc status property: {sum(TRIED.values())} edits ({dict(TRIED)})")


def dvc_says(root: Path) -> set[str]:
    """The stages `dvc status` lists, "always changed" alone not counted (DVC reruns such a stage on
    every repro by design)."""
    from dvc.repo import Repo

    with contextlib.chdir(root), Repo(".") as repo:  # DVC names stages relative to the cwd
        found = repo.status()
    return {stage for stage, what in found.items() if [w for w in what if w != "always changed"]}


def gates_say(root: Path) -> set[str]:
    lock = DvcLock.read(root)
    unrecorded = {s for s in lock.definitions if s not in lock.stages}
    return set(dvcstatus.status(lock, sorted(lock.definitions))) | unrecorded


def seals_exit(root: Path) -> int:
    report = root.parent / "gates.json"
    return gates_main(["--root", str(root), "--params", str(root / "params.yaml"), "check", "--only", "seals",
                       "--report", str(report)])  # fmt: skip


# -- edits ------------------------------------------------------------------------------------------


def edit_lock(root: Path, change: Callable[[dict], None]) -> None:
    path = root / "dvc.lock"
    lock = yaml.safe_load(path.read_text())
    change(lock["stages"])
    path.write_text(yaml.safe_dump(lock, sort_keys=False))


def drop_entry(key: str, pick: int) -> Callable[[dict], None]:
    def change(stages: dict) -> None:
        bodies = [b for b in stages.values() if b.get(key)]
        body = bodies[pick % len(bodies)]
        body[key].pop(pick % len(body[key]))

    return change


def drop_params(pick: int, whole: bool) -> Callable[[dict], None]:
    def change(stages: dict) -> None:
        bodies = [b for b in stages.values() if b.get("params")]
        body = bodies[pick % len(bodies)]
        files = body["params"]
        name = sorted(files)[pick % len(files)]
        if whole or not files[name]:
            del files[name]
        else:
            files[name].pop(sorted(files[name])[pick % len(files[name])])

    return change


def drop_path(path: str) -> Callable[[dict], None]:
    """Every dvc.lock entry of one dep (the issue's three lines for xtrain/core/optim.py)."""

    def change(stages: dict) -> None:
        for body in stages.values():
            body["deps"] = [d for d in body.get("deps") or [] if d["path"] != path]

    return change


def drop_stage(pick: int) -> Callable[[dict], None]:
    return lambda stages: stages.pop(sorted(stages)[pick % len(stages)])


def flip_md5(pick: int) -> Callable[[dict], None]:
    def change(stages: dict) -> None:
        entries = [e for b in stages.values() for k in ("deps", "outs") for e in b.get(k) or []]
        e = entries[pick % len(entries)]
        e["md5"] = ("0" if e["md5"][0] != "0" else "1") + e["md5"][1:]

    return change


def recorded_value(pick: int) -> Callable[[dict], None]:
    def change(stages: dict) -> None:
        values = [v for b in stages.values() for v in (b.get("params") or {}).values() if v]
        key = sorted(values[pick % len(values)])[0]
        values[pick % len(values)][key] = "changed"

    return change


def recorded_cmd(pick: int) -> Callable[[dict], None]:
    def change(stages: dict) -> None:
        stage = sorted(stages)[pick % len(stages)]
        stages[stage]["cmd"] = str(stages[stage]["cmd"]) + " "

    return change


PARAM_EDITS = {  # (old, new) in params.yaml; some keep the value (1.0e-3 is 0.001; 40.0 == 40 to DVC)
    "dim": ("dim: 32", "dim: 33"),
    "lr same value": ("lr: 1.0e-3", "lr: 0.001"),
    "lr": ("lr: 1.0e-3", "lr: 2e-3"),
    "tokens": ("new_tokens: 40", "new_tokens: 41"),
    "tokens as float": ("new_tokens: 40", "new_tokens: 40.0"),
    "prompts deleted": ("  prompts: 3\n", ""),
    "unrelated": ("unrelated: 7", "unrelated: 8"),
    "seed": ("seed: 1", "seed: 2"),
    "list": ("layers: [2, 4]", "layers: [2, 4, 8]"),
    "key added": ("unrelated: 7", "unrelated: 7\nadded: 1"),
}


def workspace(root: Path, what: str, pick: int) -> None:
    if what in PARAM_EDITS:
        old, new = PARAM_EDITS[what]
        text = (root / "params.yaml").read_text()
        if not (new and new in text):  # once only: a second `added: 1` is a duplicate key DVC refuses
            (root / "params.yaml").write_text(text.replace(old, new, 1))
    elif what == "extra.yaml":
        (root / "extra.yaml").write_text(EXTRA.replace("two", "three") if pick % 2 else EXTRA + "gamma: 3\n")
    elif what == "code":
        rel = ["src/a.py", "src/b.py", "src/report.py"][pick % 3]
        before = (root / rel).read_text() if (root / rel).exists() else ""
        (root / rel).write_text(before + "# an edit after dvc repro\n")
    elif what == "code deleted":
        (root / ["src/a.py", "src/b.py"][pick % 2]).unlink(missing_ok=True)
    elif what == "folder dep":
        (root / "data" / "in" / f"z{pick % 3}").write_text("z\n")
    elif what == "out":
        rel = ["out/one.txt", "out/env.json", "out/report.json", "out/prep/a"][pick % 4]
        (root / rel).write_text("tampered\n")
    elif what == "out deleted":
        (root / ["out/two.txt", "out/env.json"][pick % 2]).unlink(missing_ok=True)


LOCK_EDITS = {
    "dep entry deleted": lambda p: drop_entry("deps", p),
    "src/a.py entries deleted": lambda p: drop_path("src/a.py"),
    "out entry deleted": lambda p: drop_entry("outs", p),
    "params block deleted": lambda p: drop_params(p, whole=True),
    "params key deleted": lambda p: drop_params(p, whole=False),
    "stage deleted": drop_stage,
    "md5 changed": flip_md5,
    "recorded value changed": recorded_value,
    "cmd changed": recorded_cmd,
}
WORKSPACE = [
    *PARAM_EDITS,
    "extra.yaml",
    "code",
    "code deleted",
    "folder dep",
    "out",
    "out deleted",
    "nothing",
]
EDITS = st.lists(
    st.tuples(st.sampled_from([*LOCK_EDITS, *WORKSPACE]), st.integers(0, 1000)), min_size=1, max_size=3
)


def apply(root: Path, edits: list[tuple[str, int]]) -> None:
    for what, pick in edits:
        TRIED[what] += 1
        if what in LOCK_EDITS:
            edit_lock(root, LOCK_EDITS[what](pick))
        else:
            workspace(root, what, pick)


ISSUE_CASES = {
    "code dep entries deleted, then the code edited": [("src/a.py entries deleted", 0), ("code", 0)],
    "closed_loop's params block deleted, then new_tokens changed": [
        ("params block deleted", 3),
        ("tokens", 0),
    ],
}


@examples(ci=25, nightly=100)
@given(edits=EDITS)
@example(edits=[("nothing", 0)])
@example(edits=ISSUE_CASES["code dep entries deleted, then the code edited"])
@example(edits=ISSUE_CASES["closed_loop's params block deleted, then new_tokens changed"])
@example(edits=[("lr same value", 0), ("tokens as float", 0)])
@example(edits=[("code deleted", 0), ("code", 0)])
@example(edits=[("key added", 0), ("key added", 0)])
def test_the_gates_and_dvc_status_name_the_same_stages(project: Path, edits: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory(prefix="dvcstatus-") as tmp:
        root = Path(shutil.copytree(project, Path(tmp) / "p", symlinks=True))
        apply(root, edits)
        theirs = dvc_says(root)
        assert gates_say(root) == theirs, edits
        assert seals_exit(root) == (2 if theirs else 0), (edits, theirs)


def test_the_issue_cases_are_stale_to_both(project: Path) -> None:
    """The positive reading of the two cases: each names its stage (exit 0 before)."""
    for edits, stage in zip(ISSUE_CASES.values(), ("prep", "report"), strict=True):
        with tempfile.TemporaryDirectory(prefix="dvcstatus-") as tmp:
            root = Path(shutil.copytree(project, Path(tmp) / "p", symlinks=True))
            apply(root, edits)
            assert stage in dvc_says(root) and stage in gates_say(root)


def test_negative_control_an_absent_entry_read_as_no_constraint_disagrees(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old reading (a dep or params block dvc.lock lacks is not looked at) disagrees with DVC on the
    issue's cases: the comparison can fail."""
    path_change, param_changes = dvcstatus.path_change, dvcstatus.param_changes
    monkeypatch.setattr(dvcstatus, "path_change", lambda *a: None if a[-1] is None else path_change(*a))
    monkeypatch.setattr(dvcstatus, "param_changes", lambda *a: [] if a[3] is None else param_changes(*a))
    for edits in ISSUE_CASES.values():
        with tempfile.TemporaryDirectory(prefix="dvcstatus-") as tmp:
            root = Path(shutil.copytree(project, Path(tmp) / "p", symlinks=True))
            apply(root, edits)
            assert gates_say(root) != dvc_says(root)


INTERPOLATED = """vars:
  - suffix: txt
stages:
  listed:
    foreach: [a, b]
    do:
      cmd: echo ${item} ${net.dim} > out/${item}.${suffix}
      outs:
        - out/${item}.${suffix}
  mixed:
    foreach:
      - {name: x, n: 1}
      - y
    do:
      cmd: echo mixed ${seed}
  plain:
    cmd: python3 -c "print(${closed_loop.prompts}, ${net.lr})"
    params: [net.dim]
"""


def test_dvc_yaml_resolves_as_dvc_resolves_it(tmp_path: Path) -> None:
    """Names, commands, outs and params of foreach lists (plain and composite), `vars` and params.yaml
    interpolation, as DVC's own index gives them; `matrix` is refused by name, never guessed."""
    from dvc.repo import Repo

    from gates.reading.dvcyaml import DvcYamlError, pipeline_stages

    (tmp_path / "params.yaml").write_text(PARAMS)
    (tmp_path / "dvc.yaml").write_text(INTERPOLATED)
    dvc(tmp_path, "init", "--no-scm", "-q")
    ours = pipeline_stages(tmp_path)
    with contextlib.chdir(tmp_path), Repo(".") as repo:
        theirs = {s.addressing: s for s in repo.index.stages}
    assert sorted(ours) == sorted(theirs)
    for name, stage in theirs.items():
        assert ours[name].cmd == stage.cmd, name
        assert ours[name].out_paths == [o.def_path for o in stage.outs], name
    assert ours["plain"].params == (("params.yaml", ("net.dim",)),)
    (tmp_path / "dvc.yaml").write_text("stages:\n  m:\n    matrix: {a: [1, 2]}\n    cmd: echo ${item.a}\n")
    with pytest.raises(DvcYamlError, match="matrix"):
        pipeline_stages(tmp_path)
