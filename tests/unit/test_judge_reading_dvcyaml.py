"""gates/reading/dvcyaml.py under mutation (docs/judge-mutation.md): dvc.yaml as DVC resolves it, in-process.

Each rule of the reader (the context, selection, the grammar, to_str, DVC's validate_value, foreach
names, vars merging, the forms it refuses) on small values and files written by hand, with the exact
stages and one-line errors. The expected values are what DVC 3's own code (dvc.parsing) gives for the
same input; tests/process/test_seals_dvc_status.py holds the whole reader equal to real `dvc status`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gates.reading.dvcyaml import (
    DvcYamlError,
    Node,
    Out,
    StageDef,
    _outs,
    _params,
    checked,
    context,
    expand,
    expression,
    foreach_keys,
    merge,
    parsing_config,
    pipeline_stages,
    plain,
    resolve,
    resolve_str,
    resolved,
    select,
    stage_def,
    to_str,
)

CTX = {"a": {"b": 3, "c": [10, 20]}, "flag": True, "off": False, "name": "tiny", "f": 0.5, "n": None}
RULE = "(rule: DVC's schema of this file; dvc status refuses it too)"


def refusal(fn, *args: Any) -> str:
    with pytest.raises(DvcYamlError) as e:
        fn(*args)
    return str(e.value)


# -- the context ----------------------------------------------------------------------------------------------


def test_plain_drops_keys_that_are_not_strings_as_dvcs_ctxdict() -> None:
    assert plain({"a": {1: "x", "b": [{2: 3, "c": None}]}, 5: 6, "t": True}, "p") == {
        "a": {"b": [{"c": None}]},
        "t": True,
    }
    assert plain([1, 2.5, "s", b"b"], "p") == [1, 2.5, "s", b"b"] and plain(None, "p") is None


def test_plain_refuses_a_value_dvc_cannot_hold_naming_where_as_dvc() -> None:
    assert refusal(plain, {"a": [1, {"d": DATE}]}, "params.yaml") == (
        "Unsupported value of type 'date' in 'params.yaml:a.1.d'"
    )
    assert refusal(plain, [DATE], "vars[0]") == "Unsupported value of type 'date' in 'vars[0]:0'"
    assert refusal(plain, DATE, "<local>", "item") == "Unsupported value of type 'date' in '<local>:item'"


DATE = __import__("datetime").date(2026, 1, 1)  # YAML reads 2026-01-01 as a date, for DVC as for the gates


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("a", {"b": 3, "c": [10, 20]}),
        ("a.b", 3),
        ("a.c.0", 10),
        ("a.c[1]", 20),
        ("a[c][0]", 10),
        ("a.c[-1]", 20),  # DVC takes int() of a list's index
        (" a . b ", 3),  # a mapping's key is stripped
        ("a.c[ 1]", 20),
        ("n", None),
        ("name", "tiny"),
    ],
)
def test_select_as_dvcs_context(expr: str, value: Any) -> None:
    assert select(CTX, expr) == value


@pytest.mark.parametrize(
    "expr", ["a.c.2", "a.c.x", "a.d", "b", "a.b.c", "name.0", "a.c.0.x", "", "a..b", "flag.x"]
)
def test_select_of_nothing_is_could_not_find(expr: str) -> None:
    assert refusal(select, CTX, expr) == f"Could not find '{expr}'"


@pytest.mark.parametrize("inner", ["a", "a.b", "a[0]", "a.b[1].c", " a ", "a-b$", "a b"])
def test_expressions_dvcs_grammar_takes(inner: str) -> None:
    assert expression(inner) == inner


@pytest.mark.parametrize("inner", ["", "a..b", "a.[0]", "a[]", "[0]", "a[0", "a]", "a.", ".a"])
def test_expressions_dvcs_grammar_refuses(inner: str) -> None:
    assert refusal(expression, inner) == f"${{{inner}}} is not an expression DVC parses"


# -- writing a value into a string, DVC's validate_value ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "config", "text"),
    [
        ("s", {}, "s"),
        (3, {}, "3"),
        (0.5, {}, "0.5"),
        (True, {}, "true"),
        (False, {}, "false"),
        (None, {}, "None"),
        ({"a": 1, "b": "x y", "on": True, "off": False, "l": [1, "z"]}, {}, "--a 1 --b 'x y' --on --l 1 z"),
        ({"off": False, "l": [1, 2]}, {"bool": "boolean_optional", "list": "append"}, "--no-off --l 1 --l 2"),
        ({"n": {"m": 1}}, {}, "--n.m 1"),
    ],
)
def test_to_str_is_dvcs(value: Any, config: dict, text: str) -> None:
    assert to_str(value, config) == text


def test_to_str_refuses_what_dvc_refuses() -> None:
    assert refusal(to_str, {"l": [[1]]}, {}) == "Cannot interpolate nested iterable in 'l'"


@pytest.mark.parametrize(
    ("value", "key"),
    [(1, "cmd"), ("s", "deps"), (None, "outs"), (b"b", "x"), ({"a": 1}, "cmd"), ([1], "foreach"), ([1], None),
     ({"a": 1}, "my foreach"), (Node([1]), None), (Node(1), "outs")],
)  # fmt: skip
def test_checked_lets_through_what_dvc_does(value: Any, key: str | None) -> None:
    assert checked(value, key) is value


@pytest.mark.parametrize(
    ("value", "key", "kind"),
    [
        ([1], "cmd", "list"),
        ({"a": 1}, "outs", "dict"),
        ([1], "deps", "list"),
        (Node({"a": 1}), "params", "dict"),
    ],
)
def test_checked_refuses_a_collection_outside_foreach(value: Any, key: str, kind: str) -> None:
    assert refusal(checked, value, key) == f"Cannot interpolate data of type '{kind}'"


# -- resolution -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "out"),
    [
        ("${a.b}", 3),
        ("${ a.b }", 3),
        ("${flag}", True),
        ("${n}", None),
        ("x${a.b}y", "x3y"),
        ("${a.b}${a.b}", "33"),
        ("--on ${flag} --off ${off} ${f}", "--on true --off false 0.5"),
        ("${n}!", "None!"),
        ("plain", "plain"),
        ("", ""),
        ("\\${a.b}", "${a.b}"),  # escaped: the text, no lookup
        ("x \\${nope} ${name}", "x ${nope} tiny"),
        ("\\${x} alone", "${x} alone"),
        ("$a {a} $ {x}", "$a {a} $ {x}"),
    ],
)
def test_resolve_str_as_dvc(src: str, out: Any) -> None:
    got = resolve_str(src, CTX, "deps", {}, False)
    assert got == out and type(got) is type(out)


def test_a_whole_string_keeps_dvcs_value_node_in_a_foreach() -> None:
    node = resolve_str("${a.c}", CTX, None, {}, True)
    assert isinstance(node, Node) and node.value == [10, 20]
    assert resolve_str("x${a.b}", CTX, None, {}, True) == "x3"


def test_a_dict_is_written_into_a_cmd_and_refused_elsewhere() -> None:
    assert resolve_str("run ${a}", {"a": {"k": 1}}, "cmd", {}, False) == "run --k 1"
    assert resolve_str("${a}", {"a": {"k": 1}}, "cmd", {}, False) == {"k": 1}
    assert refusal(resolve_str, "run ${a}", {"a": {"k": 1}}, "outs", {}, False) == (
        "Cannot interpolate data of type 'dict'"
    )
    assert refusal(resolve_str, "${a.c}", CTX, "outs", {}, False) == "Cannot interpolate data of type 'list'"
    assert (
        refusal(resolve_str, "x ${a..b}", CTX, "outs", {}, False) == "${a..b} is not an expression DVC parses"
    )


def test_resolve_hands_key_config_and_nodes_to_every_string_it_walks() -> None:
    """A mapping's keys and values and a list's items are resolved as their stage key says (DVC's
    validate_value), with .dvc/config's `[parsing]` and, in a foreach, DVC's nodes."""
    ctx = {"d": {"on": False}, "l": [1]}
    off = {"bool": "boolean_optional"}
    for value in ({"x ${d}": 1}, {"k": "x ${d}"}, ["x ${d}"], "x ${d}"):
        assert "Cannot interpolate data of type 'dict'" in refusal(resolve, value, ctx, "outs", {})
        assert "--no-on" in str(resolve(value, ctx, "cmd", off))
    for value in ({"k": "${l}"}, ["${l}"], "${l}"):
        assert "Cannot interpolate data of type 'list'" in refusal(resolve, value, ctx, "outs", {})
    for value in ({"k": "${l}"}, ["${l}"]):
        inner = resolve(value, ctx, None, {}, nodes=True)
        assert isinstance((inner["k"] if isinstance(inner, dict) else inner[0]), Node)
    keys = resolve({"${d.on}": 1}, ctx, None, {}, nodes=True)
    assert [type(k) for k in keys] == [Node] and next(iter(keys)).value is False


def test_resolve_walks_mappings_keys_and_lists() -> None:
    value = {"${name}": ["${a.b}", "k${name}", 1, None], "k": {"deep": "${f}"}, 3: True}
    assert resolve(value, CTX, "outs", {}) == {"tiny": [3, "ktiny", 1, None], "k": {"deep": 0.5}, 3: True}
    assert isinstance(resolve(["${a}"], CTX, None, {}, nodes=True)[0], Node)
    assert refusal(resolve, {"k": ["${a.z}"]}, CTX, "outs", {}) == "Could not find 'a.z'"


# -- a stage's definition -------------------------------------------------------------------------------------


def test_outs_are_paths_or_one_mapping_of_flags() -> None:
    assert _outs(
        ["a.txt", {"m.json": {"cache": False}}, {"n.json": {"persist": True}}, {"p": None}, {7: {}}]
    ) == [
        Out("a.txt"),
        Out("m.json", False),
        Out("n.json", True),
        Out("p", True),
        Out("7", True),
    ]


def test_params_group_keys_by_file_in_order_once() -> None:
    assert _params(["seed", {"p.toml": ["a", "b"]}, "lr", {"p.toml": ["a", "c"], "whole.yaml": None}]) == (
        ("params.yaml", ("seed", "lr")),
        ("p.toml", ("a", "b", "c")),
        ("whole.yaml", ()),
    )
    assert _params([]) == ()


def test_stage_def_reads_every_key_dvc_status_looks_at() -> None:
    d = stage_def(
        {"cmd": "x", "deps": ["a", "b"], "params": ["seed"], "outs": ["o"], "metrics": [{"m": {"cache": False}}],
         "plots": ["p"], "always_changed": True, "frozen": True, "desc": "d"}
    )  # fmt: skip
    assert d == StageDef(
        "x", ("a", "b"), (("params.yaml", ("seed",)),), (Out("o"), Out("m", False), Out("p")), True, True
    )
    assert d.out_paths == ["o", "m", "p"]
    assert stage_def({"cmd": ["a", "b"]}) == StageDef(["a", "b"])


def test_resolved_judges_each_key_as_its_own() -> None:
    assert "Cannot interpolate data of type 'list'" in refusal(
        resolved, {"cmd": "x", "outs": ["${a.c}"]}, CTX, {}, "w"
    )
    assert resolved({"cmd": "${a}"}, CTX, {}, "w") == StageDef(
        {"b": 3, "c": [10, 20]}
    )  # a dict: a cmd's only


def test_resolved_names_the_stage_and_dvcs_refusal() -> None:
    assert resolved({"cmd": "echo ${name}", "outs": ["o/${a.b}"]}, CTX, {}, "dvc.yaml: stage s") == StageDef(
        "echo tiny", outs=(Out("o/3"),)
    )
    assert refusal(resolved, {"cmd": "echo ${nope}"}, CTX, {}, "dvc.yaml: stage s") == (
        "dvc.yaml: stage s: Could not find 'nope' (DVC refuses it)"
    )


# -- foreach ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("each", "keys"),
    [
        ({"thread": 1, "proc": 2}, ["thread", "proc"]),
        ([True, False], ["true", "false"]),  # issue #51: DVC names x@true
        (["a", 1, 2.5, None], ["a", "1", "2.5", "None"]),
        ([{"n": 1}, "y"], ["0", "1"]),  # a composite item: every item by its index
        ([[1], [2]], ["0", "1"]),
        ([Node(True), Node(2)], ["True", "2"]),  # DVC's Value nodes, named by str()
        ([Node({"a": 1}), Node(2)], ["0", "1"]),
        ([], []),
    ],
)
def test_foreach_keys_as_dvcs_normalized_iterable(each: Any, keys: list[str]) -> None:
    assert [k for k, _ in foreach_keys(each)] == keys


def test_expand_a_plain_stage_and_a_foreach_of_a_mapping_with_key_and_item() -> None:
    assert expand("s", {"cmd": "x ${name}"}, CTX, {}, "dvc.yaml") == {"s": StageDef("x tiny")}
    body = {"foreach": {"one": {"c": "a"}, "two": {"c": "b"}}, "do": {"cmd": "${item.c} ${key}"}}
    assert expand("t", body, CTX, {}, "dvc.yaml") == {"t@one": StageDef("a one"), "t@two": StageDef("b two")}


def test_a_foreach_of_a_list_sets_no_key() -> None:
    body = {"foreach": [True, False], "do": {"cmd": "echo ${item}", "outs": ["o_${item}"]}}
    assert expand("f", body, CTX, {}, "dvc.yaml") == {
        "f@true": StageDef("echo true", outs=(Out("o_true"),)),
        "f@false": StageDef("echo false", outs=(Out("o_false"),)),
    }
    keyless = {"foreach": ["a"], "do": {"cmd": "${key}"}}
    assert refusal(expand, "f", keyless, CTX, {}, "dvc.yaml") == (
        "dvc.yaml: stage f@a: Could not find 'key' (DVC refuses it)"
    )
    assert expand("f", keyless, {**CTX, "key": "k"}, {}, "dvc.yaml") == {"f@a": StageDef("k")}


def test_a_foreach_from_the_context_names_items_as_dvcs_value_nodes() -> None:
    ctx = {**CTX, "flags": [True, False], "runs": {"x": {"n": 1}}}
    body = {"foreach": "${flags}", "do": {"cmd": "echo ${item}"}}
    assert expand("f", body, ctx, {}, "dvc.yaml") == {
        "f@True": StageDef("echo true"),
        "f@False": StageDef("echo false"),
    }
    mapping = {"foreach": "${runs}", "do": {"cmd": "${key} ${item.n}"}}
    assert expand("r", mapping, ctx, {}, "dvc.yaml") == {"r@x": StageDef("x 1")}
    items = {"foreach": ["${name}", "${a.b}"], "do": {"cmd": "x ${item}"}}
    assert expand("i", items, ctx, {}, "dvc.yaml") == {"i@tiny": StageDef("x tiny"), "i@3": StageDef("x 3")}
    assert resolve_str("${a.c}", CTX, None, {}, False) == [10, 20]  # no key: DVC's foreach data


def test_expand_names_where_and_uses_dvc_configs_parsing() -> None:
    assert refusal(expand, "s", {"cmd": "${nope}"}, CTX, {}, "p/dvc.yaml") == (
        "p/dvc.yaml: stage s: Could not find 'nope' (DVC refuses it)"
    )
    ctx = {"d": {"on": False}}
    off = {"bool": "boolean_optional"}
    named = {"foreach": ["x ${d}"], "do": {"cmd": "c"}}  # the foreach data's own strings
    assert list(expand("f", named, ctx, off, "dvc.yaml")) == ["f@x --no-on"]
    assert list(expand("f", named, ctx, {}, "dvc.yaml")) == ["f@x "]  # store_true: False writes nothing
    do = {"foreach": ["a"], "do": {"cmd": "x ${d}"}}
    assert expand("f", do, ctx, off, "dvc.yaml") == {"f@a": StageDef("x --no-on")}
    dated = {"foreach": [DATE], "do": {"cmd": "c"}}
    assert refusal(expand, "f", dated, CTX, {}, "dvc.yaml") == (
        "Unsupported value of type 'date' in '<local>:item'"
    )


def test_a_foreach_item_is_held_as_dvc_holds_it() -> None:
    body = {"foreach": [{"n": 1, 2: "x"}], "do": {"cmd": "${item.n}", "desc": "n ${item.n}"}}
    assert expand("s", body, CTX, {}, "dvc.yaml") == {"s@0": StageDef(1)}  # a whole string keeps its type
    bad = {"foreach": [{"n": 1, 2: "x"}], "do": {"cmd": "${item.2}"}}  # DVC drops the int key
    assert "Could not find 'item.2'" in refusal(expand, "s", bad, CTX, {}, "dvc.yaml")


@pytest.mark.parametrize(
    ("each", "kind"), [("${name}", "str"), ("${a.b}", "int"), (3, "int"), (None, "NoneType")]
)
def test_a_foreach_that_is_no_list_or_mapping_is_refused(each: Any, kind: str) -> None:
    assert refusal(expand, "s", {"foreach": each, "do": {"cmd": "x"}}, CTX, {}, "dvc.yaml") == (
        f"dvc.yaml: stage s: foreach: expected list/dictionary, got {kind} (DVC refuses it)"
    )
    assert refusal(expand, "s", {"foreach": "${nope}", "do": {"cmd": "x"}}, CTX, {}, "dvc.yaml") == (
        "dvc.yaml: stage s: foreach: Could not find 'nope' (DVC refuses it)"
    )


@pytest.mark.parametrize(
    "body",
    [{"cmd": "x", "wdir": "sub"}, {"cmd": "x", "matrix": {"a": [1]}}, {"cmd": "x", "vars": [{"a": 1}]},
     {"foreach": [1], "do": {"cmd": "x", "wdir": "s"}}, {"foreach": [1], "do": {"cmd": "x", "vars": []}}],
)  # fmt: skip
def test_forms_the_gates_do_not_model_are_refused_by_name(body: dict) -> None:
    form = next(f for f in ("wdir", "matrix", "vars") if f in body or f in body.get("do", {}))
    assert refusal(expand, "s", body, CTX, {}, "dvc.yaml") == (
        f"dvc.yaml: stage s: `{form}` is a form the gates' staleness check does not model"
    )


# -- vars and params.yaml -------------------------------------------------------------------------------------


def test_merge_adds_and_refuses_a_redefinition_naming_both_sources() -> None:
    ctx: dict = {}
    sources: dict = {}
    merge(ctx, {"net": {"dim": 1}, "seed": 2}, "params.yaml", sources)
    merge(ctx, {"net": {"lr": 3}, "x": 1}, "vars[0]", sources)
    assert ctx == {"net": {"dim": 1, "lr": 3}, "seed": 2, "x": 1}
    assert sources == {"net": "params.yaml", "seed": "params.yaml", "net.lr": "vars[0]", "x": "vars[0]"}
    assert refusal(merge, ctx, {"net": {"dim": 5}}, "vars[1]", sources) == (  # defined below a mapping
        "cannot redefine 'net.dim' from 'vars[1]' as it already exists in 'params.yaml'"
    )
    assert refusal(merge, ctx, {"seed": 5}, "vars[1]", sources) == (
        "cannot redefine 'seed' from 'vars[1]' as it already exists in 'params.yaml'"
    )
    assert refusal(merge, ctx, {"net": {"lr": {"a": 1}}}, "vars[1]", sources) == (
        "cannot redefine 'net.lr' from 'vars[1]' as it already exists in 'vars[0]'"  # the nearest source
    )
    assert refusal(merge, ctx, {"net": 1}, "vars[2]", sources) == (
        "cannot redefine 'net' from 'vars[2]' as it already exists in 'params.yaml'"
    )


def test_the_context_is_params_yaml_and_the_inline_vars(tmp_path: Path) -> None:
    assert context(tmp_path, {"vars": [{"k": 1}]}, "dvc.yaml") == {"k": 1}  # no params.yaml: vars alone
    (tmp_path / "params.yaml").write_text("seed: 1\nnet: {dim: 2}\n3: x\n")
    assert context(tmp_path, {}, "dvc.yaml") == {"seed": 1, "net": {"dim": 2}}
    assert context(tmp_path, {"vars": [{"k": 1}, {"net": {"lr": 2}}]}, "dvc.yaml") == {
        "seed": 1, "net": {"dim": 2, "lr": 2}, "k": 1,
    }  # fmt: skip
    assert refusal(context, tmp_path, {"vars": [{"seed": 9}]}, "dvc.yaml") == (
        "dvc.yaml: vars: cannot redefine 'seed' from 'vars[0]' as it already exists in 'params.yaml' (DVC refuses it)"
    )
    assert refusal(context, tmp_path, {"vars": ["other.yaml"]}, "dvc.yaml") == (
        "dvc.yaml: vars: 'other.yaml': a vars file is a form the gates do not model"
    )
    (tmp_path / "params.yaml").write_text("d: 2026-01-01\n")  # DVC's context refuses a date
    assert refusal(context, tmp_path, {}, "dvc.yaml") == "Unsupported value of type 'date' in 'params.yaml:d'"
    (tmp_path / "params.yaml").write_text("seed: 1\n")
    assert refusal(context, tmp_path, {"vars": [{"e": [DATE]}]}, "dvc.yaml") == (
        "dvc.yaml: vars: Unsupported value of type 'date' in 'vars[0]:e.0' (DVC refuses it)"
    )
    (tmp_path / "params.yaml").write_text("- 1\n")
    assert refusal(context, tmp_path, {}, "dvc.yaml") == (
        "dvc.yaml: vars: expected a dictionary, got 'list' in file 'params.yaml'"
    )


def test_parsing_config_is_dvc_configs_section(tmp_path: Path) -> None:
    assert parsing_config(tmp_path) == {}
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text(
        "[core]\n    remote = r\n[parsing]\n    bool = boolean_optional\n"
    )
    assert parsing_config(tmp_path) == {"bool": "boolean_optional"}
    (tmp_path / ".dvc" / "config.local").write_text("[parsing]\n    list = append\n")
    assert parsing_config(tmp_path) == {"bool": "boolean_optional", "list": "append"}


# -- the file ---------------------------------------------------------------------------------------------


DVC_YAML = """vars:
  - suffix: txt
