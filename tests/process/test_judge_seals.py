"""gates/reading/seal_records.py and gates/judges/seals.py under mutation (docs/judge-mutation.md): every
sealed file against dvc.lock, in-process.

Which stages are in scope (and the stages upstream of them), what dvc.lock lacks, which paths are
sealed (outs and folder deps), the stale verdict (what gates/reading/dvcstatus.py finds, checked after the
outs; its own rules: tests/unit/test_judge_dvcstatus.py), and each difference's one line, on dvc.lock
entries written by hand over small files (tests/pipeline/test_seals.py does it with real DVC).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contracts.fileio import md5_file
from gates.judges import seals as judge
from gates.judges.seals import MAX_NAMED, named, pass_text
from gates.reading.artifacts import Artifacts
from gates.reading.dvclock import DvcLock, dir_listing, dir_md5
from gates.reading.dvcstatus import Change, frozen, status
from gates.reading.dvcyaml import Out, StageDef
from gates.reading.seal_records import (
    differences,
    in_scope,
    missing,
    recorded_md5,
    seal_records,
    sealed_paths,
    upstream,
)


def seals(a: Artifacts, declared: list[str] | None = None):
    """The seals' verdict on what the reader reads of `a` (gates/reading/seal_records.py)."""
    return judge.seals(seal_records(a, declared))


def stale(lk: DvcLock, stages: list[str]):
    return judge.stale(status(lk, stages))


def thawed(lk: DvcLock, stages: list[str]):
    return judge.thawed(frozen(lk, stages))


def out_of_scope(a: Artifacts, declared: list[str] | None):
    return judge.out_of_scope(seal_records(a, declared).scope_problems)


STAGES = {
    "corpus": {"outs": [{"path": "data/corpus.txt", "md5": "c1"}]},
    "tokenizer": {"deps": [{"path": "data/corpus.txt", "md5": "c1"}], "outs": [{"path": "data/tok", "md5": "t.dir"}]},
    "train": {"deps": [{"path": "data/tok/x.json", "md5": "x"}], "outs": [{"path": "runs/single", "md5": "r.dir"}]},
    "export": {"deps": [{"path": "runs", "md5": "r2.dir"}, {"path": "registry/pinned", "md5": "p.dir"}],
               "outs": [{"path": "exports/fresh", "md5": "e.dir"}]},
    "other": {"outs": [{"path": "o.txt", "md5": "o"}]},
    "empty": None,
}  # fmt: skip


def lock(root: Path = Path("."), stages=None, committed=(), pipeline=None, definitions=None) -> DvcLock:
    stages = STAGES if stages is None else stages
    return DvcLock(root, stages, set(committed), pipeline or {}, definitions or {})


def defined(stages: dict) -> dict[str, StageDef]:
    """dvc.yaml's stages as the lock entries written here say them (the gates' staleness reads both)."""
    return {
        name: StageDef(
            cmd=(body or {}).get("cmd"),
            deps=tuple(d["path"] for d in (body or {}).get("deps") or []),
            params=tuple((f, tuple(keys or {})) for f, keys in ((body or {}).get("params") or {}).items()),
            outs=tuple(Out(o["path"]) for o in (body or {}).get("outs") or []),
        )
        for name, body in stages.items()
    }


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


# -- stale: what gates/reading/dvcstatus.py finds, as one verdict ------------------------------------------------


def test_stale_is_an_error_naming_stages_and_the_first_eight(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({f"k{i}": 0 for i in range(10)}))
    fresh = {"s": {"params": {"params.yaml": {f"k{i}": 0 for i in range(10)}}}}
    assert stale(lock(tmp_path, fresh, definitions=defined(fresh)), ["s"]) is None
    stages = {
        "s": {"params": {"params.yaml": {f"k{i}": 1 for i in range(10)}}},
        "t": {"deps": [{"path": "x.py", "md5": "m"}]},
    }
    o = stale(lock(tmp_path, stages, definitions=defined(stages)), ["t", "s"])
    assert (o.status, o.measured, o.threshold) == ("error", 11, "every dep and param equal to dvc.lock")
    said = ["stage t: dep x.py md5 (missing), dvc.lock recorded m"] + [
        f"stage s: params.yaml k{i} is 0, dvc.lock recorded 1" for i in range(7)
    ]
    assert MAX_NAMED == 8
    assert o.message == (
        "stale: " + "; ".join(said) + " (and 3 more): the artifacts were made before this edit and would be "
        "judged as this tree's (dvc repro s t, or undo the edit)"
    )
    o = stale(lock(tmp_path, {"t": stages["t"]}, definitions=defined(stages)), ["t"])
    assert o.message == (
        "stale: stage t: dep x.py md5 (missing), dvc.lock recorded m: the artifacts were made before this edit "
        "and would be judged as this tree's (dvc repro t, or undo the edit)"
    )


