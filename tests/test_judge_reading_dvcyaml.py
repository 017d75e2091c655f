"""gates/reading/dvcyaml.py under mutation (docs/judge-mutation.md): dvc.yaml as DVC resolves it, in-process.

Each rule of the reader (foreach expansion, `${}` interpolation, params, outs/metrics/plots, the forms
it refuses) on small dvc.yaml files written by hand, with the exact stages, deps, outs and params and
the exact one-line errors. The expected expansions are what DVC 3's own resolver (dvc.parsing) gives
for the same files; tests/test_seals_dvc_status.py holds the whole reader equal to real `dvc status`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gates.reading.dvcyaml import (
    DvcYamlError,
    Out,
    StageDef,
    _entry_paths,
    _foreach_items,
    _params,
    context,
    expand,
    interpolate,
    lookup,
    pipeline_stages,
    stage_def,
)

W = "dvc.yaml: stage s"
CTX = {"a": {"b": 3, "c": [10, 20]}, "flag": True, "off": False, "name": "tiny", "f": 0.5, "n": None}


def raises(fn, *args: Any) -> str:
    with pytest.raises(DvcYamlError) as e:
        fn(*args)
    return str(e.value)


# -- lookup ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [("a", {"b": 3, "c": [10, 20]}), ("a.b", 3), ("a.c.0", 10), ("a.c.1", 20), ("name", "tiny"), ("n", None)],
)
def test_lookup_walks_mappings_and_list_indices(name: str, value: Any) -> None:
    assert lookup(CTX, name, W) == value


@pytest.mark.parametrize("name", ["a.c.2", "a.c.-1", "a.c.x", "a.d", "b", "a.b.c", "name.0", "a.c.0.x", ""])
def test_lookup_of_nothing_names_the_stage_and_the_name(name: str) -> None:
    assert (
        raises(lookup, CTX, name, W) == f"dvc.yaml: stage s: ${{{name}}} names nothing in vars or params.yaml"
    )


# -- interpolate ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "out"),
    [
        ("${a.b}", 3),  # a whole-string one keeps its type
        ("${ a.b }", 3),
        ("${a.c}", [10, 20]),
        ("${a}", {"b": 3, "c": [10, 20]}),
        ("${flag}", True),
        ("${n}", None),
        ("x${a.b}y", "x3y"),
        ("${a.b}${a.b}", "33"),
        ("${a.b}/${name}", "3/tiny"),
        ("--f ${ f } --on ${flag} --off ${off}", "--f 0.5 --on true --off false"),
        ("${n}!", "None!"),
        ("$a.b {a.b} $ {x}", "$a.b {a.b} $ {x}"),  # no `${`: left as written
        ("plain", "plain"),
        ("", ""),
        (7, 7),
        (None, None),
        (True, True),
        (["${a.b}", "k${name}", 1], [3, "ktiny", 1]),
        ({"${name}": "${a.c.1}", "k": {"deep": "${f}"}}, {"tiny": 20, "k": {"deep": 0.5}}),
    ],
)
def test_interpolate_as_dvc_does(value: Any, out: Any) -> None:
    got = interpolate(value, CTX, W)
    assert got == out and type(got) is type(out)


@pytest.mark.parametrize(("name", "kind"), [("a", "dict"), ("a.c", "list")])
def test_a_collection_inside_a_string_is_refused(name: str, kind: str) -> None:
    message = raises(interpolate, f"run ${{{name}}} now", CTX, W)
    assert message == f"dvc.yaml: stage s: ${{{name}}} is a {kind} inside a string"


def test_interpolate_names_the_missing_name_in_a_string_and_a_nested_value() -> None:
    assert (
        raises(interpolate, {"${nope}": 1}, CTX, W) == f"{W}: ${{nope}} names nothing in vars or params.yaml"
    )
    assert (
        raises(interpolate, "x ${nope} y", CTX, W) == f"{W}: ${{nope}} names nothing in vars or params.yaml"
    )
    assert (
        raises(interpolate, {"k": ["${a.z}"]}, CTX, W)
        == f"{W}: ${{a.z}} names nothing in vars or params.yaml"
    )


# -- deps, outs and params -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "outs"),
    [
        (None, []),
        ([], []),
        (["a.txt", "d/"], [Out("a.txt", True), Out("d/", True)]),
        ([{"m.json": {"cache": False}}], [Out("m.json", False)]),
        ([{"m.json": {"cache": True}}], [Out("m.json", True)]),
        ([{"m.json": None}], [Out("m.json", True)]),
        ([{"m.json": {"persist": True}}], [Out("m.json", True)]),
        ([{"m.json": {"cache": 0}}], [Out("m.json", False)]),
        ([{7: {"cache": False}}, "b"], [Out("7", False), Out("b", True)]),
    ],
)
def test_entry_paths(entries: Any, outs: list[Out]) -> None:
    got = _entry_paths(entries, W)
    assert got == outs and [type(o.path) for o in got] == [str] * len(outs)
    assert [type(o.cache) for o in got] == [bool] * len(outs)


@pytest.mark.parametrize("entry", [{"a": {}, "b": {}}, {}, 3, ["a"], {"path": "a"}, {"a": ["cache"]}])
def test_an_entry_neither_path_nor_one_mapping_is_refused(entry: Any) -> None:
    message = raises(_entry_paths, ["ok", entry], W)
    assert message == f"{W}: an out or dep {entry!r} is neither a path nor {{path: flags}}"


@pytest.mark.parametrize("entries", ["a.py", {"a.py": None}, 3])
def test_entries_that_are_not_a_list_are_refused_not_read_by_character(entries: Any) -> None:
    """DVC's schema wants a list: `deps: a.py` was read as the four deps a, ., p, y."""
    assert raises(_entry_paths, entries, W) == f"{W}: {entries!r} is not a list of entries"
    assert raises(_params, entries, W) == f"{W}: {entries!r} is not a list of entries"


