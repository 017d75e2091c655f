"""gates/seals.py under mutation (docs/judge-mutation.md): every sealed file against dvc.lock, in-process.

Which stages are in scope (and the stages upstream of them), what dvc.lock lacks, which paths are
sealed (outs and folder deps), which file deps and params are stale, and each difference's one line,
on dvc.lock entries written by hand over small files (tests/test_seals.py does it with real DVC).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contracts.fileio import md5_file
from gates.artifacts import Artifacts
from gates.dvclock import DvcLock, dir_listing, dir_md5
from gates.seals import (
    MAX_NAMED,
    as_read_by_dvc,
    blessed,
    dep_checks,
    differences,
    dig,
    in_scope,
    leaf_diffs,
    missing,
    produced,
    sealed_paths,
    seals,
    stale,
    stale_deps,
    stale_params,
    upstream,
)

STAGES = {
    "corpus": {"outs": [{"path": "data/corpus.txt", "md5": "c1"}]},
    "tokenizer": {"deps": [{"path": "data/corpus.txt", "md5": "c1"}], "outs": [{"path": "data/tok", "md5": "t.dir"}]},
    "train": {"deps": [{"path": "data/tok/x.json", "md5": "x"}], "outs": [{"path": "runs/single", "md5": "r.dir"}]},
    "export": {"deps": [{"path": "runs", "md5": "r2.dir"}, {"path": "registry/pinned", "md5": "p.dir"}],
               "outs": [{"path": "exports/fresh", "md5": "e.dir"}]},
    "other": {"outs": [{"path": "o.txt", "md5": "o"}]},
    "empty": None,
}  # fmt: skip


def lock(root: Path = Path("."), stages=None, committed=(), pipeline=None) -> DvcLock:
    return DvcLock(root, STAGES if stages is None else stages, set(committed), pipeline or {})


# -- scope ------------------------------------------------------------------------------------------------


def test_upstream_follows_deps_to_the_outs_that_hold_them() -> None:
    assert upstream(lock(), {"corpus"}) == {"corpus"}
    assert upstream(lock(), {"tokenizer"}) == {"tokenizer", "corpus"}
    assert upstream(lock(), {"train"}) == {"train", "tokenizer", "corpus"}  # a file inside a folder out
    assert upstream(lock(), {"export"}) == {
        "export",
        "train",
        "tokenizer",
        "corpus",
    }  # a folder holding an out
    assert upstream(lock(), {"other", "empty"}) == {"other", "empty"}


def test_in_scope_is_every_stage_or_the_selected_and_their_inputs() -> None:
    every = lock(committed=["gone"], pipeline={"planned": []})
    assert in_scope(every, None) == sorted([*STAGES, "gone", "planned"])
    assert in_scope(every, ["train", "unknown"]) == ["corpus", "tokenizer", "train"]
    assert in_scope(every, ["gone"]) == ["gone"]
    assert in_scope(every, []) == []


def test_missing_names_stages_and_outs_dvc_lock_lacks() -> None:
    lk = lock(committed=["gone"], pipeline={"planned": [], "train": ["runs/single", "runs/extra.json"]})
    assert missing(lk, ["corpus", "train", "gone", "planned", "nowhere", "empty"]) == [
        "stage train: out runs/extra.json has no entry (dvc repro train)",
        "stage gone has no entry (dvc repro gone)",
        "stage planned has no entry (dvc repro planned)",
    ]


def test_sealed_paths_are_the_outs_and_the_folder_deps_no_stage_makes() -> None:
    assert sealed_paths(lock(), ["export", "train"]) == [
        ("exports/fresh", "e.dir"),
        ("registry/pinned", "p.dir"),
        ("runs", "r2.dir"),  # a folder dep holding an out is sealed as the dep it is too
        ("runs/single", "r.dir"),
    ]
    assert sealed_paths(lock(), ["tokenizer"]) == [("data/tok", "t.dir")]  # a file dep is no sealed path
    assert sealed_paths(lock(), ["empty"]) == []


def test_produced_and_blessed() -> None:
    assert produced(lock(), "data/tok/x.json") and produced(lock(), "o.txt")
    assert not produced(lock(), "registry/pinned") and not produced(lock(), "o.txt2")
    assert blessed("registry/index.json") and blessed("registry/goldens/e/v1.json")
    assert not blessed("registry/store.py") and not blessed("gates/registry/x.json")


# -- stale deps and params ------------------------------------------------------------------------------


def test_dep_checks_are_the_file_deps_no_stage_makes(tmp_path: Path) -> None:
    (tmp_path / "code.py").write_text("x = 1\n")
    stages = {
        "s": {
            "deps": [
                {"path": "code.py", "md5": md5_file(tmp_path / "code.py")},
                {"path": "gone.py", "md5": "g"},
                {"path": "o.txt", "md5": "o"},  # another stage's out
                {"path": "folder", "md5": "f.dir"},
                {"path": "registry/index.json", "md5": "i"},
            ]
        },
        "o": {"outs": [{"path": "o.txt", "md5": "o"}]},
    }
    lk = lock(tmp_path, stages)
    checks = dep_checks(lk, ["s", "o"])
    assert [(s, c.name, c.expected, c.actual) for s, c in checks] == [
        ("s", "code.py", md5_file(tmp_path / "code.py"), md5_file(tmp_path / "code.py")),
        ("s", "gone.py", "g", None),
    ]
    assert stale_deps(lk, ["s"]) == [("s", "dep gone.py md5 (missing), dvc.lock recorded g")]
    (tmp_path / "code.py").write_text("x = 2\n")
    lk = lock(tmp_path, stages)
    assert stale_deps(lk, ["s"])[0] == (
        "s",
        f"dep code.py md5 {md5_file(tmp_path / 'code.py')}, dvc.lock recorded {stages['s']['deps'][0]['md5']}",
    )


def test_dig_and_dvcs_yaml_1_2_floats() -> None:
    doc = {"train": {"lr": 0.1, "opt": {"beta": 0.9}}, "seed": 1}
    assert dig(doc, "train.opt.beta") == 0.9 and dig(doc, "seed") == 1 and dig(doc, "train") == doc["train"]
    assert (
        dig(doc, "train.wd") == "(absent)"
        and dig(doc, "seed.x") == "(absent)"
        and dig(None, "a") == "(absent)"
    )
    assert (
        as_read_by_dvc("1e-06") == 1e-06
        and as_read_by_dvc("-2.5E+3") == -2500.0
        and as_read_by_dvc(".5e1") == 5.0
    )
    assert (
        as_read_by_dvc("1.5") == "1.5" and as_read_by_dvc("e5") == "e5" and as_read_by_dvc("1e-6x") == "1e-6x"
    )
    assert as_read_by_dvc({"a": ["3e2", {"b": "1e0"}], "c": 4}) == {"a": [300.0, {"b": 1.0}], "c": 4}


def test_leaf_diffs_name_every_differing_leaf() -> None:
    assert leaf_diffs("k", 1, 1) == [] and leaf_diffs("k", 1, 2) == [("k", 1, 2)]
    assert leaf_diffs(
        "train", {"lr": 0.2, "b": {"c": 1}, "new": 5}, {"lr": 0.1, "b": {"c": 1}, "old": 6}
    ) == [
        ("train.lr", 0.2, 0.1),
        ("train.new", 5, "(absent)"),
        ("train.old", "(absent)", 6),
    ]
    assert leaf_diffs("t", {"a": 1}, 3) == [("t", {"a": 1}, 3)]


def test_stale_params_compare_each_recorded_key_with_the_file(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"train": {"lr": 0.2, "steps": 4}, "seed": 1}))
    stages = {
        "a": {"params": {"params.yaml": {"train": {"lr": "1e-01", "steps": 4}, "seed": 1}}},
        "b": {"params": {"params.yaml": {"seed": 2}, "other.yaml": {"x": 1}}},
        "c": {"params": {"params.yaml": None}},
        "d": None,
    }
    assert stale_params(lock(tmp_path, stages), ["a", "b", "c", "d"]) == [
        ("a", "params.yaml train.lr is 0.2, dvc.lock recorded 0.1"),
        ("b", "params.yaml seed is 1, dvc.lock recorded 2"),
        ("b", "other.yaml x is '(absent)', dvc.lock recorded 1"),
    ]


def test_stale_is_an_error_naming_stages_and_the_first_eight(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({f"k{i}": 0 for i in range(10)}))
    assert stale(lock(tmp_path, {"s": {}}), ["s"]) is None
    stages = {
        "s": {"params": {"params.yaml": {f"k{i}": 1 for i in range(10)}}},
        "t": {"deps": [{"path": "x.py", "md5": "m"}]},
    }
    o = stale(lock(tmp_path, stages), ["t", "s"])
    assert (o.status, o.measured, o.threshold) == ("error", 11, "every dep and param equal to dvc.lock")
    said = ["stage t: dep x.py md5 (missing), dvc.lock recorded m"] + [
        f"stage s: params.yaml k{i} is 0, dvc.lock recorded 1" for i in range(7)
    ]
    assert MAX_NAMED == 8
    assert o.message == (
        "stale: " + "; ".join(said) + " (and 3 more): the artifacts were made before this edit and would be "
        "judged as this tree's (dvc repro s t, or undo the edit)"
    )
    o = stale(lock(tmp_path, {"t": stages["t"]}), ["t"])
    assert o.message == (
        "stale: stage t: dep x.py md5 (missing), dvc.lock recorded m: the artifacts were made before this edit "
        "and would be judged as this tree's (dvc repro t, or undo the edit)"
    )


# -- differences and the verdict ------------------------------------------------------------------------


def folder(root: Path) -> str:
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "a.txt").write_text("a\n")
    (root / "d" / "sub" / "b.txt").write_text("b\n")
    return dir_md5(dir_listing(root / "d"))


def test_differences_of_a_file_and_a_folder(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("f\n")
    md5 = md5_file(tmp_path / "f.txt")
    lk = lock(tmp_path, {})
    assert differences(lk, "f.txt", md5) == (1, [])
    assert differences(lock(tmp_path, {}), "f.txt", "0" * 32) == (
        1,
        [f"f.txt: md5 {md5}, dvc.lock recorded {'0' * 32}"],
    )
    assert differences(lk, "nope.txt", "m") == (0, ["nope.txt: missing, dvc.lock recorded md5 m"])
    dmd5 = folder(tmp_path)
    assert differences(lock(tmp_path, {}), "d", dmd5) == (2, [])
    assert differences(lk, "nodir", "x.dir") == (0, ["nodir: missing folder, dvc.lock recorded x.dir"])
    (tmp_path / "d" / "a.txt").write_text("changed\n")
    n, why = differences(lock(tmp_path, {}), "d", dmd5)
    assert n == 2 and why == [
        f"d: folder hash {dir_md5(dir_listing(tmp_path / 'd'))}, dvc.lock recorded {dmd5}"
    ]


def sealed_tree(root: Path) -> DvcLock:
    dmd5 = folder(root)
    (root / "f.txt").write_text("f\n")
    stages = {
        "make": {"outs": [{"path": "d", "md5": dmd5}, {"path": "f.txt", "md5": md5_file(root / "f.txt")}]}
    }
    return DvcLock(root, stages, set(), {"make": ["d", "f.txt"]})


def test_the_seals_gate_passes_counting_every_file(tmp_path: Path) -> None:
    o = seals(Artifacts(tmp_path, sealed_tree(tmp_path)))
    assert (o.status, o.measured, o.threshold) == ("pass", 3, "every file equal to dvc.lock")
    assert o.message == "3 files of 1 stages equal dvc.lock"


def test_no_stage_is_a_skip(tmp_path: Path) -> None:
    o = seals(Artifacts(tmp_path, DvcLock(tmp_path, {}, set(), {})))
    assert (o.status, o.measured, o.threshold) == ("skip", None, "every file equal to dvc.lock")
    assert o.message == "no stage in dvc.yaml or dvc.lock"


def test_a_partial_lock_is_an_error(tmp_path: Path) -> None:
    lk = sealed_tree(tmp_path)
    lk.pipeline["later"] = []
    o = seals(Artifacts(tmp_path, lk))
    assert (o.status, o.measured, o.threshold) == ("error", 1, "dvc.lock records every stage and out")
    assert (
        o.message
        == "dvc.lock is partial: stage later has no entry (dvc repro later) (restore it: git checkout dvc.lock)"
    )


def test_a_stale_stage_is_the_verdict(tmp_path: Path) -> None:
    lk = sealed_tree(tmp_path)
    lk.stages["make"]["deps"] = [{"path": "code.py", "md5": "m"}]
    o = seals(Artifacts(tmp_path, lk))
    assert o.status == "error" and o.message.startswith("stale: stage make: dep code.py md5 (missing)")


def test_changed_files_are_named_eight_at_most(tmp_path: Path) -> None:
    lk = sealed_tree(tmp_path)
    (tmp_path / "f.txt").write_text("g\n")
    o = seals(Artifacts(tmp_path, lk))
    assert (o.status, o.measured, o.threshold) == ("error", 1, "every file equal to dvc.lock")
    assert o.message == (
        f"f.txt: md5 {md5_file(tmp_path / 'f.txt')}, dvc.lock recorded {lk.stages['make']['outs'][1]['md5']}: "
        "changed since dvc repro wrote it (dvc repro the stage, or restore it)"
    )
    outs = [{"path": f"x{i}.txt", "md5": "m"} for i in range(10)]
    lk = DvcLock(tmp_path, {"make": {"outs": outs}}, set(), {})
    o = seals(Artifacts(tmp_path, lk))
    assert o.measured == 10
    assert o.message == (
        "; ".join(f"x{i}.txt: missing, dvc.lock recorded md5 m" for i in range(8))
        + " (and 2 more): changed since dvc repro wrote it (dvc repro the stage, or restore it)"
    )


def test_seals_judges_only_the_scope(tmp_path: Path) -> None:
    lk = sealed_tree(tmp_path)
    lk.stages["other"] = {"outs": [{"path": "gone.txt", "md5": "m"}]}
    assert seals(Artifacts(tmp_path, lk, scope=["make"])).status == "pass"
    assert seals(Artifacts(tmp_path, lk)).status == "error"


@pytest.mark.parametrize("scope", [None, ["make"]])
def test_every_sealed_file_is_hashed_once_and_kept_for_the_gates(tmp_path: Path, scope) -> None:
    lk = sealed_tree(tmp_path)
    seals(Artifacts(tmp_path, lk, scope=scope))
    assert set(lk._md5) == {"d/a.txt", "d/sub/b.txt", "f.txt"}


# -- what the fast pass left: entries without path or md5, scope edges, the first eight --------------------


def test_entries_without_path_or_md5_are_sealed_as_empty(tmp_path: Path) -> None:
    stages = {"a": {"outs": [{"md5": "m1"}]}, "b": {"deps": [{"md5": "x"}], "outs": [{"path": "o.txt"}]}}
    lk = lock(tmp_path, stages)
    assert upstream(lk, {"b"}) == {"a", "b"}  # a dep without a path is held to the out without one
    assert sealed_paths(lk, ["a", "b"]) == [("", "m1"), ("o.txt", "")]
    (tmp_path / "o.txt").write_text("o")
    o = seals(Artifacts(tmp_path, lk))
    assert o.status == "error" and o.message.startswith(
        f": missing, dvc.lock recorded md5 m1; o.txt: md5 {md5_file(tmp_path / 'o.txt')}, dvc.lock recorded : "
    )
    deps = {"c": {"deps": [{"md5": "f.dir"}, {"path": "z.py"}]}}
    assert sealed_paths(lock(tmp_path, deps), ["c"]) == [("", "f.dir")]
    assert [(s, c.name, c.expected) for s, c in dep_checks(lock(tmp_path, deps), ["c"])] == [
        ("c", "z.py", "")
    ]


def test_only_folder_deps_no_stage_makes_are_sealed_paths() -> None:
    stages = {
        "tok": {"outs": [{"path": "data/tok", "md5": "t.dir"}]},
        "use": {"deps": [{"path": "data/tok", "md5": "t.dir"}, {"path": "code.py", "md5": "c"}]},
    }
    assert sealed_paths(lock(Path("."), stages), ["use"]) == []


def test_every_file_dep_is_checked_after_one_that_is_not(tmp_path: Path) -> None:
    stages = {"s": {"deps": [{"path": "folder", "md5": "f.dir"}, {"path": "registry/index.json", "md5": "i"},
                             {"path": "gone.py", "md5": "g"}]}}  # fmt: skip
    assert stale_deps(lock(tmp_path, stages), ["s"]) == [
        ("s", "dep gone.py md5 (missing), dvc.lock recorded g")
    ]


def test_leaf_diffs_of_keys_of_any_type() -> None:
    assert leaf_diffs("k", {1: "a", "b": 2}, {1: "b", "b": 2}) == [("k.1", "a", "b")]


def test_exactly_eight_problems_are_all_named(tmp_path: Path) -> None:
    outs = [{"path": f"x{i}.txt", "md5": "m"} for i in range(8)]
    o = seals(Artifacts(tmp_path, DvcLock(tmp_path, {"make": {"outs": outs}}, set(), {})))
    assert o.measured == 8 and "more)" not in o.message
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({f"k{i}": 0 for i in range(8)}))
    st = {"s": {"params": {"params.yaml": {f"k{i}": 1 for i in range(8)}}}}
    assert "more)" not in stale(lock(tmp_path, st), ["s"]).message


def test_every_gap_of_a_partial_lock_is_named(tmp_path: Path) -> None:
    lk = sealed_tree(tmp_path)
    lk.pipeline.update(later=[], other=[])
    o = seals(Artifacts(tmp_path, lk))
    assert o.measured == 2 and o.message == (
        "dvc.lock is partial: stage later has no entry (dvc repro later); stage other has no entry (dvc repro "
        "other) (restore it: git checkout dvc.lock)"
    )


def test_prefetch_hashes_every_sealed_file_ahead(tmp_path: Path) -> None:
    from gates.seals import prefetch

    folder(tmp_path)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "c.txt").write_text("c\n")
    (tmp_path / "f.txt").write_text("f\n")
    lk = lock(tmp_path, {})
    prefetch(lk, [("d", "x.dir"), ("e", "y.dir"), ("f.txt", "m"), ("gone", "z")])
    assert set(lk._md5) == {"d/a.txt", "d/sub/b.txt", "e/c.txt", "f.txt"}
    assert lk._md5["d/a.txt"] == md5_file(tmp_path / "d" / "a.txt")


def test_the_picture_lists_every_sealed_path_and_each_stale_dep(tmp_path: Path) -> None:
    from gates.seals import seals_picture

    lk = sealed_tree(tmp_path)
    dmd5 = lk.stages["make"]["outs"][0]["md5"]
    fmd5 = lk.stages["make"]["outs"][1]["md5"]
    lk.stages["make"]["outs"].append({"path": "gone", "md5": "g.dir"})
    lk.stages["make"]["outs"].append({"path": "gone.txt", "md5": "g"})
    (tmp_path / "code.py").write_text("x\n")
    lk.stages["make"]["deps"] = [
        {"path": "code.py", "md5": "c"},
        {"path": "same.py", "md5": md5_file(tmp_path / "f.txt")},
    ]
    (tmp_path / "same.py").write_text("f\n")
    pic = seals_picture(Artifacts(tmp_path, lk), {})

    def row(name: str, expected: str, actual: str | None) -> str:
        ok = expected == actual
        return (f"<tr class='{'ok' if ok else 'bad'}'><td>{name}</td><td><code>{expected}</code></td>"
                f"<td><code>{actual or '(absent)'}</code></td><td>{'equal' if ok else 'DIFFERS'}</td></tr>")  # fmt: skip

    rows = [
        row("d/ (2 files)", dmd5, dmd5),
        row("f.txt", fmd5, fmd5),
        row("gone/ (0 files)", "g.dir", None),
        row("gone.txt", "g", None),
        row("code.py (dep)", "c", md5_file(tmp_path / "code.py")),
    ]
    assert pic.html == (
        "<table class='files'><tr><th>file</th><th>dvc.lock md5</th><th>actual md5</th><th></th></tr>"
        + "".join(rows)
        + "</table>"
    )
    assert pic.caption == (
        "Every out of dvc.lock (a folder by DVC's .dir hash of its files), every folder dep such as "
        "registry/models, and each file dep (code, schema) that changed since dvc repro, hashed now. "
        "Pass: every row equal, no stage or out missing from dvc.lock, no params value changed."
    )
    scoped = seals_picture(Artifacts(tmp_path, lk, scope=["nothing"]), {})
    assert "<tr" not in scoped.html.replace("<tr><th>", "")