stages:
  tmpl:
    cmd: echo ${tok} ${w[0]} \\${lit}
    outs: ["o.${suffix}"]
  flags:
    foreach: [true, false]
    do:
      cmd: echo ${item}
"""


def test_pipeline_stages_resolves_the_file(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("tok: {v: 10, on: true}\nw: [1, 2]\n")
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    assert pipeline_stages(tmp_path) == {
        "tmpl": StageDef("echo --v 10 --on 1 ${lit}", outs=(Out("o.txt"),)),
        "flags@true": StageDef("echo true"),
        "flags@false": StageDef("echo false"),
    }
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("[parsing]\n    bool = boolean_optional\n")
    (tmp_path / "params.yaml").write_text("tok: {v: 10, on: false}\nw: [1, 2]\n")
    assert pipeline_stages(tmp_path)["tmpl"].cmd == "echo --v 10 --no-on 1 ${lit}"


def test_pipeline_stages_refuses_a_missing_unreadable_or_dvc_refused_file(tmp_path: Path) -> None:
    path = tmp_path / "dvc.yaml"
    assert (
        refusal(pipeline_stages, tmp_path)
        == f"{path}: missing: the gates cannot tell which stages the pipeline has"
    )
    path.write_text("")
    assert pipeline_stages(tmp_path) == {}
    path.write_text("stages: [\n")
    assert refusal(pipeline_stages, tmp_path).startswith(f"{path}: line 2: not valid YAML: ")
    path.write_text("stages:\n  d:\n    cmd: x\n    outs: [{o: {cache: 'no'}}]\n")  # issue #51
    assert refusal(pipeline_stages, tmp_path) == (
        f"{path}: expected bool, in stages -> d -> outs -> 0 -> o -> cache {RULE}"
    )
    path.write_text("vars: [{a: 1}]\nstages:\n  d: {cmd: x}\n")
    (tmp_path / "params.yaml").write_text("a: 2\n")
    assert refusal(pipeline_stages, tmp_path) == (
        f"{path}: vars: cannot redefine 'a' from 'vars[0]' as it already exists in 'params.yaml' (DVC refuses it)"
    )
    (tmp_path / "params.yaml").write_text("a: 1\n")
    path.write_text("stages:\n  d: {cmd: '${nope}'}\n")
    assert refusal(pipeline_stages, tmp_path) == f"{path}: stage d: Could not find 'nope' (DVC refuses it)"
    (tmp_path / "params.yaml").write_text("a: [\n")  # DVC reads params.yaml whenever it exists
    assert refusal(pipeline_stages, tmp_path).startswith(
        f"{tmp_path / 'params.yaml'}: line 2: not valid YAML"
    )