def test_a_params_file_whose_keys_are_not_a_list_is_refused() -> None:
    assert (
        raises(_params, [{"f.yaml": "lr"}], W)
        == f"{W}: params entry {{'f.yaml': 'lr'}} is neither a key nor {{file: [keys]}}"
    )
    assert _params([{"f.yaml": ["lr"]}, {"g.yaml": None}], W) == (("f.yaml", ("lr",)), ("g.yaml", ()))


@pytest.mark.parametrize(
    ("entries", "params"),
    [
        (None, ()),
        ([], ()),
        (["lr", "seed"], (("params.yaml", ("lr", "seed")),)),
        (["lr", "lr", "seed", "lr"], (("params.yaml", ("lr", "seed")),)),
        ([{"p2.yaml": ["x", "y", "x"]}], (("p2.yaml", ("x", "y")),)),
        ([{"p2.yaml": None}], (("p2.yaml", ()),)),  # no keys: the whole file
        ([{"p2.yaml": []}], (("p2.yaml", ()),)),
        ([{"p2.yaml": [1]}, "lr"], (("p2.yaml", ("1",)), ("params.yaml", ("lr",)))),
        (
            ["lr", {"params.yaml": ["seed"], "p2.yaml": ["z"]}, "lr", "bs"],
            (("params.yaml", ("lr", "seed", "bs")), ("p2.yaml", ("z",))),
        ),
        ([{3: ["k"]}], (("3", ("k",)),)),
    ],
)
def test_params_group_keys_per_file_in_order(entries: Any, params: tuple) -> None:
    assert _params(entries, W) == params


@pytest.mark.parametrize("entry", [3, ["lr"], None])
def test_a_params_entry_neither_key_nor_mapping_is_refused(entry: Any) -> None:
    message = raises(_params, ["lr", entry], W)
    assert message == f"{W}: params entry {entry!r} is neither a key nor {{file: [keys]}}"


def test_stage_def_reads_every_field() -> None:
    body = {
        "cmd": ["a", "b"],
        "deps": ["x.py", {"data": {"cache": False}}],
        "params": ["lr", {"p2.yaml": None}],
        "outs": ["o", {"o2": {"cache": False}}],
        "metrics": [{"m.json": {"cache": False}}],
        "plots": ["p.csv"],
        "always_changed": 1,
        "frozen": "yes",
    }
    assert stage_def(body, W) == StageDef(
        cmd=["a", "b"],
        deps=("x.py", "data"),
        params=(("params.yaml", ("lr",)), ("p2.yaml", ())),
        outs=(Out("o"), Out("o2", False), Out("m.json", False), Out("p.csv")),
        always_changed=True,
        frozen=True,
    )


