"""The forms DVC refuses are refused by the gates, with DVC's reason (issue #51 item 2).

gates/reading/dvcschema.py writes out DVC 3's schema of dvc.yaml and dvc.lock (importing dvc.schema
costs more than the gates' whole check). Two proofs it is DVC's: the same schema, key by key and
validator by validator, as dvc.schema's; and, over generated stages and lock entries, the same verdict
and the same first reason as DVC's compiled schemas. The grammar (`_py` for DVC's pyparsing one) and
the md5-dos2unix hash are held to DVC's own code the same way.
"""

from __future__ import annotations

import hashlib
import io
import types
from typing import Any

import pytest
import voluptuous as vol
from hypothesis import given
from hypothesis import strategies as st

from gates.reading import dvcschema
from gates.reading.dvclock import istext, md5_dos2unix
from gates.reading.dvcyaml import EXPRESSION, DvcYamlError, expression


def same(ours: Any, theirs: Any, where: str = "") -> list[str]:
    """Where two voluptuous schemas differ ([]: nowhere)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        keys = {(type(k), str(k)): k for k in ours}, {(type(k), str(k)): k for k in theirs}
        if keys[0].keys() != keys[1].keys():
            return [f"{where}: keys {sorted(map(str, keys[0]))} != {sorted(map(str, keys[1]))}"]
        return [
            d for k, key in keys[0].items() for d in same(ours[key], theirs[keys[1][k]], f"{where}.{key}")
        ]
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{where}: {len(ours)} items != {len(theirs)}"]
        return [
            d for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) for d in same(a, b, f"{where}[{i}]")
        ]
    if isinstance(ours, vol.Schema) and isinstance(theirs, vol.Schema):
        return same(ours.schema, theirs.schema, where)
    if isinstance(ours, types.FunctionType) and isinstance(theirs, types.FunctionType):
        if ours.__name__ != theirs.__name__ or len(ours.__closure__ or ()) != len(theirs.__closure__ or ()):
            return [f"{where}: function {ours.__name__} != {theirs.__name__}"]
        cells = zip(ours.__closure__ or (), theirs.__closure__ or (), strict=True)
        return [
            d
            for i, (a, b) in enumerate(cells)
            for d in same(a.cell_contents, b.cell_contents, f"{where}<{i}>")
        ]
    if type(ours) is not type(theirs) or repr(ours) != repr(theirs):
        return [f"{where}: {ours!r} != {theirs!r}"]
    return []


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [("MULTI_STAGE_SCHEMA", "MULTI_STAGE_SCHEMA"), ("LOCKFILE_SCHEMA", "LOCKFILE_SCHEMA"),
     ("STAGE_DEFINITION", "STAGE_DEFINITION"), ("FOREACH_IN", "FOREACH_IN"), ("DATA_SCHEMA", "DATA_SCHEMA")],
)  # fmt: skip
def test_the_schema_is_dvcs_key_by_key(ours: str, theirs: str) -> None:
    import dvc.schema

    assert same(getattr(dvcschema, ours), getattr(dvc.schema, theirs)) == []


def test_the_comparison_sees_a_difference() -> None:
    """Negative control: a flag that is not a bool, a key more, a function of another name."""
    import dvc.schema

    looser = {**dvcschema.OUT_PSTAGE_DETAILED_SCHEMA[str], "cache": vol.Any(bool, str)}
    assert same(looser, dvc.schema.OUT_PSTAGE_DETAILED_SCHEMA[str])
    assert same({**dvcschema.LOCKFILE_SCHEMA, "extra": object}, dvc.schema.LOCKFILE_SCHEMA)
    assert same(lambda x: x, dvcschema.either_or(1, 2, ["a"]))


PATHS = st.sampled_from(["out/a", "out/b.txt", "${item}", 3, None, ""])
FLAGS = st.dictionaries(
    st.sampled_from(["cache", "persist", "push", "remote", "desc", "checkpoint", "type", "bogus", "x"]),
    st.sampled_from([True, False, "no", "yes", 1, None, "r", ["l"]]),
    max_size=3,
)
OUT = st.one_of(PATHS, st.dictionaries(PATHS.filter(lambda p: isinstance(p, str)), st.one_of(FLAGS, st.none()), min_size=1, max_size=2))  # fmt: skip
STAGE = st.fixed_dictionaries(
    {},
    optional={
        "cmd": st.one_of(st.just("echo x"), st.lists(st.just("a"), max_size=2), st.integers()),
        "deps": st.one_of(st.lists(PATHS, max_size=2), st.just("x")),
        "outs": st.one_of(st.lists(OUT, max_size=2), st.just("x")),
        "metrics": st.lists(OUT, max_size=2),
        "params": st.lists(st.one_of(st.just("seed"), st.dictionaries(st.just("f.toml"), st.one_of(st.none(), st.lists(st.just("k"))))), max_size=2),
        "frozen": st.sampled_from([True, "true", 1]),
        "always_changed": st.sampled_from([False, "no"]),
        "wdir": st.just("sub"),
        "foreach": st.sampled_from([[True, False], {"a": 1}, "${x}", 3]),
        "do": st.just({"cmd": "echo ${item}"}),
        "bogus": st.just(1),
    },
)  # fmt: skip
PIPELINE = st.fixed_dictionaries(
    {"stages": st.dictionaries(st.sampled_from(["a", "b@c", "train"]), st.one_of(STAGE, st.none(), st.just(3)), max_size=2)},
    optional={"vars": st.lists(st.one_of(st.just("p.yaml"), st.just({"k": 1}), st.just(2))), "other": st.just(1)},
)  # fmt: skip
ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "path": st.sampled_from(["a.txt", 1]),
        "md5": st.sampled_from(["0" * 32, "ab", "", None, 12345, "ABCDEF"]),
        "hash": st.sampled_from(["md5", 3]),
        "size": st.sampled_from([1, "1"]),
        "nfiles": st.sampled_from([2, None]),
        "isexec": st.sampled_from([True, "x"]),
        "bogus": st.just(1),
    },
)
LOCK = st.fixed_dictionaries(
    {},
    optional={
        "schema": st.sampled_from(["2.0", "1.0", 2.0]),
        "stages": st.one_of(
            st.dictionaries(
                st.sampled_from(["a", "probes"]),
                st.fixed_dictionaries(
                    {},
                    optional={
                        "cmd": st.sampled_from(["x", ["x"], 3]),
                        "deps": st.one_of(st.lists(ENTRY, max_size=2), st.just("x")),
                        "outs": st.lists(ENTRY, max_size=2),
                        "params": st.sampled_from([{"params.yaml": {"seed": 1}}, {"p": 3}, [1]]),
                    },
                ),
                max_size=2,
            ),
            st.just([1]),
        ),
        "datasets": st.just([]),
    },
)


def verdict(schema: Any, data: Any) -> str | None:
    """None when the schema takes `data`, else the first reason as the gates word it."""
    try:
        schema(data)
    except vol.MultipleInvalid as e:
        return dvcschema.reason(e)
    return None


@given(data=PIPELINE)
def test_dvc_yaml_is_refused_exactly_where_dvc_refuses_it(data: dict) -> None:
    from dvc.schema import COMPILED_MULTI_STAGE_SCHEMA

    assert verdict(dvcschema.PIPELINE, data) == verdict(COMPILED_MULTI_STAGE_SCHEMA, data)


@given(data=LOCK)
def test_dvc_lock_is_refused_exactly_where_dvc_refuses_it(data: dict) -> None:
    from dvc.schema import COMPILED_LOCKFILE_SCHEMA

    assert verdict(dvcschema.LOCKFILE, data) == verdict(COMPILED_LOCKFILE_SCHEMA, data)


def test_the_issue_forms_are_refused_with_dvcs_reason() -> None:
    assert verdict(
        dvcschema.PIPELINE, {"stages": {"d": {"cmd": "x", "outs": [{"out/d": {"cache": "no"}}]}}}
    ) == ("expected bool, in stages -> d -> outs -> 0 -> out/d -> cache")
    assert verdict(
        dvcschema.LOCKFILE, {"schema": "2.0", "stages": {"probes": {"cmd": "x", "deps": "x"}}}
    ) == ("expected a list, in stages -> probes -> deps")
    with pytest.raises(dvcschema.DvcRefuses) as e:
        dvcschema.check(
            dvcschema.PIPELINE,
            {"stages": {"t": {"foreach": [1], "do": {"cmd": "x"}, "frozen": True}}},
            "dvc.yaml",
        )
    assert str(e.value) == (
        "dvc.yaml: extra keys not allowed, in stages -> t -> frozen (rule: DVC's schema of this file; dvc status "
        "refuses it too)"
    )


# -- the expression grammar and md5-dos2unix, against DVC's own code -----------------------------------------


@given(inner=st.text(alphabet="ab0.[] -_$x\n", max_size=12))
def test_the_expression_grammar_is_dvcs(inner: str) -> None:
    from dvc.parsing.interpolate import ParseError, parse_expr

    try:
        parse_expr(inner)
        theirs = True
    except ParseError:
        theirs = False
    assert bool(EXPRESSION.fullmatch(inner)) == theirs, inner
    if not theirs:
        with pytest.raises(DvcYamlError):
            expression(inner)


BLOCKS = st.lists(
    st.sampled_from([b"a\r\n", b"\r\n", b"\n", b"\x00", b"\xff\xfe", b"text ", b"\r", b"\x1b"]), max_size=400
)


@given(parts=BLOCKS, pad=st.integers(0, 1100))
def test_md5_dos2unix_is_dvc_datas(
    tmp_path_factory: pytest.TempPathFactory, parts: list[bytes], pad: int
) -> None:
    from dvc_data.hashfile.hash import fobj_md5
    from dvc_data.hashfile.istextfile import istextblock

    data = b"x" * pad + b"".join(parts)
    path = tmp_path_factory.mktemp("d2u") / "f"
    path.write_bytes(data)
    assert md5_dos2unix(path) == fobj_md5(io.BytesIO(data), name="md5-dos2unix")
    assert istext(data[:512]) == istextblock(data[:512])


def test_md5_dos2unix_reads_each_mebibyte_as_dvc_does(tmp_path) -> None:
    """A text chunk then a binary one (a NUL in its first 512 bytes): only the first is converted."""
    from dvc_data.hashfile.hash import file_md5

    data = b"a\r\n" * (1 << 19) + b"\x00\r\n" + b"b\r\n" * 10
    (tmp_path / "f").write_bytes(data)
    assert md5_dos2unix(tmp_path / "f") == file_md5(str(tmp_path / "f"), name="md5-dos2unix")
    assert md5_dos2unix(tmp_path / "f") != hashlib.md5(data).hexdigest()  # control: it did convert
