"""Issue #36 item 4: one YAML dialect. The project reads YAML as DVC does (ruamel.yaml, YAML 1.2), and
its strict loader refuses the plain forms whose YAML 1.1 reading is another value, so a value can
never mean two things (before: `new_tokens: 040` was 32 to the gates and 40 to DVC: "stale" forever).
Names are checked with fullmatch (a trailing newline passed `re.match(r"...$")`).
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from conftest import PARAMS, REPO
from contracts import yamlfile
from contracts.validate import ValidationError
from params.config import load_params, parse_override, set_in_file

RUAMEL = YAML(typ="safe")  # what DVC's parse_yaml uses

# the pieces plain scalars that look like numbers, booleans and nulls are made of
ATOMS = [
    "0",
    "1",
    "7",
    "8",
    "9",
    "00",
    "07",
    "08",
    "_",
    ".",
    ":",
    "e",
    "E",
    "+",
    "-",
    "0b",
    "0o",
    "0x",
    "f",
    "1e",
    "e-",
]
WORDS = ["yes", "Yes", "YES", "no", "No", "on", "ON", "off", "Off", "y", "Y", "n", "N", "true", "True", "FALSE",
         "null", "Null", "~", ".inf", "-.Inf", ".nan", ".NaN", "nan", "2001-12-14", "="]  # fmt: skip
SCALARS = st.one_of(
    st.lists(st.sampled_from(ATOMS), min_size=1, max_size=6).map("".join),
    st.sampled_from(WORDS),
    st.text("0123456789_.:+-eEoxb", min_size=1, max_size=8),
)


def reading(load: Any, text: str) -> tuple[str, Any]:
    try:
        return "ok", load(f"k: {text}\n")["k"]
    except Exception as e:  # a parse or construct error of any of the three libraries
        return "error", type(e).__name__


def same(a: Any, b: Any) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return type(a) is type(b) and (a == b or both_nan)


def one_meaning(load: Any, text: str) -> bool:
    """The property: `load` refuses `text`, or reads what DVC reads and what YAML 1.1 reads (where
    YAML 1.1 can read it: its float syntax lacks `1e-3`, which it keeps as a string)."""
    ours = reading(load, text)
    if ours[0] == "error":
        return True
    dvc, v11 = reading(RUAMEL.load, text), reading(yaml.safe_load, text)
    if dvc[0] != "ok" or not same(ours[1], dvc[1]):
        return False
    return (
        v11[0] == "error" or same(v11[1], ours[1]) or (isinstance(v11[1], str) and isinstance(ours[1], float))
    )


@given(SCALARS)
@example("040")
@example("yes")
@example("1:20")
@example("0o17")
@example("1e-06")
@example("+.5")
@example("-_9")
def test_the_strict_loader_reads_one_meaning_or_refuses(text: str) -> None:
    assert one_meaning(yamlfile.loads, text), (
        text,
        reading(yamlfile.loads, text),
        reading(RUAMEL.load, text),
    )


@given(SCALARS)
@example("040")
@example("1e-06")
@example("._5")
@example("+_")
@example("-_9")
def test_dvcs_files_are_read_as_dvc_reads_them(text: str) -> None:
    """dvc.yaml and dvc.lock (libyaml, DVC's resolution): every value as ruamel gives it, or an error
    where ruamel errs too."""
    dvc = reading(RUAMEL.load, text)
    for load in (
        lambda t: yamlfile.load_pipeline_text(t, "dvc.lock"),
        lambda t: yaml.load(t, yamlfile.DvcLoader),
    ):
        ours = reading(load, text)
        assert ours[0] == dvc[0] and (ours[0] == "error" or same(ours[1], dvc[1])), (text, ours, dvc)


@pytest.mark.parametrize("text", ["040", "yes", "1:20", "1e-3"])
def test_negative_control_pyyaml_alone_has_two_meanings(text: str) -> None:
    """The property fails PyYAML's own loader (YAML 1.1) on the issue's forms, and a loader with DVC's
    resolution but no refusal on the octal-looking one: the property can fail."""
    assert not one_meaning(yaml.safe_load, text)
    if text in ("040", "yes", "1:20"):
        assert not one_meaning(lambda t: yaml.load(t, yamlfile.DvcLoader), text)


def params_with(tmp_path: Path, old: str, new: str) -> Path:
    text = PARAMS.read_text()
    assert old in text
    path = tmp_path / "params.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_an_octal_looking_params_value_is_one_line_naming_the_line(tmp_path: Path) -> None:
    """The issue's loop: 32 to the gates, 40 to DVC. Now neither: exit 2 naming file, line and fix."""
    path = params_with(tmp_path, "new_tokens: 32", "new_tokens: 040")
    with pytest.raises(ValidationError) as e:
        load_params(path)
    line = next(i for i, x in enumerate(path.read_text().splitlines(), 1) if "040" in x)
    assert f"line {line}" in str(e.value) and "'040' is an octal number in YAML 1.1 but 40 to DVC" in str(
        e.value
    )
    proc = subprocess.run(
        [sys.executable, "-m", "gates", "--params", str(path), "list"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "040" in proc.stderr


def test_a_1_2_float_reads_as_dvc_reads_it(tmp_path: Path) -> None:
    """`1e-3` (a string to YAML 1.1) is the float DVC reads: the positive control of the dialect."""
    path = params_with(tmp_path, "lr: 3.0e-3", "lr: 3e-3")
    assert load_params(path)["train"]["lr"] == 3e-3


@pytest.mark.parametrize("value", ["yes", "on", "1:20", "08"])
def test_ambiguous_forms_in_params_are_refused(tmp_path: Path, value: str) -> None:
    path = params_with(tmp_path, "deterministic: true", f"deterministic: {value}")
    with pytest.raises(ValidationError, match=r"in YAML 1\.1 but"):
        load_params(path)


def test_a_set_value_is_read_as_dvc_reads_it() -> None:
    assert parse_override("train.lr=1e-3")[1] == 1e-3
    assert parse_override("data.path=.5e3")[1] == ".5e3"  # a string to DVC too
    with pytest.raises(ValidationError, match=r"octal number in YAML 1\.1"):
        parse_override("closed_loop.new_tokens=040")


def test_a_directive_is_refused() -> None:
    with pytest.raises(yamlfile.Refused, match="directive"):
        yamlfile.loads("%YAML 1.1\n---\nk: yes_please\n")


def test_config_set_edits_a_symlinked_params_file_in_place(tmp_path: Path) -> None:
    """The link stays a link (before: `config set` replaced it with a file)."""
    real = params_with(tmp_path, "steps: 12 ", "steps: 12 ")
    link = tmp_path / "linked.yaml"
    link.symlink_to(real)
    set_in_file(link, ["train.steps=20"])
    assert link.is_symlink() and load_params(real)["train"]["steps"] == 20


@pytest.mark.parametrize("name", ["tiny\n", "tiny\nx", "Tiny", "tiny/../x"])
def test_registry_names_are_whole_matches(name: str) -> None:
    """A trailing newline passed `re.match(r"^...$")` (a pinned folder named "tiny\\n" validated)."""
    from registry.checks import check_name

    with pytest.raises(ValidationError):
        check_name(name, "pin", "model")
    assert check_name("tiny", "pin", "model") == "tiny"


def test_registry_version_files_are_whole_matches() -> None:
    from registry.index import TEMP
    from registry.store import VERSION_FILE

    assert VERSION_FILE.fullmatch("v1.json") and not VERSION_FILE.fullmatch("v1.json\n")
    assert TEMP.fullmatch(".v1.json.x.tmp") and not TEMP.fullmatch(".v1.json.x.tmp\n")


def test_schema_patterns_match_whole_strings(tmp_path: Path) -> None:
    """JSON Schema's `$` (ECMA-262) ends the string; Python's also matched before a trailing newline,
    so `export.pinned_model: "tiny\\n"` passed params.schema.json's `^[a-z0-9_-]{1,64}$`."""
    from contracts.validate import validate

    schema = {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"}
    validate("tiny", schema, "params.yaml")
    with pytest.raises(ValidationError, match="pattern"):
        validate("tiny\n", schema, "params.yaml")
    path = params_with(tmp_path, "pinned_model: xtrain-tiny", 'pinned_model: "xtrain-tiny\\n"')
    with pytest.raises(ValidationError, match=r"export\.pinned_model"):  # the real schema, the one loader
        load_params(path)