def test_stage_def_defaults() -> None:
    got = stage_def({}, W)
    assert got == StageDef(cmd=None) and got.always_changed is False and got.frozen is False
    assert (got.deps, got.params, got.outs, got.out_paths) == ((), (), (), [])
    flags = stage_def({"cmd": "c", "always_changed": 0, "frozen": None}, W)
    assert flags.always_changed is False and flags.frozen is False and flags.cmd == "c"
    assert stage_def({"outs": ["a"], "plots": [{"b": None}]}, W).out_paths == ["a", "b"]


@pytest.mark.parametrize(
    ("key", "body", "message"),
    [
        ("deps", {"deps": [3]}, "an out or dep 3 is neither a path nor {path: flags}"),
        ("outs", {"outs": [3]}, "an out or dep 3 is neither a path nor {path: flags}"),
        ("metrics", {"metrics": [3]}, "an out or dep 3 is neither a path nor {path: flags}"),
        ("plots", {"plots": [3]}, "an out or dep 3 is neither a path nor {path: flags}"),
        ("params", {"params": [3]}, "params entry 3 is neither a key nor {file: [keys]}"),
    ],
)
def test_stage_def_errors_name_the_stage(key: str, body: dict, message: str) -> None:
    assert raises(stage_def, body, "f: stage t@1") == f"f: stage t@1: {message}"


# -- foreach -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("each", "items"),
    [
        ({"x": 1, 2: "y"}, [("x", 1), ("2", "y")]),
        ([], []),
        (["a", "b"], [("a", "a"), ("b", "b")]),
        ([1, True, None], [("1", 1), ("True", True), ("None", None)]),
        (["a", {"k": 1}], [("0", "a"), ("1", {"k": 1})]),  # indices if any item is composite
        ([[1], "b"], [("0", [1]), ("1", "b")]),
    ],
)
def test_foreach_items_as_dvc_normalizes_them(each: Any, items: list) -> None:
    assert _foreach_items(each, W) == items


@pytest.mark.parametrize("each", ["a,b", 3, None])
def test_foreach_neither_list_nor_mapping_is_refused(each: Any) -> None:
    assert raises(_foreach_items, each, W) == f"{W}: foreach is neither a list nor a mapping"


def test_expand_a_plain_stage_interpolates_it() -> None:
    body = {"cmd": "train --seed ${seed}", "deps": ["${data}"], "outs": ["runs/${seed}"]}
    got = expand("train", body, {"seed": 7, "data": "d.txt"}, "dvc.yaml")
    assert got == {"train": StageDef(cmd="train --seed 7", deps=("d.txt",), outs=(Out("runs/7"),))}


def test_expand_foreach_over_a_mapping_and_a_list() -> None:
    do = {
        "cmd": "run ${key} ${item.lr} ${item.tag}",
        "deps": ["cfg/${key}.yaml"],
        "outs": [{"out/${key}": {"cache": False}}],
        "params": ["${item.tag}"],
    }
    body = {"foreach": {"a": {"lr": 0.1, "tag": "x"}, "b": {"lr": 1, "tag": "y"}}, "do": do}
    assert expand("sweep", body, {}, "dvc.yaml") == {
        "sweep@a": StageDef(
            "run a 0.1 x", ("cfg/a.yaml",), (("params.yaml", ("x",)),), (Out("out/a", False),)
        ),
        "sweep@b": StageDef("run b 1 y", ("cfg/b.yaml",), (("params.yaml", ("y",)),), (Out("out/b", False),)),
    }
    listed = {"foreach": "${sizes}", "do": {"cmd": "fit ${item} ${base}", "frozen": True}}
    assert expand("fit", listed, {"sizes": [8, 16], "base": "b"}, "dvc.yaml") == {
        "fit@8": StageDef("fit 8 b", frozen=True),
        "fit@16": StageDef("fit 16 b", frozen=True),
    }


