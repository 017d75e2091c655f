"""contracts/validate.py and contracts/errors.py under mutation (docs/judge-mutation.md).

Every refusal of a bad file is one line naming the file, the key and the rule: each JSON Schema
keyword's rule text, the key path (nested, list index, unknown and missing keys), strict integers and
finite numbers, unreadable files, and the error path commands print them through.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from contracts import errors
from contracts.errors import FileWriteError, XtrainError, cli, debug, exit_code, one_line, report
from contracts.validate import ValidationError, load_json, load_schema, validate

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "count"],
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
        "count": {"type": "integer", "minimum": 1, "maximum": 9},
        "rate": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "kind": {"enum": ["a", "b"]},
        "fmt": {"const": "x/1"},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": ["string", "null"]}},
        "sub": {"type": "object", "additionalProperties": False, "required": ["k"], "properties": {"k": {"type": "integer"}}},
        "open": {"type": "object", "additionalProperties": False},
        "any": {"not": {"type": "null"}},
    },
}  # fmt: skip


def refusal(instance, strict: bool = False) -> str:
    with pytest.raises(ValidationError) as e:
        validate(instance, SCHEMA, "f.json", strict)
    return str(e.value)


GOOD = {"name": "ab", "count": 3}


@pytest.mark.parametrize(
    ("change", "text"),
    [
        ({"extra": 1}, "f.json: extra: unknown key (rule: known keys: any, count, fmt, kind, name, open, rate, sub, tags)"),
        ({"name": "a"}, 'f.json: name: "a" is invalid (rule: minLength 2)'),
        ({"name": "abcdef"}, 'f.json: name: "abcdef" is invalid (rule: maxLength 5)'),
        ({"name": "AB"}, 'f.json: name: "AB" is invalid (rule: pattern "^[a-z]+$")'),
        ({"name": 3}, "f.json: name: 3 is invalid (rule: type string)"),
        ({"count": 0}, "f.json: count: 0 is invalid (rule: >= 1)"),
        ({"count": 10}, "f.json: count: 10 is invalid (rule: <= 9)"),
        ({"rate": 0}, "f.json: rate: 0 is invalid (rule: > 0)"),
        ({"rate": 1}, "f.json: rate: 1 is invalid (rule: < 1)"),
        ({"kind": "c"}, 'f.json: kind: "c" is invalid (rule: one of "a", "b")'),
        ({"fmt": "x/2"}, 'f.json: fmt: "x/2" is invalid (rule: exactly "x/1")'),
        ({"tags": []}, "f.json: tags: [] is invalid (rule: minItems 1)"),
        ({"tags": ["a", "b", "c"]}, 'f.json: tags: ["a", "b", "c"] is invalid (rule: maxItems 2)'),
        ({"tags": ["a", 3]}, "f.json: tags[1]: 3 is invalid (rule: type string or null)"),
        ({"sub": {}}, "f.json: sub.k: missing required key (rule: a required key)"),
        ({"sub": {"k": 1, "z": 2}}, "f.json: sub.z: unknown key (rule: known keys: k)"),
        ({"open": {"z": 2}}, "f.json: open.z: unknown key (rule: no extra keys)"),
        ({"any": None}, "f.json: any: null is invalid (rule: not)"),
    ],
)  # fmt: skip
def test_each_keyword_gives_its_rule(change: dict, text: str) -> None:
    assert refusal({**GOOD, **change}) == text


def test_the_top_level_and_missing_keys() -> None:
    assert refusal({"name": "ab"}) == "f.json: count: missing required key (rule: a required key)"
    assert refusal([1]) == "f.json: (top level): [1] is invalid (rule: type object)"
    validate(GOOD, SCHEMA, "f.json")  # returns
    validate({**GOOD, "count": 2.0}, {"type": "object", "properties": {"count": {"type": "number"}}}, "f")


def test_unknown_keys_sort_whatever_their_type() -> None:
    assert refusal({**GOOD, 2: "x", "b": 1}).startswith("f.json: 2: unknown key")  # YAML: `2: x` at the top
    assert refusal({**GOOD, "sub": {"k": 1, 3: "x"}}).startswith("f.json: sub.3: unknown key")


def test_a_long_or_unwritable_value_is_shown_short() -> None:
    long = refusal({**GOOD, "name": "x" * 200})
    assert long == 'f.json: name: "' + "x" * 79 + " is invalid (rule: maxLength 5)"
    assert refusal({**GOOD, "name": b"ab"}) == "f.json: name: \"b'ab'\" is invalid (rule: type string)"
    assert refusal({**GOOD, "name": {1, 2}}) == 'f.json: name: "{1, 2}" is invalid (rule: type string)'


def test_load_json_names_the_file_and_where(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"name": "ab", "count": 3}')
    assert load_json(str(path), SCHEMA) == GOOD and load_json(str(path)) == GOOD
    path.write_text('{"name": "ab",\n "count": }')
    with pytest.raises(ValidationError) as e:
        load_json(str(path))
    assert str(e.value) == f"{path}: line 2 column 11: not valid JSON: Expecting value"
    path.write_bytes(b"\xff\xfe")
    assert refused_read(path) == f"{path}: byte 0: not UTF-8 text (rule: a UTF-8 JSON file)"
    assert refused_read(tmp_path / "no.json") == f"{tmp_path / 'no.json'}: file not found"
    assert (
        refused_read(tmp_path)
        == f"{tmp_path}: not a regular file (a device, FIFO or folder) (rule: a regular file)"
    )
    path.write_text('{"name": "ab"}')
    assert "count: missing required key" in refused_read(path, SCHEMA)


def refused_read(path: Path, schema: dict | None = None) -> str:
    with pytest.raises(ValidationError) as e:
        load_json(str(path), schema)
    return str(e.value)


def test_load_schema_reads_the_shipped_schemas() -> None:
    s = load_schema("manifest.schema.json")
    assert s["title"].startswith("Export manifest") and load_schema("manifest.schema.json") is s


# -- contracts/errors.py --------------------------------------------------------------------------------------


def test_one_line_of_known_failures() -> None:
    assert (
        one_line(OSError(errno.ENOENT, "No such file or directory", "/x/y"))
        == "/x/y: No such file or directory (ENOENT)"
    )
    assert one_line(OSError(999, "odd", "/x")) == "/x: odd (?)"
    assert one_line(OSError("no file name")) == "no file name"
    assert one_line(ValueError("two\n  lines\there")) == "two lines here"
    assert one_line(KeyError()) == "KeyError"
    w = FileWriteError("/out/f.json", OSError(errno.ENOSPC, "No space left on device"))
    assert (
        one_line(w)
        == str(w)
        == (
            "/out/f.json: cannot write: No space left on device (ENOSPC); next: free space or fix permissions, then "
            "re-run (the previous file is unchanged)"
        )
    )
    assert (w.path, w.errno, exit_code(w)) == ("/out/f.json", errno.ENOSPC, 1)
    assert str(FileWriteError("p", OSError("x"))).startswith("p: cannot write: x (?)")
    assert (
        exit_code(ValueError()) == 1
        and exit_code(ValidationError("f", "", "p")) == 2
        and XtrainError.exit_code == 1
    )


def test_report_prints_one_line_and_the_traceback_only_when_debugging(monkeypatch, capsys) -> None:
    monkeypatch.delenv(errors.DEBUG_ENV, raising=False)
    assert not debug()
    assert report(ValidationError("f", "k", "p"), "cmd: ") == 2
    assert capsys.readouterr().err == "error: cmd: f: k: p\n"
    for value, on in (("1", True), ("0", False), ("", False), ("yes", True)):
        monkeypatch.setenv(errors.DEBUG_ENV, value)
        assert debug() is on
    try:
        raise ValueError("boom")
    except ValueError as e:
        assert report(e) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("error: boom\n")


def test_cli_turns_known_failures_into_their_exit_code(capsys, monkeypatch) -> None:
    monkeypatch.delenv(errors.DEBUG_ENV, raising=False)

    @cli
    def main(what: str) -> int:
        """doc"""
        if what == "bad":
            raise ValidationError("f", "", "bad")
        if what == "os":
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", "/nope")
        if what == "bug":
            raise KeyError("bug")
        return 0

    assert main("ok") == 0 and main.__doc__ == "doc"
    assert main("bad") == 2 and capsys.readouterr().err == "error: f: bad\n"
    assert main("os") == 1 and capsys.readouterr().err == "error: /nope: No such file or directory (ENOENT)\n"
    with pytest.raises(KeyError):
        main("bug")


def test_moved_names_the_new_command(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        errors.moved("xtrain.core.launch", "pipeline/train.py")
    assert e.value.code == 2
    assert (
        capsys.readouterr().err
        == "error: python -m xtrain.core.launch: moved; run python -m pipeline.train (the same arguments)\n"
    )


def shipped_schemas() -> list[str]:
    from importlib import resources

    return sorted(
        p.name for p in resources.files("contracts").joinpath("schemas").iterdir() if p.name.endswith(".json")
    )


@pytest.mark.parametrize("name", shipped_schemas())
def test_every_shipped_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    """load_schema does not check the metaschema at run time (its cost in every process): here, once."""
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(load_schema(name))


def test_the_metaschema_check_refuses_a_broken_schema() -> None:
    """Negative control: the check above fails on a schema whose keyword has the wrong type."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    broken = {**load_schema("manifest.schema.json"), "required": "format"}
    with pytest.raises(SchemaError):
        Draft202012Validator.check_schema(broken)
