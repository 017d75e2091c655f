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
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from contracts.validate import ValidationError
from gates.__main__ import main as gates_main
from gates.reading import dvcstatus, dvcyaml
from gates.reading.dvcignore import IgnoreFilter
from gates.reading.dvclock import DvcLock, LockError
from hypothesis_profiles import examples

PARAMS = """seed: 1
net:
  dim: 32
  lr: 1.0e-3
  layers: [2, 4]
closed_loop:
  new_tokens: 40
  prompts: 3
tokenizer:
  vocab: 10
  name: bpe
  flag: true
scaling:
  worlds: [1, 2]
unrelated: 7
"""
EXTRA = "alpha: 1\nbeta: two\n"
TOML = 'alpha = 1\n[table]\nbeta = "two"\n'
JSON = '{"gamma": 3, "delta": [1, 2]}\n'
PY = 'ALPHA = 1\nLAYERS = (2, 4)\nNAME = "x"\n'
DVC_YAML = """vars:
  - suffix: txt
stages:
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
  flags:
    foreach: [true, false]
    do:
      cmd: echo ${item} > out/flag_${item}.${suffix}
      outs:
        - out/flag_${item}.${suffix}
  tmpl:
    cmd: echo ${tokenizer} ${scaling.worlds[0]} \\${literal} > out/tmpl.txt
    params: [tokenizer, scaling.worlds]
    outs: [out/tmpl.txt]
  formats:
    cmd: cat extra.toml extra.json params_py.py > out/formats.txt
    params:
      - extra.toml: [alpha, table.beta]
      - extra.json:
      - params_py.py: [ALPHA, LAYERS]
    outs: [out/formats.txt]
  crlf:
    cmd: cp src/crlf.txt out/crlf.txt
    deps: [src/crlf.txt]
    outs: [out/crlf.txt]
  pilot:
    cmd: mkdir -p out/pilot/sub && echo a > out/pilot/a && echo b > out/pilot/sub/b
    outs: [out/pilot]
"""
FILES = {
    "params.yaml": PARAMS,
    "extra.yaml": EXTRA,
    "extra.toml": TOML,
    "extra.json": JSON,
    "params_py.py": PY,
    ".dvcignore": "*.tmp\n",
    "dvc.yaml": DVC_YAML,
    "src/a.py": "a = 1\n",
    "src/b.py": "b = 1\n",
    "src/crlf.txt": "one\ntwo\n",
    "src/env.py": "import json\njson.dump({'env_id': 'cpu-test'}, open('out/env.json', 'w'))\n",
    "src/report.py": "import json\njson.dump({'ok': 1}, open('out/report.json', 'w'))\n",
    "data/in/x": "x\n",
    "data/in/y": "y\n",
}
LEGACY = ("src/crlf.txt", "out/crlf.txt")  # recorded as DVC 2 wrote them: no `hash: md5` (md5-dos2unix)
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1"}
TRIED: Counter[str] = Counter()