def test_expand_foreach_keeps_the_outer_context_and_names_the_expanded_stage_in_errors() -> None:
    body = {"foreach": ["a", "b"], "do": {"cmd": "${item}", "deps": ["${missing}"]}}
    message = raises(expand, "s", body, {"key": "outer"}, "dvc.yaml")
    assert message == "dvc.yaml: stage s@a: ${missing} names nothing in vars or params.yaml"
    ctx = {"x": 1}
    assert expand("s", {"foreach": [2], "do": {"cmd": "${x}${item}"}}, ctx, "f") == {"s@2": StageDef("12")}
    assert ctx == {"x": 1}  # the foreach's key and item do not leak into the shared context
    message = raises(expand, "s", {"cmd": "${nope}"}, {}, "f")
    assert message == "f: stage s: ${nope} names nothing in vars or params.yaml"
    message = raises(expand, "s", {"foreach": "${nope}", "do": {}}, {}, "f")
    assert message == "f: stage s: ${nope} names nothing in vars or params.yaml"
    assert raises(expand, "s", {"cmd": "c", "deps": [3]}, {}, "f") == (
        "f: stage s: an out or dep 3 is neither a path nor {path: flags}"
    )
    assert raises(expand, "s", {"foreach": ["a"], "do": {"params": [3]}}, {}, "f") == (
        "f: stage s@a: params entry 3 is neither a key nor {file: [keys]}"
    )
    message = raises(expand, "s", {"foreach": 3, "do": {}}, {}, "f")
    assert message == "f: stage s: foreach is neither a list nor a mapping"


@pytest.mark.parametrize("key", ["wdir", "matrix", "vars"])
@pytest.mark.parametrize("inside_do", [False, True])
def test_expand_refuses_the_unmodelled_forms(key: str, inside_do: bool) -> None:
    body = {"foreach": [1], "do": {"cmd": "c", key: "x"}} if inside_do else {"cmd": "c", key: "x"}
    message = raises(expand, "s", body, {}, "dvc.yaml")
    assert message == f"dvc.yaml: stage s: `{key}` is a form the gates' staleness check does not model"


@pytest.mark.parametrize("do", [None, "cmd", ["cmd"]])
def test_expand_refuses_foreach_without_a_do_mapping(do: Any) -> None:
    body = {"foreach": [1]} if do is None else {"foreach": [1], "do": do}
    assert raises(expand, "s", body, {}, "f") == "f: stage s: foreach without a `do` mapping"


def test_expand_an_empty_foreach_has_no_stage_and_an_empty_do_has_no_fields() -> None:
    assert expand("s", {"foreach": [], "do": {"cmd": "c"}}, {}, "f") == {}
    assert expand("s", {"foreach": {"k": 1}, "do": {}}, {}, "f") == {"s@k": StageDef(cmd=None)}


# -- context and the whole file --------------------------------------------------------------------------------


def write(root: Path, dvc_yaml: str, params: str | None = None) -> Path:
    (root / "dvc.yaml").write_text(dvc_yaml)
    if params is not None:
        (root / "params.yaml").write_text(params)
    return root


def test_context_loads_params_only_where_a_name_needs_it(tmp_path: Path) -> None:
    write(tmp_path, "", "lr: 0.1\nm:\n  d: 4\n")
    assert context(tmp_path, {"stages": {"s": {"cmd": "${m.d}"}}}, "f") == {"lr": 0.1, "m": {"d": 4}}
    assert context(tmp_path, {"stages": {"s": {"cmd": "${key} ${item.x}"}}}, "f") == {}
    assert context(tmp_path, {"stages": {"s": {"cmd": "no names"}}}, "f") == {}
    assert context(tmp_path / "nowhere", {"stages": {"s": {"cmd": "${lr}"}}}, "f") == {}
    (tmp_path / "params.yaml").write_text("- 1\n- 2\n")
    assert context(tmp_path, {"stages": {"s": {"cmd": "${lr}"}}}, "f") == {}


def test_context_vars_are_inline_mappings_over_params(tmp_path: Path) -> None:
    write(tmp_path, "", "lr: 0.1\nbs: 2\n")
    data = {"vars": [{"lr": 0.5}, {"x": 1, "lr": 0.7}], "stages": {"s": {"cmd": "${lr}"}}}
    assert context(tmp_path, data, "f") == {"lr": 0.7, "bs": 2, "x": 1}
    assert context(tmp_path, {"vars": None}, "f") == {}
    assert raises(context, tmp_path, {"vars": [{"a": 1}, "p2.yaml"]}, "f") == (
        "f: vars: 'p2.yaml': only inline mappings are modelled"
    )