def test_stale_leaves_outs_to_the_seals_and_names_a_changed_command(tmp_path: Path) -> None:
    stages = {"s": {"cmd": "old", "outs": [{"path": "gone.txt", "md5": "g"}]}}
    definitions = defined(stages)
    assert stale(lock(tmp_path, stages, definitions=definitions), ["s"]) is None  # an out: not stale's
    definitions["s"] = StageDef("new", outs=definitions["s"].outs)
    o = stale(lock(tmp_path, stages, definitions=definitions), ["s"])
    assert (o.measured, o.message) == (
        1,
        "stale: stage s: cmd 'new', dvc.lock recorded 'old': the artifacts were made before this edit and would "
        "be judged as this tree's (dvc repro s, or undo the edit)",
    )
    assert stale(lock(tmp_path, stages, definitions=definitions), ["other"]) is None  # only `stages`


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
    return DvcLock(root, stages, set(), {"make": ["d", "f.txt"]}, defined(stages))


def test_the_seals_gate_passes_counting_every_file(tmp_path: Path) -> None:
    o = seals(Artifacts(tmp_path, sealed_tree(tmp_path)))
    assert (o.status, o.measured, o.threshold) == ("pass", 3, "every file equal to dvc.lock")
    assert o.message == (
        "3 files of 1 stages equal dvc.lock; scope not declared (gates.scope.stages): judged the stages "
        "dvc.yaml defines"
    )


def test_no_stage_is_an_error_and_a_stage_outside_the_selection_a_skip(tmp_path: Path) -> None:
    """An empty pipeline judges nothing (issue #51: `stages: {}` passed with every gate skipped)."""
    o = seals(Artifacts(tmp_path, DvcLock(tmp_path, {}, set(), {})))
    assert (o.status, o.measured, o.threshold) == (
        "error", 1, "dvc.yaml defines every stage and dep the verdict needs"
    )  # fmt: skip
    assert o.message.startswith(
        "dvc.yaml defines no stage: the pipeline is empty and nothing would be judged"
    )
    lk = sealed_tree(tmp_path)
    o = seals(Artifacts(tmp_path, lk, scope=["elsewhere"]))  # --only a gate whose stage this project lacks
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


def test_a_stale_stage_is_the_verdict_after_the_outs(tmp_path: Path) -> None:
    lk = sealed_tree(tmp_path)
    lk.stages["make"]["deps"] = [{"path": "code.py", "md5": "m"}]
    lk.definitions["make"] = StageDef(None, ("code.py",), outs=lk.definitions["make"].outs)
    o = seals(Artifacts(tmp_path, lk))
    assert o.status == "error" and o.message.startswith("stale: stage make: dep code.py md5 (missing)")
    (tmp_path / "f.txt").write_text("g\n")  # a tampered out is named as such, not as its stage's staleness
    o = seals(Artifacts(tmp_path, sealed_tree_again(tmp_path, lk)))
    assert o.status == "error" and o.message.startswith("f.txt: md5 ")
    assert o.threshold == "every file equal to dvc.lock"