def dvc(root: Path, *args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True, text=True, env=ENV
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def as_dvc2(root: Path) -> None:
    """The LEGACY entries of dvc.lock as DVC 2 wrote them: no `hash: md5` (their files are LF: the md5 is
    the same either way)."""
    path = root / "dvc.lock"
    lock = yaml.safe_load(path.read_text())
    for body in lock["stages"].values():
        for entry in (body.get("deps") or []) + (body.get("outs") or []):
            if entry["path"] in LEGACY:
                entry.pop("hash")
    path.write_text(yaml.safe_dump(lock, sort_keys=False))


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
    as_dvc2(root)
    started = time.monotonic()
    yield root
    record(time.monotonic() - started)


def record(seconds: float) -> None:
    """What the property tried (printed; written as JSON to $DVC_STATUS_RECORD when set)."""
    summary = {"edits": RUNS["edits"], "mismatches": RUNS["mismatches"], "seconds": round(seconds, 1),
               "refused_by_both": RUNS["refused"], "stale_by_both": RUNS["stale"], "kinds": dict(sorted(TRIED.items()))}  # fmt: skip
    print(f"\ndvc status property: {json.dumps(summary)}")
    if os.environ.get("DVC_STATUS_RECORD"):
        Path(os.environ["DVC_STATUS_RECORD"]).write_text(json.dumps(summary, indent=1) + "\n")


REFUSED = "(refused)"


def dvc_says(root: Path) -> tuple[set[str], set[str]]:
    """The stages `dvc status` lists (`changed`), and the frozen stages whose deps or params DVC finds
    changed once unfrozen; ({REFUSED}, set()) when DVC refuses the project."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo
    from dvc_data.hashfile.build import IgnoreInCollectedDirError

    try:
        with contextlib.chdir(root), Repo(".") as repo:  # DVC names stages relative to the cwd
            found = repo.status()
            recorded = set((yaml.safe_load((root / "dvc.lock").read_text()) or {}).get("stages") or {})
            with repo.lock:  # a stage's status reads under the repo's lock
                stages = {s.addressing: s for s in repo.index.stages}
                stale = {name for name, what in found.items() if any(changed(w, stages[name]) for w in what)}
                # a frozen stage dvc.lock does not record is the seals' partial lock (an error of its own)
                thawed = {name for name, s in stages.items() if s.frozen and name in recorded and unfrozen(s)}
    except (DvcException, IgnoreInCollectedDirError, TypeError) as e:  # TypeError: a value type refused
        return {REFUSED}, {type(e).__name__}
    return stale, thawed


def unfrozen(stage: Any) -> bool:  # DVC's Stage
    """DVC's status of a frozen stage's deps, once it is unfrozen."""
    stage.frozen = False
    return any(isinstance(w, dict) and "changed deps" in w for w in stage.status().get(stage.addressing, []))


def changed(what: str | dict, stage: Any) -> bool:  # stage: DVC's Stage
    """One item of DVC's status that says the artifacts are not this tree's: not "always changed" (DVC's
    design), and an out "not in cache" only where DVC's own workspace status of it differs from dvc.lock
    (DVC reports a missing cache object first; the gates hold the out to dvc.lock, not to the cache, and
    DVC 2 entries are looked up in DVC 2's cache layout)."""
    if what == "always changed":
        return False
    outs = what.get("changed outs", {}) if isinstance(what, dict) else {}
    if not outs or set(what) != {"changed outs"}:
        return True
    cached = {name for name, state in outs.items() if state == "not in cache"}
    return len(cached) < len(outs) or any(o.workspace_status() for o in stage.outs if str(o) in cached)


def gates_say(root: Path) -> tuple[set[str], set[str]]:
    try:
        lock = DvcLock.read(root)
        unrecorded = {s for s in lock.definitions if s not in lock.stages}
        stages = sorted(lock.definitions)
        stale = set(dvcstatus.status(lock, stages)) | unrecorded
        return stale, {s for s, changes in dvcstatus.frozen(lock, stages).items() if changes}
    except (LockError, ValidationError) as e:
        return {REFUSED}, {str(e)}


def agree(ours: tuple[set[str], set[str]], theirs: tuple[set[str], set[str]]) -> bool:
    """The same stale stages and frozen stages changed, or both refuse the project."""
    return ours[0] == theirs[0] and (REFUSED in ours[0] or ours[1] == theirs[1])


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


def entries(stages: dict) -> list[dict]:
    return [e for b in stages.values() for k in ("deps", "outs") for e in b.get(k) or []]


def flip_md5(pick: int) -> Callable[[dict], None]:
    def change(stages: dict) -> None:
        e = entries(stages)[pick % len(entries(stages))]
        e["md5"] = ("0" if e["md5"][0] != "0" else "1") + e["md5"][1:]

    return change


def as_legacy(pick: int) -> Callable[[dict], None]:
    """One entry as DVC 2 wrote it (no `hash: md5`): DVC 3 then hashes it as md5-dos2unix."""

    def change(stages: dict) -> None:
        entries(stages)[pick % len(entries(stages))].pop("hash", None)

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


PARAM_EDITS = {  # (file, old, new); some keep the value (1.0e-3 is 0.001; 40.0 == 40 to DVC)
    "dim": ("params.yaml", "dim: 32", "dim: 33"),
    "lr same value": ("params.yaml", "lr: 1.0e-3", "lr: 0.001"),
    "lr": ("params.yaml", "lr: 1.0e-3", "lr: 2e-3"),
    "tokens": ("params.yaml", "new_tokens: 40", "new_tokens: 41"),
    "tokens as float": ("params.yaml", "new_tokens: 40", "new_tokens: 40.0"),
    "prompts deleted": ("params.yaml", "  prompts: 3\n", ""),
    "unrelated": ("params.yaml", "unrelated: 7", "unrelated: 8"),
    "seed": ("params.yaml", "seed: 1", "seed: 2"),
    "list": ("params.yaml", "layers: [2, 4]", "layers: [2, 4, 8]"),
    "key added": ("params.yaml", "unrelated: 7", "unrelated: 7\nadded: 1"),
    "dict in cmd": ("params.yaml", "vocab: 10", "vocab: 11"),  # ${tokenizer} is written into tmpl's cmd
    "bool in cmd": ("params.yaml", "flag: true", "flag: false"),
    "worlds[0]": ("params.yaml", "worlds: [1, 2]", "worlds: [3, 2]"),
    "worlds[1]": ("params.yaml", "worlds: [1, 2]", "worlds: [1, 5]"),
    "toml": ("extra.toml", "alpha = 1", "alpha = 2"),
    "toml same value": ("extra.toml", "alpha = 1", "alpha = 1.0"),
    "toml table": ("extra.toml", 'beta = "two"', 'beta = "three"'),
    "json": ("extra.json", '"gamma": 3', '"gamma": 4'),
    "json same value": ("extra.json", '"gamma": 3', '"gamma": 3.0'),
    "json key added": ("extra.json", '"gamma": 3', '"gamma": 3, "eps": 1'),
    "py": ("params_py.py", "ALPHA = 1", "ALPHA = 2"),
    "py tuple as a list": ("params_py.py", "LAYERS = (2, 4)", "LAYERS = [2, 4]"),
    "py tuple": ("params_py.py", "LAYERS = (2, 4)", "LAYERS = (2, 5)"),
    "py unread": ("params_py.py", 'NAME = "x"', 'NAME = "y"'),
}
YAML_EDITS = {  # (old, new) in dvc.yaml: forms DVC accepts, and forms it refuses (both must refuse)
    "frozen": ("  prep:\n", "  prep:\n    frozen: true\n"),
    "frozen in a foreach": (
        "    do:\n      cmd: ${item.cmd}",
        "    do:\n      frozen: true\n      cmd: ${item.cmd}",
    ),
    "frozen pilot": ("  pilot:\n", "  pilot:\n    frozen: true\n"),
    "always changed": ("  crlf:\n", "  crlf:\n    always_changed: true\n"),
    "cache 'no' (refused)": ("outs: [out/prep]", "outs: [{out/prep: {cache: 'no'}}]"),
    "cache false": ("outs: [out/tmpl.txt]", "outs: [{out/tmpl.txt: {cache: false}}]"),
    "frozen beside foreach (refused)": (
        "    foreach: [true, false]\n",
        "    foreach: [true, false]\n    frozen: true\n",
    ),
    "vars redefines params (refused)": ("  - suffix: txt\n", "  - suffix: txt\n    seed: 9\n"),
    "vars redefines a nested key (refused)": ("  - suffix: txt\n", "  - suffix: txt\n    net: {dim: 1}\n"),
    "vars adds a key": ("  - suffix: txt\n", "  - suffix: txt\n    fresh: 1\n"),
    "escaped literal": ("\\${literal}", "\\${other}"),
    "list in a path (refused)": ("out/tmpl.txt]", "out/${scaling.worlds}.txt]"),
    "unknown name (refused)": ("${scaling.worlds[0]}", "${scaling.nothing}"),
    "bad expression (refused)": ("${scaling.worlds[0]}", "${scaling..worlds}"),
    "stage deleted": (
        "  pilot:\n    cmd: mkdir -p out/pilot/sub && echo a > out/pilot/a && echo b > out/pilot/sub/b\n    outs: [out/pilot]\n",
        "",
    ),
}
IGNORE_EDITS = {  # files under the folder out out/pilot and .dvcignore rules (dvc/ignore.py)
    ".git file": [("out/pilot/.git", "gitdir: x\n")],
    ".git folder": [("out/pilot/sub/.git/HEAD", "ref\n")],
    ".hg folder": [("out/pilot/.hg/store", "x\n")],
    ".dvc folder": [("out/pilot/.dvc/f", "x\n")],
    "nested project": [("out/pilot/nested/.dvc/config", ""), ("out/pilot/nested/f", "f\n")],
    "ignored file": [("out/pilot/junk.tmp", "junk\n")],
    "file added": [("out/pilot/new", "new\n")],
    "rule names an out's file": [(".dvcignore", "*.tmp\nout/pilot/a\n")],
    "rule above the out": [("out/.dvcignore", "pilot/sub/b\n")],
    "negated rule": [(".dvcignore", "*.tmp\n!keep.tmp\n"), ("out/pilot/keep.tmp", "k\n")],
    ".dvcignore in the out (refused)": [("out/pilot/.dvcignore", "a\n")],
    "rule ignores a file out (refused)": [(".dvcignore", "*.tmp\nout/tmpl.txt\n")],
}


def crlf(root: Path, pick: int) -> None:
    """A text dep written with CRLF: a DVC 2 entry (src/crlf.txt) hashes it as LF, a DVC 3 one does not."""
    rel = ["src/crlf.txt", "src/a.py", "data/in/x"][pick % 3]
    path = root / rel
    path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))