def test_pipeline_stages_reads_the_file_as_dvc_does(tmp_path: Path) -> None:
    write(
        tmp_path,
        "vars:\n  - tag: v1\nstages:\n"
        "  prep:\n    cmd: prep ${data.n} ${tag}\n    outs:\n    - data/${tag}\n    params: [data.n]\n"
        "  fit:\n    foreach: ${sizes}\n    do:\n      cmd: fit ${item}\n      deps:\n      - data/${tag}\n"
        "      metrics:\n      - m/${item}.json:\n          cache: false\n",
        "data:\n  n: 3\nsizes: [1, 2]\n",
    )
    assert pipeline_stages(tmp_path) == {
        "prep": StageDef("prep 3 v1", (), (("params.yaml", ("data.n",)),), (Out("data/v1"),)),
        "fit@1": StageDef("fit 1", ("data/v1",), (), (Out("m/1.json", False),)),
        "fit@2": StageDef("fit 2", ("data/v1",), (), (Out("m/2.json", False),)),
    }


@pytest.mark.parametrize("text", ["", "stages:\n", "plots: []\n", "stages: {}\nmetrics: []\n"])
def test_pipeline_stages_of_a_pipeline_without_stages_is_empty(tmp_path: Path, text: str) -> None:
    assert pipeline_stages(write(tmp_path, text)) == {}


def test_a_missing_dvc_yaml_is_named(tmp_path: Path) -> None:
    path = tmp_path / "dvc.yaml"
    assert (
        raises(pipeline_stages, tmp_path)
        == f"{path}: missing: the gates cannot tell which stages the pipeline has"
    )
    path.mkdir()
    assert raises(pipeline_stages, tmp_path).startswith(f"{path}: missing:")


NOT_A_PIPELINE = (
    ": not a DVC pipeline (a mapping of artifacts, datasets, metrics, params, plots, stages, vars;"
    " stages a mapping)"
)


@pytest.mark.parametrize(
    "text", ["- a\n", "stages: {}\nsteps: {}\n", "stages: [a]\n", "stages: x\n", "vars: []\nextra: 1\n"]
)
def test_not_a_pipeline_is_named(tmp_path: Path, text: str) -> None:
    write(tmp_path, text)
    assert raises(pipeline_stages, tmp_path) == f"{tmp_path / 'dvc.yaml'}{NOT_A_PIPELINE}"


def test_every_top_key_of_dvc_yaml_is_allowed(tmp_path: Path) -> None:
    text = "".join(f"{k}: []\n" for k in ("vars", "plots", "params", "metrics", "artifacts", "datasets"))
    assert pipeline_stages(write(tmp_path, text + "stages:\n  s:\n    cmd: c\n")) == {"s": StageDef("c")}


def test_unreadable_yaml_and_params_are_one_line_errors(tmp_path: Path) -> None:
    write(tmp_path, "stages: [\n")
    message = raises(pipeline_stages, tmp_path)
    assert (
        message.startswith(f"{tmp_path / 'dvc.yaml'}") and "not valid YAML" in message and "\n" not in message
    )
    write(tmp_path, "stages:\n  s:\n    cmd: ${lr}\n", "lr: [\n")
    message = raises(pipeline_stages, tmp_path)
    assert message.startswith(f"{tmp_path / 'params.yaml'}") and "not valid YAML" in message


def test_a_vars_file_is_named_with_the_dvc_yaml_that_lists_it(tmp_path: Path) -> None:
    write(tmp_path, "vars:\n  - p2.yaml\nstages: {}\n")
    assert (
        raises(pipeline_stages, tmp_path)
        == f"{tmp_path / 'dvc.yaml'}: vars: 'p2.yaml': only inline mappings are modelled"
    )


def test_a_stage_that_is_not_a_mapping_is_named(tmp_path: Path) -> None:
    write(tmp_path, "stages:\n  ok:\n    cmd: c\n  bad: echo\n")
    assert raises(pipeline_stages, tmp_path) == f"{tmp_path / 'dvc.yaml'}: stage bad: not a mapping"


def test_pipeline_stages_names_stages_as_strings_and_the_file_in_errors(tmp_path: Path) -> None:
    write(tmp_path, "stages:\n  1:\n    cmd: c\n")
    assert pipeline_stages(tmp_path) == {"1": StageDef("c")}
    write(tmp_path, "stages:\n  s:\n    cmd: c\n    wdir: sub\n")
    assert raises(pipeline_stages, tmp_path) == (
        f"{tmp_path / 'dvc.yaml'}: stage s: `wdir` is a form the gates' staleness check does not model"
    )