def sealed_tree_again(root: Path, lk: DvcLock) -> DvcLock:
    """The same entries, hashed afresh (a DvcLock hashes each file once per check)."""
    return DvcLock(root, lk.stages, lk.committed, lk.pipeline, lk.definitions)


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
    lk = DvcLock(tmp_path, {"make": {"outs": outs}}, set(), {}, defined({"make": {"outs": outs}}))
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
    lk = lock(tmp_path, stages, definitions={"a": StageDef(None), "b": StageDef(None)})
    assert upstream(lk, {"b"}) == {"a", "b"}  # a dep without a path is held to the out without one
    assert sealed_paths(lk, ["a", "b"]) == [("", "m1"), ("o.txt", "")]
    (tmp_path / "o.txt").write_text("o")
    o = seals(Artifacts(tmp_path, lk))
    assert o.status == "error" and o.message.startswith(
        f": missing, dvc.lock recorded md5 m1; o.txt: md5 {md5_file(tmp_path / 'o.txt')}, dvc.lock recorded : "
    )
    deps = {"c": {"deps": [{"md5": "f.dir"}, {"path": "z.py"}]}}
    assert sealed_paths(lock(tmp_path, deps), ["c"]) == [("", "f.dir")]


def test_only_folder_deps_no_stage_makes_are_sealed_paths() -> None:
    stages = {
        "tok": {"outs": [{"path": "data/tok", "md5": "t.dir"}]},
        "use": {"deps": [{"path": "data/tok", "md5": "t.dir"}, {"path": "code.py", "md5": "c"}]},
    }
    assert sealed_paths(lock(Path("."), stages), ["use"]) == []


def test_exactly_eight_problems_are_all_named(tmp_path: Path) -> None:
    outs = [{"path": f"x{i}.txt", "md5": "m"} for i in range(8)]
    o = seals(
        Artifacts(tmp_path, DvcLock(tmp_path, {"make": {"outs": outs}}, set(), {}, {"make": StageDef(None)}))
    )
    assert o.measured == 8 and "more)" not in o.message
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({f"k{i}": 0 for i in range(8)}))
    st = {"s": {"params": {"params.yaml": {f"k{i}": 1 for i in range(8)}}}}
    o = stale(lock(tmp_path, st, definitions=defined(st)), ["s"])
    assert o.measured == 8 and "more)" not in o.message


def test_every_gap_of_a_partial_lock_is_named(tmp_path: Path) -> None:
    lk = sealed_tree(tmp_path)
    lk.pipeline.update(later=[], other=[])
    o = seals(Artifacts(tmp_path, lk))
    assert o.measured == 2 and o.message == (
        "dvc.lock is partial: stage later has no entry (dvc repro later); stage other has no entry (dvc repro "
        "other) (restore it: git checkout dvc.lock)"
    )


def test_prefetch_hashes_every_sealed_file_ahead(tmp_path: Path) -> None:
    from gates.reading.seal_records import prefetch

    folder(tmp_path)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "c.txt").write_text("c\n")
    (tmp_path / "f.txt").write_text("f\n")
    lk = lock(tmp_path, {})
    prefetch(lk, [("d", "x.dir"), ("e", "y.dir"), ("f.txt", "m"), ("gone", "z")])
    assert set(lk._md5) == {"d/a.txt", "d/sub/b.txt", "e/c.txt", "f.txt"}
    assert lk._md5["d/a.txt"] == md5_file(tmp_path / "d" / "a.txt")


def test_recorded_md5_of_a_dep_or_no_entry() -> None:
    lk = lock(stages={"s": {"deps": [{"path": "a", "md5": "m"}, {"path": "b"}]}, "t": None})
    dep = {name: Change("s", "dep", name, "modified", "") for name in ("a", "b", "c")}
    assert [recorded_md5(lk, dep[n]) for n in "abc"] == ["m", "(no entry)", "(no entry)"]
    assert recorded_md5(lk, Change("t", "dep", "a", "modified", "")) == "(no entry)"
    assert recorded_md5(lk, Change("u", "dep", "a", "modified", "")) == "(no entry)"


def test_the_picture_lists_every_sealed_path_and_each_stale_dep(tmp_path: Path) -> None:
    from gates.judges.seals import GATE

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
    (tmp_path / "new.py").write_text("n\n")  # a dep dvc.yaml names and dvc.lock does not
    lk.definitions["make"] = StageDef(
        None, ("code.py", "same.py", "new.py"), outs=lk.definitions["make"].outs
    )
    pic = GATE.draw(Artifacts(tmp_path, lk), {})

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
        row("new.py (dep)", "(no entry)", md5_file(tmp_path / "new.py")),
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
    scoped = GATE.draw(Artifacts(tmp_path, lk, scope=["nothing"]), {})
    assert "<tr" not in scoped.html.replace("<tr><th>", "")


