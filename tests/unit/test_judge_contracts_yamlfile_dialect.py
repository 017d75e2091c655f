"""contracts/yamlfile.py speak_dvc under mutation (docs/judge-mutation.md), in-process.

speak_dvc runs when the module is imported (it decorates the loaders), so no test reached it: here
it turns a fresh PyYAML loader into DVC's dialect, and each plain scalar must read as YAML 1.2
(ruamel, what DVC reads) reads it, not as YAML 1.1 (PyYAML's default).
"""

from __future__ import annotations

import datetime
import math

import pytest
import yaml

from contracts.yamlfile import speak_dvc


@pytest.fixture(scope="module")
def loader() -> type:
    fresh = type("Fresh", (yaml.SafeLoader,), {})
    assert speak_dvc(fresh) is fresh
    return fresh


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("040", 40),  # octal to YAML 1.1 (32)
        ("-040", -40),
        ("0o17", 15),
        ("0b101", 5),
        ("0x1F", 31),
        ("1_000", 1000),
        ("+7", 7),
        ("yes", "yes"),  # a boolean to YAML 1.1
        ("on", "on"),
        ("y", "y"),
        ("true", True),
        ("FALSE", False),
        ("1e-6", 1e-6),  # a string to YAML 1.1
        ("1.5", 1.5),
        ("-.5", -0.5),
        (".inf", math.inf),
        ("-.Inf", -math.inf),
        ("~", None),
        ("null", None),
        ("", None),
        ("2001-12-14", datetime.date(2001, 12, 14)),
        ("1:30", "1:30"),  # base 60 to YAML 1.1 (90)
        ("abc", "abc"),
    ],
)
def test_a_plain_scalar_reads_as_dvc_reads_it(loader: type, text: str, value) -> None:
    got = yaml.load(f"v: {text}\n", Loader=loader)["v"]
    assert got == value and type(got) is type(value)


def test_nan_reads_as_a_float(loader: type) -> None:
    got = yaml.load("v: .nan\n", Loader=loader)["v"]
    assert isinstance(got, float) and math.isnan(got)


def test_a_quoted_scalar_stays_a_string(loader: type) -> None:
    assert yaml.load("v: '040'\n", Loader=loader)["v"] == "040"


def test_the_original_loader_keeps_yaml_1_1(loader: type) -> None:
    assert yaml.load("v: 040\nw: yes\n", Loader=yaml.SafeLoader) == {"v": 32, "w": True}


def test_resolvers_are_indexed_by_their_first_characters(loader: type) -> None:
    """As ruamel's table: a scalar is tried only against the patterns its first character can start."""
    firsts = set(loader.yaml_implicit_resolvers)
    assert firsts == set("tTfF-+0123456789.<~nN=") | {""}
    assert [tag for tag, _ in loader.yaml_implicit_resolvers["t"]] == ["tag:yaml.org,2002:bool"]