def workspace(root: Path, what: str, pick: int) -> None:
    if what in PARAM_EDITS:
        name, old, new = PARAM_EDITS[what]
        text = (root / name).read_text()
        if not (new and new in text):  # once only: a second `added: 1` is a duplicate key DVC refuses
            (root / name).write_text(text.replace(old, new, 1))
    elif what in YAML_EDITS:
        old, new = YAML_EDITS[what]
        text = (root / "dvc.yaml").read_text()
        if not (new and new in text):
            (root / "dvc.yaml").write_text(text.replace(old, new, 1))
    elif what in IGNORE_EDITS:
        for rel, text in IGNORE_EDITS[what]:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    elif what == "crlf":
        crlf(root, pick)
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
        rel = ["out/one.txt", "out/env.json", "out/report.json", "out/prep/a", "out/pilot/a"][pick % 5]
        (root / rel).write_text("tampered\n")
    elif what == "out deleted":
        (root / ["out/two.txt", "out/env.json", "out/flag_true.txt"][pick % 3]).unlink(missing_ok=True)


LOCK_EDITS = {
    "dep entry deleted": lambda p: drop_entry("deps", p),
    "src/a.py entries deleted": lambda p: drop_path("src/a.py"),
    "out entry deleted": lambda p: drop_entry("outs", p),
    "params block deleted": lambda p: drop_params(p, whole=True),
    "params key deleted": lambda p: drop_params(p, whole=False),
    "stage deleted": drop_stage,
    "md5 changed": flip_md5,
    "entry as DVC 2 wrote it": as_legacy,
    "recorded value changed": recorded_value,
    "cmd changed": recorded_cmd,
}
WORKSPACE = [
    *PARAM_EDITS,
    *YAML_EDITS,
    *IGNORE_EDITS,
    "crlf",
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
RUNS: Counter[str] = Counter()


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
ISSUE_51 = {  # issue #51's staleness cases, each a form where the gates and `dvc status` disagreed
    "a CRLF dep with a DVC 2 entry": [("crlf", 0)],
    "a DVC 2 entry of a file with CRLF (its md5 recorded raw)": [("crlf", 1), ("entry as DVC 2 wrote it", 0)],
    "a rule naming a file of an out": [("rule names an out's file", 0)],
    ".dvcignore inside an out (refused)": [(".dvcignore in the out (refused)", 0)],
    ".git inside an out": [(".git file", 0)],
    ".hg inside an out": [(".hg folder", 0)],
    "an ignored file inside an out": [("ignored file", 0)],
    "cache: 'no' (refused)": [("cache 'no' (refused)", 0)],
    "foreach [true, false] named x@true": [("nothing", 0)],
    "a dict in a cmd": [("dict in cmd", 0)],
    "an escaped ${literal}": [("escaped literal", 0)],
    "${scaling.worlds[0]}": [("worlds[0]", 0)],
    "vars redefining a params key (refused)": [("vars redefines params (refused)", 0)],
    "params from a .toml file": [("toml", 0)],
    "params from a .py file": [("py", 0)],
    "params from a .json file": [("json", 0)],
    "frozen": [("frozen", 0), ("seed", 0)],
    "always_changed": [("always changed", 0)],
}


# on demand, the full run (docs/verdicts.md): DVC_STATUS_EDITS=500 DVC_STATUS_RECORD=summary.json
EDIT_COUNT = os.environ.get("DVC_STATUS_EDITS")
SAMPLE = examples(ci=25, nightly=100)


@(settings(SAMPLE, max_examples=int(EDIT_COUNT)) if EDIT_COUNT else SAMPLE)
@given(edits=EDITS)
@example(edits=[("nothing", 0)])
@example(edits=ISSUE_CASES["code dep entries deleted, then the code edited"])
@example(edits=ISSUE_CASES["closed_loop's params block deleted, then new_tokens changed"])
@example(edits=[("lr same value", 0), ("tokens as float", 0)])
@example(edits=[("code deleted", 0), ("code", 0)])
@example(edits=[("key added", 0), ("key added", 0)])
@example(edits=[(".dvc folder", 0)])  # the first 500-edit run: an out holding .dvc was refused as ignored
@example(edits=[("stage deleted", 9), ("frozen in a foreach", 0)])  # the second: a frozen stage unrecorded
@example(edits=[("md5 changed", 487)])  # the third: an out's recorded md5 changed (DVC: "not in cache" first)
def test_the_gates_and_dvc_status_name_the_same_stages(project: Path, edits: list[tuple[str, int]]) -> None:
    compare(project, edits)


def compare(project: Path, edits: list[tuple[str, int]]) -> None:
    """On a copy of the project with `edits`: the same stale stages as `dvc status` (or both refuse), the
    same frozen stages changed, and `gates check --only seals` exits 2 exactly when either is not empty."""
    with tempfile.TemporaryDirectory(prefix="dvcstatus-") as tmp:
        root = Path(shutil.copytree(project, Path(tmp) / "p", symlinks=True))
        apply(root, edits)
        theirs, thawed = dvc_says(root)
        ours, frozen = gates_say(root)
        RUNS["edits"] += 1
        same = agree((ours, frozen), (theirs, thawed))
        RUNS["mismatches"] += not same
        assert same, (edits, ours, theirs, frozen, thawed)
        RUNS["refused"] += REFUSED in ours
        RUNS["stale"] += bool(ours) and REFUSED not in ours
        assert seals_exit(root) == (2 if theirs or thawed else 0), (edits, theirs, thawed)


@pytest.mark.parametrize("case", sorted(ISSUE_51))
def test_issue_51_staleness_cases_agree_with_dvc(project: Path, case: str) -> None:
    compare(project, ISSUE_51[case])


def test_the_issue_cases_are_stale_to_both(project: Path) -> None:
    """The positive reading of the two cases: each names its stage (exit 0 before)."""
    for edits, stage in zip(ISSUE_CASES.values(), ("prep", "report"), strict=True):
        with tempfile.TemporaryDirectory(prefix="dvcstatus-") as tmp:
            root = Path(shutil.copytree(project, Path(tmp) / "p", symlinks=True))
            apply(root, edits)
            assert stage in dvc_says(root)[0] and stage in gates_say(root)[0]


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
            assert gates_say(root)[0] != dvc_says(root)[0]


def old_md5(self: DvcLock, rel: str, legacy: bool = False) -> str:
    return OLD_MD5(self, rel)  # every entry hashed raw: a DVC 2 entry's CRLF file looks changed


def old_listing(self: IgnoreFilter, folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in Path(folder).rglob("*") if p.is_file())


def old_parsed(path: Path, suffix: str) -> None:
    raise ValidationError(str(path), "", "a params file the gates read only as YAML or JSON")


OLD_MD5 = DvcLock.md5
OLD_RULES = {  # the rule as it was on main 52a4e5f, re-planted: (what it replaces, the old one, a case)
    "raw md5 for a DVC 2 entry": (DvcLock, "md5", old_md5, ISSUE_51["a CRLF dep with a DVC 2 entry"]),
    "no ignore rules": (IgnoreFilter, "files", old_listing, ISSUE_51[".git inside an out"]),
    "str() names foreach keys": (dvcyaml, "to_str", lambda v, config=None: str(v), ISSUE_51["foreach [true, false] named x@true"]),
    "no DVC schema": (dvcyaml, "check", lambda *a: None, ISSUE_51["cache: 'no' (refused)"]),
    "YAML or JSON params only": (dvcstatus, "dvc_parsed", old_parsed, ISSUE_51["params from a .toml file"]),
}  # fmt: skip


@pytest.mark.parametrize("rule", sorted(OLD_RULES))
def test_negative_control_each_old_rule_replanted_disagrees_with_dvc(
    project: Path, monkeypatch: pytest.MonkeyPatch, rule: str
) -> None:
    """Each new rule is what makes its case agree: with the old one back, the comparison fails."""
    owner, name, old, edits = OLD_RULES[rule]
    with tempfile.TemporaryDirectory(prefix="dvcstatus-") as tmp:
        root = Path(shutil.copytree(project, Path(tmp) / "p", symlinks=True))
        apply(root, edits)
        theirs = dvc_says(root)
        assert agree(gates_say(root), theirs)  # the rule as it is now
        monkeypatch.setattr(owner, name, old)
        assert not agree(gates_say(root), theirs), rule


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