# -- issue #51: the declared scope first, frozen stages last ---------------------------------------------------


def test_named_lists_eight_and_counts_the_rest() -> None:
    assert named([]) == "" and named(["a"]) == "a" and named(["a", "b"]) == "a; b"
    assert named([str(i) for i in range(8)]) == "; ".join(map(str, range(8)))
    assert named([str(i) for i in range(10)]) == "; ".join(map(str, range(8))) + " (and 2 more)"


def scoped_tree(root: Path) -> DvcLock:
    """A sealed tree whose stage `make` runs `python3 make.py` (a project script importing helper.py)."""
    (root / "make.py").write_text("import helper\n")
    (root / "helper.py").write_text("X = 1\n")
    lk = sealed_tree(root)
    d = lk.definitions["make"]
    lk.definitions["make"] = StageDef("python3 make.py", ("make.py", "helper.py"), outs=d.outs)
    lk.stages["make"]["cmd"] = "python3 make.py"
    lk.stages["make"]["deps"] = [{"path": p, "md5": md5_file(root / p)} for p in ("make.py", "helper.py")]
    return lk


def test_out_of_scope_is_the_first_verdict_and_names_every_gap(tmp_path: Path) -> None:
    lk = scoped_tree(tmp_path)
    a = Artifacts(tmp_path, lk)
    assert out_of_scope(a, ["make"]) is None and out_of_scope(a, None) is None
    lk.definitions["make"] = StageDef("python3 make.py", ("make.py",), outs=lk.definitions["make"].outs)
    o = out_of_scope(a, ["make", "gone"])
    assert (o.status, o.measured, o.threshold) == (
        "error",
        2,
        "dvc.yaml defines every stage and dep the verdict needs",
    )
    assert o.message == (
        "stage make: dvc.yaml lacks deps its command imports: helper.py; stage gone (gates.scope.stages) is not in "
        "dvc.yaml: the verdict would judge less than the pipeline (restore dvc.yaml: git checkout dvc.yaml; or add "
        "each dep and dvc repro the stage)"
    )
    (tmp_path / "f.txt").write_text("tampered\n")  # the scope is judged before any file
    assert seals(a, ["make"]).message == o.message.replace(
        "; stage gone (gates.scope.stages) is not in dvc.yaml", ""
    )


def test_thawed_names_frozen_stages_whose_deps_changed_with_advice_that_works(tmp_path: Path) -> None:
    lk = scoped_tree(tmp_path)
    make = lk.definitions["make"]
    lk.definitions["make"] = StageDef(make.cmd, make.deps, outs=make.outs, frozen=True)
    assert thawed(lk, ["make"]) == (None, ["make"]) and thawed(lk, []) == (None, [])
    o = seals(Artifacts(tmp_path, lk), ["make"])
    assert (o.status, o.message) == (
        "pass",
        "3 files of 1 stages equal dvc.lock; frozen, not rerun by dvc repro (deps and params unchanged): make",
    )
    (tmp_path / "helper.py").write_text("X = 2\n")
    lk = DvcLock(tmp_path, lk.stages, set(), lk.pipeline, {**lk.definitions, "also": lk.definitions["make"]})
    lk.stages["also"] = lk.stages["make"]
    o, still = thawed(lk, ["also", "make"])
    now = md5_file(tmp_path / "helper.py")
    was = lk.stages["make"]["deps"][1]["md5"]
    assert still == [] and (o.status, o.measured, o.threshold) == (
        "error",
        2,
        "every frozen stage's deps and params equal to dvc.lock",
    )
    assert o.message == (
        f"frozen: stage also: dep helper.py md5 {now}, dvc.lock recorded {was}; stage make: dep helper.py md5 "
        f"{now}, dvc.lock recorded {was}: dvc repro never reruns a frozen stage, so its artifacts are older than "
        "this tree (dvc unfreeze also && dvc unfreeze make && dvc repro also make, or undo the edit)"
    )
    assert seals(Artifacts(tmp_path, lk), ["make"]).message == o.message  # after the outs and staleness


