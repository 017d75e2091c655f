"""Property (issue #27): any edit of params.yaml gives a valid config or one line naming the file,
and never changes the tree.

Edits are generated from the real params.yaml: random key paths (leaves and sections), random
values of random types (huge, negative and non-finite numbers, strings, lists, mappings, null),
deletions, unknown keys, duplicate keys, anchors and aliases. Most examples run in-process
(`load_params`, what every command calls); a few run `python -m pipeline.config show` itself.

CI runs the `ci` profile (50 in-process examples, 25 `config set`, 5 subprocess);
HYPOTHESIS_PROFILE=nightly (ci/nightly-gpu.sh sets it) runs 500 / 250 / 50.
A failure found is kept below as an @example.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from conftest import REPO
from contracts.errors import XtrainError
from hypothesis_profiles import examples
from params.config import load_params, set_in_file

TEXT = (REPO / "params.yaml").read_text()
BASE = yaml.safe_load(TEXT)


def key_paths(node: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((*prefix, str(k)))
            out.extend(key_paths(v, (*prefix, str(k))))
    return out


PATHS = key_paths(BASE)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30, -(10**30)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 5e-324]),
    st.text(max_size=20),
    st.sampled_from(["cpu", "cuda", "gpu", "fp32", "bf16", "thread", "proc", "", "..", "/dev/zero"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def set_path(d: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = d
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[path[-1]] = value


def delete_path(d: dict[str, Any], path: tuple[str, ...]) -> None:
    node: Any = d
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


@st.composite
def dict_edits(draw: st.DrawFn) -> str:
    """1-3 structural edits of the parsed file, dumped back to YAML."""
    raw = yaml.safe_load(TEXT)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        kind = draw(st.sampled_from(["set", "set", "set", "delete", "unknown"]))
        if kind == "set":
            set_path(raw, path, draw(values))
        elif kind == "delete":
            delete_path(raw, path)
        else:
            set_path(raw, (*path[:-1], draw(st.text(min_size=1, max_size=10))), draw(values))
    return yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)


KEY_LINES = [
    i for i, line in enumerate(TEXT.splitlines()) if ":" in line and not line.lstrip().startswith("#")
]


@st.composite
def text_edits(draw: st.DrawFn) -> str:
    """Edits only text can make: a duplicated key line, an anchor, an alias, a merge key, a raw value."""
    lines = TEXT.splitlines()
    i = draw(st.sampled_from(KEY_LINES))
    line = lines[i]
    indent = line[: len(line) - len(line.lstrip())]
    key = line.split(":", 1)[0].strip()
    kind = draw(st.sampled_from(["duplicate", "anchor", "alias", "merge", "raw"]))
    if kind == "duplicate":
        lines.insert(i + 1, line)
    elif kind == "anchor":
        lines[i] = f"{indent}{key}: &a {line.split(':', 1)[1].strip() or '{}'}"
    elif kind == "alias":
        lines[i] = f"{indent}{key}: *a"
    elif kind == "merge":
        lines.insert(i + 1, f"{indent}<<: {{x: 1}}")
    else:
        raw = draw(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30))
        lines[i] = f"{indent}{key}: {raw}"
    return "\n".join(lines) + "\n"


edits = st.one_of(dict_edits(), text_edits())


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def check_in_process(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.yaml"
        path.write_text(text, encoding="utf-8")
        before = snapshot(Path(tmp))
        try:
            params = load_params(path)
        except XtrainError as e:
            message = str(e)
            assert "\n" not in message and message.startswith(str(path)), message
            assert getattr(e, "exit_code", None) == 2, message
        else:
            yaml.safe_dump(params.raw, sort_keys=False)  # what `config show` prints
            assert params.raw["train"]["steps"] <= 10_000_000
        assert snapshot(Path(tmp)) == before


@examples(ci=50, nightly=500)
@given(edits)
@example("seed: 1\nseed: 2\n")
@example(TEXT.replace("profile: cpu", "profile: \x1f"))  # found: the YAML reader's message spanned 2 lines
@example(TEXT.replace("  cpu: {}", "  cpu: {}\n  'a\\nb': 1"))  # a key with a newline in an unknown-key error
@example(TEXT.replace("profile: cpu", "profile: &p cpu\nx: *p"))
@example(TEXT.replace("  steps: 160", "  steps: 2001-12-14"))  # a date: JSON cannot print it
@example(TEXT.replace("  cpu: {}", "  cpu: {}\n  1: {}"))  # a non-string key beside string keys
@example(TEXT.replace("  cpu: {}", "  cpu: {train: {1: 2, a: 3}}"))  # mixed keys in an unknown-key error
def test_any_params_edit_is_valid_or_one_line(text: str) -> None:
    check_in_process(text)


@st.composite
def overrides(draw: st.DrawFn) -> str:
    path = draw(st.sampled_from([p for p in PATHS if p[0] != "profiles"]))
    value = draw(values)
    return (
        ".".join(path)
        + "="
        + yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()
    )


@examples(ci=25, nightly=250)
@given(st.lists(overrides(), min_size=1, max_size=3))
@example(["seed=[&a 1, *a]"])
def test_config_set_writes_a_valid_file_or_nothing(sets: list[str]) -> None:
    """`config set`: a refused edit leaves the file byte-identical; an accepted one loads again."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.yaml"
        path.write_text(TEXT)
        try:
            set_in_file(path, sets)
        except XtrainError as e:
            assert "\n" not in str(e) and str(e).startswith(str(path)), str(e)
            assert path.read_text() == TEXT
        else:
            load_params(path)


@examples(ci=5, nightly=50)
@given(edits)
def test_config_show_on_random_edits_is_a_config_or_one_line(text: str) -> None:
    """The command itself, a few times: exit 0 with YAML, or exit 2 with one line naming the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.yaml"
        path.write_text(text, encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}
        proc = subprocess.run(
            [sys.executable, "-m", "pipeline.config", "--params", str(path), "show"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        if proc.returncode == 0:
            assert isinstance(yaml.safe_load(proc.stdout), dict)
        else:
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
            assert lines[0].startswith(f"error: {path}"), lines[0]
        assert path.read_text(encoding="utf-8") == text