def test_pass_text_says_what_the_verdict_rests_on() -> None:
    assert pass_text(3, ["a"], [], ["a"]) == "3 files of 1 stages equal dvc.lock"
    assert pass_text(0, ["a", "b"], ["a", "b"], ["a"]) == (
        "0 files of 2 stages equal dvc.lock; frozen, not rerun by dvc repro (deps and params unchanged): a, b"
    )
    assert pass_text(1, [], [], None) == (
        "1 files of 0 stages equal dvc.lock; scope not declared (gates.scope.stages): judged the stages dvc.yaml defines"
    )


def test_the_gate_takes_the_declared_scope_from_its_thresholds(tmp_path: Path) -> None:
    from gates.judges.seals import GATE

    lk = scoped_tree(tmp_path)
    a = Artifacts(tmp_path, lk)
    assert GATE.takes == ("scope",)
    assert GATE.run(a, {"scope": {"stages": ["make"]}}).message == "3 files of 1 stages equal dvc.lock"
    assert GATE.run(a, {"scope": {"stages": ["gone"]}}).status == "error"
    assert GATE.run(a, {}).message.endswith(
        "; scope not declared (gates.scope.stages): judged the stages dvc.yaml defines"
    )


def test_the_gate_takes_the_working_declaration_with_a_params_file_outside_git(tmp_path: Path) -> None:
    from gates.judges.seals import GATE
    from params.config import Params

    lk = scoped_tree(tmp_path)
    (tmp_path / "params.yaml").write_text("gates:\n  scope:\n    stages: [make]\n")
    a = Artifacts(tmp_path, lk, Params(raw={"gates": {}}, source=str(tmp_path / "params.yaml")))
    assert GATE.run(a, {"scope": {"stages": ["make"]}}).message == "3 files of 1 stages equal dvc.lock"
    assert GATE.run(a, {}).message.endswith(
        "; scope not declared (gates.scope.stages): judged the stages dvc.yaml defines"
    )


def test_the_gate_holds_a_project_in_git_to_the_committed_declaration(tmp_path: Path) -> None:
    import subprocess

    from gates.judges.seals import GATE
    from params.config import Params

    lk = scoped_tree(tmp_path)
    (tmp_path / "params.yaml").write_text("gates:\n  scope:\n    stages: [make, gone]\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "params.yaml"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    a = Artifacts(tmp_path, lk, Params(raw={"gates": {}}, source=str(tmp_path / "params.yaml")))
    o = GATE.run(a, {})  # nothing declared in the working file: HEAD's declaration holds
    assert o.status == "error" and o.message.startswith("stage gone (gates.scope.stages) is not in dvc.yaml")


def test_the_scope_is_the_verdict_before_a_folder_dvc_refuses_to_hash(tmp_path: Path) -> None:
    from contracts.validate import ValidationError

    lk = scoped_tree(tmp_path)
    (tmp_path / "d" / ".dvcignore").write_text("x\n")  # DVC refuses to hash d
    with pytest.raises(ValidationError, match=r"\.dvcignore file should not be in collected dir path"):
        seals(Artifacts(tmp_path, lk), ["make"])
    o = seals(Artifacts(tmp_path, DvcLock(tmp_path, lk.stages, set(), lk.pipeline, lk.definitions)), ["gone"])
    assert o.status == "error" and o.message.startswith("stage gone (gates.scope.stages) is not in dvc.yaml")


def test_a_file_that_cannot_be_hashed_is_raised_after_the_scope(tmp_path: Path, monkeypatch) -> None:
    from gates.reading import seal_records as module

    def broken(lock: DvcLock, paths: list) -> None:
        raise OSError("unreadable")

    monkeypatch.setattr(module, "prefetch", broken)
    lk = scoped_tree(tmp_path)
    assert seals(Artifacts(tmp_path, lk), ["gone"]).status == "error"  # the scope's verdict first
    with pytest.raises(OSError, match="unreadable"):
        seals(Artifacts(tmp_path, lk), ["make"])
