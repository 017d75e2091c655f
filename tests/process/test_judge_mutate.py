"""In-process tests of the mutation campaign's verdict logic (gates/campaigns/mutate.py).

The campaign's score is a product figure (docs/mutation.md): how a mutant is classified, how the
scores are computed, how runs are compared, how DVC's output is read and which stages and gates
are chosen are tested here on small hand-built inputs (no DVC run, no training, no subprocess), so
that a mutated comparison, constant or dropped branch changes an asserted outcome.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import REPO
from contracts.fileio import canonical_json
from contracts.outputs import OutputRefused
from contracts.validate import ValidationError
from gates.campaigns import mutate
from gates.campaigns.mutants import Catalogue, Mutant
from gates.campaigns.mutants import load as mutants_load
from gates.judges import catalogue as gate_catalogue
from params.config import narrow_scope

ALL_GATES = [g.id for g in gate_catalogue.GATES]


def mutant(mid: str = "m", expect: list[str] | None = None, equivalent: bool = False) -> Mutant:
    return Mutant(mid, "loss", "what", expect if expect is not None else ["fresh_train"], [], equivalent)


def classify(
    m: Mutant,
    gates: dict[str, str],
    identical: bool = False,
    crashed: str | None = None,
    timed_out: bool = False,
    why: str = "",
) -> mutate.Outcome:
    return mutate.classify(m, gates, identical, (["train@single"], ["corpus"]), 1.26, crashed, timed_out, why)


# ---- reading DVC's output -------------------------------------------------------------------------


def test_tail_joins_the_last_lines_stripped() -> None:
    text = "one\n  two  \nthree\nfour\n\n"
    assert mutate.tail(text) == "two | three | four"
    assert mutate.tail(text, 2) == "three | four"
    assert mutate.tail(text, 1) == "four"
    assert mutate.tail("  only  ") == "only"


def test_crashed_stages_names_the_last_failed_line_or_dvc_repro() -> None:
    out = "ERROR: failed to reproduce 'corpus'\nsomething 'quoted'\nERROR: failed to reproduce 'a' and 'b@c'"
    assert mutate.crashed_stages(out) == "a, b@c"
    assert mutate.crashed_stages("ERROR: failed to reproduce 'export'") == "export"
    assert mutate.crashed_stages("ERROR: failed to reproduce stages") == "dvc repro"  # no name quoted
    assert mutate.crashed_stages("'x' went wrong") == "dvc repro"
    assert mutate.crashed_stages("") == "dvc repro"


@pytest.mark.parametrize(
    ("out", "line"),
    [
        # DVC's own summary lines are skipped even when they name an Error (at any indentation)
        ("ValueError: bad shape\nERROR: failed to reproduce 'x': ChildFailedError", "ValueError: bad shape"),
        ("ValueError: bad shape\n   ERROR: failed to reproduce 'x': KeyError", "ValueError: bad shape"),
        ("KeyError: 'k'\nWARNING: failed to run: OSError", "KeyError: 'k'"),
        # a stage's own lower-case line is not DVC's summary
        (
            "error: failed to load params.yaml\nERROR: failed to reproduce 'x'",
            "error: failed to load params.yaml",
        ),
        ("warning: failed to cache: KeyError 'x'\nlast", "warning: failed to cache: KeyError 'x'"),
        # another stage's progress line is skipped
        ("error: rank 0 failed\n[pilot] all proc: FAILED (RuntimeError: x)", "error: rank 0 failed"),
        # the project's lines come before any other Error, the last one wins
        ("error: first\nerror: second\nValueError: later", "error: second"),
        ("RankFailed: rank 1 exited 3\nValueError: later", "RankFailed: rank 1 exited 3"),
        ("RuntimeError: boom\nKeyError: later", "RuntimeError: boom"),
        ("  error: indented  \nok", "error: indented"),
        # else the last line naming an Error, else the output's tail
        ("KeyError: 'k'\nValueError: v\nlast line", "ValueError: v"),
        ("KeyError: 'k'\nlast line", "KeyError: 'k'"),
        ("first\nan error here\nERROR in caps\nlast", "ERROR in caps | last"),
        ("a\nb\nc", "b | c"),
    ],
)
def test_error_line_picks_the_stages_own_error(out: str, line: str) -> None:
    assert mutate.error_line(out) == line


def test_error_line_is_cut_at_300_characters() -> None:
    assert mutate.error_line("error: " + "x" * 400 + "\nok") == "error: " + "x" * 293
    assert len(mutate.error_line("a\n" + "y" * 400)) == 300


# ---- the environment of a tree ---------------------------------------------------------------------


def test_tree_env_puts_the_tree_first_and_keeps_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", "/wheels", "", "/more"]))
    monkeypatch.setenv("JM_KEEP", "kept")
    monkeypatch.delenv("DVC_NO_ANALYTICS", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    env = mutate.tree_env(Path("/t/tree"))
    assert env["PYTHONPATH"] == os.pathsep.join(["/t/tree", "/wheels", "/more"])
    assert (env["DVC_NO_ANALYTICS"], env["PYTHONDONTWRITEBYTECODE"], env["JM_KEEP"]) == ("1", "1", "kept")
    monkeypatch.delenv("PYTHONPATH")
    assert mutate.tree_env(Path("/t/tree"))["PYTHONPATH"] == "/t/tree"


# ---- stages, gates, the pipeline ------------------------------------------------------------------

DVC_YAML = """\
stages:
  corpus:
    cmd: echo corpus
  train:
    foreach: [single, thread]
    do:
      cmd: echo ${item}
  trainer:
    cmd: echo t
  scaling:
    cmd: echo s
"""

DVC_LOCK = """\
schema: '2.0'
stages:
  corpus:
    cmd: echo corpus
  train@single:
    cmd: echo single
  train@thread:
    cmd: echo thread
  trainer:
    cmd: echo t
  scaling:
    cmd: echo s
"""


def test_stages_expands_foreach_and_skips_by_name_or_prefix(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    assert mutate.stages(tmp_path, []) == ["corpus", "train@single", "train@thread", "trainer", "scaling"]
    assert mutate.stages(tmp_path, ["scaling"]) == ["corpus", "train@single", "train@thread", "trainer"]
    assert mutate.stages(tmp_path, ["train"]) == ["corpus", "trainer", "scaling"]
    assert mutate.stages(tmp_path, ["train@thread", "corpus"]) == ["train@single", "trainer", "scaling"]


def test_stages_of_a_bad_pipeline_is_a_campaign_error(tmp_path: Path) -> None:
    with pytest.raises(mutate.CampaignError, match=r"dvc\.yaml: missing") as e:
        mutate.stages(tmp_path, [])
    assert e.value.exit_code == 2
    (tmp_path / "dvc.yaml").write_text("stages: [a, b]\n")
    with pytest.raises(mutate.CampaignError, match="expected a dictionary, in stages"):
        mutate.stages(tmp_path, [])


def test_drop_stages_removes_the_skipped_stages_from_yaml_and_lock(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    (tmp_path / "dvc.lock").write_text(DVC_LOCK)
    mutate.drop_stages(tmp_path, ["train", "scaling"])
    import yaml

    assert list(yaml.safe_load((tmp_path / "dvc.yaml").read_text())["stages"]) == ["corpus", "trainer"]
    lock = yaml.safe_load((tmp_path / "dvc.lock").read_text())
    assert list(lock["stages"]) == ["corpus", "trainer"] and lock["schema"] == "2.0"
    assert "echo ${item}" not in (tmp_path / "dvc.yaml").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dvc.lock", "dvc.yaml"]  # written atomically


def test_drop_stages_without_a_lock_and_with_nothing_skipped(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    mutate.drop_stages(tmp_path, ["scaling"])
    assert not (tmp_path / "dvc.lock").exists()
    assert "scaling" not in (tmp_path / "dvc.yaml").read_text()
    assert "trainer" in (tmp_path / "dvc.yaml").read_text()
    (tmp_path / "dvc.lock").write_text(DVC_LOCK)
    mutate.drop_stages(tmp_path, [])
    assert (tmp_path / "dvc.lock").read_text() == DVC_LOCK  # a round trip keeps DVC's dialect


PARAMS_SCOPED = """\
model: {d: 1}
gates:
  # the stages the verdict needs
  scope:
    stages: [corpus, train@proc, scaling, pilot, 7]
"""


def test_drop_stages_narrows_the_declared_scope_of_params(tmp_path: Path) -> None:
    """The scratch pipeline without a stage declares a scope without it (every foreach item of it), and
    keeps the rest of params.yaml as written; nothing to drop writes nothing."""
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    (tmp_path / "params.yaml").write_text(PARAMS_SCOPED)
    mutate.drop_stages(tmp_path, ["scaling", "train"])
    text = (tmp_path / "params.yaml").read_text()
    assert text == PARAMS_SCOPED.replace("[corpus, train@proc, scaling, pilot, 7]", "[corpus, pilot, 7]")
    narrow_scope(tmp_path / "params.yaml", ["pilot", "7"])
    assert "stages: [corpus]\n" in (tmp_path / "params.yaml").read_text()
    before = (tmp_path / "params.yaml").stat().st_mtime_ns
    narrow_scope(tmp_path / "params.yaml", ["scaling"])  # nothing of it declared
    narrow_scope(tmp_path / "params.yaml", [])
    assert (tmp_path / "params.yaml").stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dvc.yaml", "params.yaml"]  # written atomically


def test_narrow_scope_leaves_a_params_file_without_a_scope_alone(tmp_path: Path) -> None:
    for text in ("model: {d: 1}\n", "gates: {perf: 1}\n", "gates:\n  scope: {other: 1}\n", ""):
        (tmp_path / "params.yaml").write_text(text)
        narrow_scope(tmp_path / "params.yaml", ["scaling"])
        assert (tmp_path / "params.yaml").read_text() == text
    narrow_scope(tmp_path / "absent.yaml", ["scaling"])
    assert not (tmp_path / "absent.yaml").exists()


def test_drop_stages_reads_the_pipeline_bounded_first(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    deep = "schema: '2.0'\nstages: {}\nx: " + "[" * 40 + "]" * 40 + "\n"
    (tmp_path / "dvc.lock").write_text(deep)
    with pytest.raises(ValidationError, match=r"dvc\.lock.*nested deeper than 32 levels"):
        mutate.drop_stages(tmp_path, ["scaling"])
    assert (tmp_path / "dvc.lock").read_text() == deep


def test_judged_gates_are_the_catalogue_less_seals_and_the_skipped() -> None:
    assert mutate.judged_gates([]) == [g for g in ALL_GATES if g != "seals"]
    skipped = mutate.judged_gates(["scaling", "perf", "pilot.base"])
    assert skipped == [
        g for g in ALL_GATES if g not in ("seals", "scaling", "pilot.base") and not g.startswith("perf.")
    ]
    assert "pilot.base" not in skipped and "pilot.all" in skipped
    assert mutate.judged_gates(["pilo", "perf.", "loss_match.pro"]) == mutate.judged_gates([])
    assert "loss_match.thread" not in mutate.judged_gates(["loss_match"])
    assert "loss_match.proc" not in mutate.judged_gates(["loss_match"])


def test_matches_a_gate_by_id_or_prefix() -> None:
    assert mutate.matches("loss_match.proc", ["fresh_train", "loss_match"])
    assert mutate.matches("loss_match", ["loss_match"])
    assert mutate.matches("fresh_train", ["x", "fresh_train"])
    assert not mutate.matches("loss_matchx", ["loss_match"])
    assert not mutate.matches("loss_match", ["loss_match.proc"])
    assert not mutate.matches("fresh_train", [])


# ---- the baseline's stamp, files, work folder -----------------------------------------------------


def test_stamp_hashes_the_overrides_and_every_stamped_file(tmp_path: Path) -> None:
    (tmp_path / "xtrain").mkdir()
    (tmp_path / "gates").mkdir()
    (tmp_path / "xtrain" / "a.py").write_bytes(b"A")
    (tmp_path / "params.yaml").write_bytes(b"P")
    (tmp_path / "gates" / "g.py").write_bytes(b"G")
    files = ["params.yaml", "xtrain/a.py", "gates/g.py"]
    h = hashlib.sha256(b"profile=cpu\nx=1")
    h.update(b"params.yaml\0P")
    h.update(b"xtrain/a.py\0A")
    key = mutate.stamp(tmp_path, files, ["profile=cpu", "x=1"])
    assert key == h.hexdigest()[:20] and len(key) == 20
    (tmp_path / "gates" / "g.py").write_bytes(b"changed")  # the judge's code is not stamped
    assert mutate.stamp(tmp_path, files, ["profile=cpu", "x=1"]) == key
    assert mutate.stamp(tmp_path, files, ["profile=cpu"]) != key
    (tmp_path / "xtrain" / "a.py").write_bytes(b"B")
    assert mutate.stamp(tmp_path, files, ["profile=cpu", "x=1"]) != key


def test_copy_files_makes_the_folders(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "f.txt").write_text("deep")
    (src / "top.txt").write_text("top")
    dest.mkdir()
    mutate.copy_files(src, dest, ["a/b/f.txt", "top.txt"])
    assert (dest / "a" / "b" / "f.txt").read_text() == "deep" and (dest / "top.txt").read_text() == "top"
    mutate.copy_files(src, dest, ["a/b/f.txt"])  # again: the folders exist already
    assert (dest / "a" / "b" / "f.txt").read_text() == "deep"


def test_an_earlier_campaign_folder_is_recognised(tmp_path: Path) -> None:
    assert mutate._earlier_campaign(tmp_path)  # empty
    for name in ("cache", "mutants"):
        (tmp_path / name).mkdir()
    (tmp_path / "outcomes.jsonl").write_text("")
    assert mutate._earlier_campaign(tmp_path)  # no base yet
    (tmp_path / "base").mkdir()
    assert not mutate._earlier_campaign(tmp_path)  # a base with no stamp
    (tmp_path / "base" / ".mutate-stamp").mkdir()
    assert not mutate._earlier_campaign(tmp_path)  # the stamp is a file
    (tmp_path / "base" / ".mutate-stamp").rmdir()
    (tmp_path / "base" / ".mutate-stamp").write_text("k")
    assert mutate._earlier_campaign(tmp_path)
    (tmp_path / "notes.txt").write_text("")
    assert not mutate._earlier_campaign(tmp_path)  # a name a campaign never writes


def catalogue(**kw: Any) -> Catalogue:
    base: dict[str, Any] = {"mutants": [], "profiles": {"cpu": ["profile=cpu"], "none": []},
                            "skip_stages": ["scaling"], "skip_gates": ["scaling", "perf"], "timeout_s": 60,
                            "source": "cat.yaml"}  # fmt: skip
    return Catalogue(**{**base, **kw})


def test_overrides_of_the_profile_and_an_unknown_profile(tmp_path: Path) -> None:
    c = mutate.Campaign(tmp_path, tmp_path / "work", catalogue(), "cpu")
    assert c.overrides() == ["profile=cpu"] and c.base == tmp_path / "work" / "base"
    assert mutate.Campaign(tmp_path, tmp_path, catalogue(), "none").overrides() == []
    with pytest.raises(mutate.CampaignError, match=r"^cat\.yaml: profiles: no profile 'gpu'$"):
        mutate.Campaign(tmp_path, tmp_path, catalogue(), "gpu").overrides()


# ---- comparing runs ---------------------------------------------------------------------------------

METRICS = {k: [i, i + 0.5] for i, k in enumerate(mutate.SAME_KEYS)}


def write_tree(root: Path, runs: tuple[str, ...] = mutate.RUNS, exports: tuple[str, ...] = mutate.EXPORTS,
               **changed: Any) -> Path:  # fmt: skip
    for r in runs:
        (root / "runs" / r).mkdir(parents=True, exist_ok=True)
        m = {**METRICS, "seconds": 1.0, **changed.get(r, {})}
        (root / "runs" / r / "metrics.json").write_text(json.dumps(m))
    for e in exports:
        (root / "exports" / e).mkdir(parents=True, exist_ok=True)
        files = {"model.safetensors": "a" * 32, **changed.get(e, {})}
        (root / "exports" / e / "manifest.json").write_text(json.dumps({"files": files, "seconds": 2}))
    return root


def test_fingerprint_holds_the_run_numbers_and_export_md5s(tmp_path: Path) -> None:
    fp = mutate.fingerprint(write_tree(tmp_path, runs=("single", "proc"), exports=("pinned",)))
    assert fp == {
        "runs/single": METRICS,
        "runs/thread": None,
        "runs/proc": METRICS,
        "exports/fresh": None,
        "exports/pinned": {"model.safetensors": "a" * 32},
    }
    (tmp_path / "runs" / "thread").mkdir()
    (tmp_path / "runs" / "thread" / "metrics.json").write_text('{"train_loss": [1]}')
    assert mutate.fingerprint(tmp_path)["runs/thread"] == {k: ([1] if k == "train_loss" else None)
                                                          for k in mutate.SAME_KEYS}  # fmt: skip
    (tmp_path / "runs" / "thread" / "metrics.json").write_text("{}")
    assert mutate.fingerprint(tmp_path)["runs/thread"] is None  # an empty record is no run


@pytest.mark.parametrize("key", mutate.SAME_KEYS)
def test_same_runs_compares_every_key(tmp_path: Path, key: str) -> None:
    base = write_tree(tmp_path / "base")
    assert mutate.same_runs(base, write_tree(tmp_path / "same", thread={"seconds": 9.0}))
    assert not mutate.same_runs(base, write_tree(tmp_path / "diff", proc={key: [0.0]}))


def test_same_runs_compares_exports_and_needs_every_part(tmp_path: Path) -> None:
    base = write_tree(tmp_path / "base")
    assert not mutate.same_runs(base, write_tree(tmp_path / "md5", fresh={"model.safetensors": "b" * 32}))
    assert not mutate.same_runs(base, write_tree(tmp_path / "extra", pinned={"tokenizer.json": "c" * 32}))
    assert not mutate.same_runs(base, write_tree(tmp_path / "norun", runs=("single", "thread")))
    # both missing the same part: equal, but not proven bitwise equal
    part = write_tree(tmp_path / "part", exports=("fresh",))
    assert not mutate.same_runs(part, write_tree(tmp_path / "part2", exports=("fresh",)))
    for r in mutate.RUNS:
        short = write_tree(tmp_path / f"no-{r}", runs=tuple(x for x in mutate.RUNS if x != r))
        assert not mutate.same_runs(
            short, write_tree(tmp_path / f"no-{r}2", runs=tuple(x for x in mutate.RUNS if x != r))
        )


# ---- classifying a mutant ---------------------------------------------------------------------------


def test_a_gate_failure_kills_and_is_recorded_in_full() -> None:
    o = classify(mutant("w", ["loss_match"]), {"loss_match.proc": "fail", "fresh_train": "pass", "a": "fail"},
                 why="x" * 600)  # fmt: skip
    assert o == mutate.Outcome(
        id="w", area="loss", status="killed", caught_by=["a", "loss_match.proc"], expect=["loss_match"],
        expected_caught=True, seconds=1.3, rerun=["train@single"], restored=["corpus"], identical=False,
        crashed_stage=None, timed_out=False, message="x" * 500, declared_equivalent=False,
        gates={"loss_match.proc": "fail", "fresh_train": "pass", "a": "fail"},
    )  # fmt: skip


def test_a_gate_error_kills_only_when_no_stage_crashed() -> None:
    o = classify(mutant(), {"fresh_train": "error", "finite": "pass"})
    assert (o.status, o.caught_by, o.expected_caught) == ("killed", ["fresh_train"], True)
    o = classify(mutant(), {"fresh_train": "error", "finite": "pass"}, crashed="train@proc")
    assert (o.status, o.caught_by, o.expected_caught, o.crashed_stage) == ("killed", [], False, "train@proc")
    o = classify(mutant(expect=["stage"]), {"fresh_train": "error"}, crashed="train@proc")
    assert o.expected_caught  # a crash was the expected catch
    assert not classify(mutant(expect=["stage"]), {"fresh_train": "fail"}).expected_caught


@pytest.mark.parametrize("status", ["pass", "skip", "inconclusive", "warn"])
def test_a_gate_that_did_not_fail_catches_nothing(status: str) -> None:
    o = classify(mutant(), {"fresh_train": status})
    assert (o.status, o.caught_by, o.expected_caught) == ("hole", [], False)
    assert classify(mutant(), {"fresh_train": status}, identical=True).status == "equivalent"


def test_a_timeout_or_no_report_kills() -> None:
    o = classify(mutant(), {}, timed_out=True, why="timed out")
    assert (o.status, o.caught_by, o.timed_out, o.expected_caught, o.message) == (
        "killed", [], True, False, "timed out")  # fmt: skip
    assert classify(mutant(), {"fresh_train": "pass"}, timed_out=True).status == "killed"
    assert classify(mutant(), {}).status == "killed"  # no report came back
    assert classify(mutant(), {"fresh_train": "pass"}, crashed="x").status == "killed"
    assert classify(mutant(), {"fresh_train": "fail"}, identical=True).status == "killed"


def test_the_control_must_pass_bitwise_equal() -> None:
    control = mutant("identity", [], equivalent=True)
    ok = {"fresh_train": "pass"}
    o = classify(control, ok, identical=True)
    assert (o.status, o.declared_equivalent, o.expected_caught) == ("equivalent", True, False)
    assert classify(control, ok, identical=False).status == "nondeterministic"
    assert classify(control, {"fresh_train": "fail"}, identical=True).status == "false-alarm"
    assert classify(control, {}, identical=True).status == "false-alarm"
    assert classify(control, ok, identical=True, timed_out=True).status == "false-alarm"
    assert classify(control, ok, identical=True, crashed="corpus").status == "false-alarm"
    assert (
        classify(control, {"fresh_train": "error"}, identical=True, crashed="corpus").status == "false-alarm"
    )


# ---- the scores --------------------------------------------------------------------------------------


def outcomes() -> list[mutate.Outcome]:
    return [
        classify(
            mutant("identity", [], equivalent=True), {"g": "pass"}, identical=True
        ),  # declared equivalent
        classify(mutant("by-gate"), {"fresh_train": "fail"}),
        classify(mutant("by-crash"), {"fresh_train": "error"}, crashed="train@proc"),
        classify(mutant("by-timeout"), {}, timed_out=True),
        classify(mutant("unexercised"), {"g": "pass"}, identical=True),
        classify(mutant("hole-a"), {"g": "pass"}),
        classify(mutant("hole-b"), {"g": "skip"}),
        classify(mutant("alarm", [], equivalent=True), {"g": "fail"}, identical=True),
    ]


def test_score_counts_every_verdict() -> None:
    s = mutate.score(outcomes())
    assert s == {
        "total": 8,
        "killed": 3,
        "killed_by_gates": 1,
        "stage_only": ["by-crash", "by-timeout"],
        "equivalent": 2,
        "holes": ["hole-a", "hole-b"],
        "unexercised": ["unexercised"],
        "control_failures": ["alarm"],
        "score": round(3 / 6, 4),
        "score_strict": round(3 / 6, 4),  # two declared: identity and alarm
        "score_gates": round(1 / 6, 4),
    }


def test_score_rounds_to_four_places_and_separates_strict() -> None:
    rows = [o for o in outcomes() if o.id not in ("alarm", "hole-b")]  # 6: 3 killed, 2 equivalent, 1 declared
    s = mutate.score(rows)
    assert (s["score"], s["score_strict"], s["score_gates"]) == (0.75, 0.6, 0.25)
    rows = [o for o in outcomes() if o.id in ("by-gate", "hole-a", "hole-b")]
    s = mutate.score(rows)
    assert (s["score"], s["score_strict"], s["score_gates"]) == (0.3333, 0.3333, 0.3333)
    assert s["control_failures"] == [] and s["unexercised"] == [] and s["stage_only"] == []


def test_score_of_nothing_but_equivalents_is_none() -> None:
    eq = [o for o in outcomes() if o.id == "identity"]
    s = mutate.score(eq)
    assert (s["score"], s["score_strict"], s["score_gates"], s["total"], s["equivalent"]) == (
        None,
        None,
        None,
        1,
        1,
    )
    s = mutate.score([o for o in outcomes() if o.id == "unexercised"])
    assert (s["score"], s["score_strict"], s["score_gates"]) == (None, 0.0, None)
    s = mutate.score([])
    assert (s["total"], s["score"], s["score_strict"]) == (0, None, None)
    nondet = classify(mutant("nd", [], equivalent=True), {"g": "pass"}, identical=False)
    s = mutate.score([nondet])
    assert (s["control_failures"], s["score"], s["score_strict"]) == (["nd"], 0.0, None)


def test_exit_code_fails_on_holes_control_failures_and_strict_unexercised() -> None:
    clean = {"holes": [], "control_failures": [], "unexercised": []}
    assert mutate.exit_code(clean, False) == 0 and mutate.exit_code(clean, True) == 0
    assert mutate.exit_code({**clean, "holes": ["h"]}, False) == 1
    assert mutate.exit_code({**clean, "control_failures": ["identity"]}, False) == 1
    assert mutate.exit_code({**clean, "unexercised": ["u"]}, False) == 0
    assert mutate.exit_code({**clean, "unexercised": ["u"]}, True) == 1


# ---- the report and its table ----------------------------------------------------------------------


def report(rows: list[mutate.Outcome]) -> dict[str, Any]:
    return {
        "format": mutate.REPORT_FORMAT, "profile": "cpu", "catalogue": "cat.yaml", "judged_gates": ["fresh_train"],
        "skipped_stages": [], "jobs": 1, "baseline_s": 1.0, "wall_s": 12.5,
        **mutate.score(rows), "mutants": [dataclasses.asdict(o) for o in rows],
    }  # fmt: skip


def test_table_prints_every_mutant_and_the_summary() -> None:
    rows = [o for o in outcomes() if o.id in ("by-gate", "by-crash", "by-timeout", "hole-a", "identity")]
    rows.append(classify(mutant("both", ["loss_match", "finite"]), {"fresh_train": "fail"}, crashed="export"))
    lines = mutate.table(report(rows)).splitlines()
    assert lines[0] == f"{'mutant':<34} {'area':<12} {'verdict':<11} {'s':>6}  caught by (expected)"
    row = "{:<34} {:<12} {:<11} {:6.1f}  {}"
    assert lines[1:][:-1] == [
        row.format("identity", "loss", "equivalent", 1.3, "-"),
        row.format("by-gate", "loss", "killed", 1.3, "fresh_train ok"),
        row.format("by-crash", "loss", "killed", 1.3, "train@proc crashed (expected fresh_train)"),
        row.format("by-timeout", "loss", "killed", 1.3, "timeout (expected fresh_train)"),
        row.format("hole-a", "loss", "hole", 1.3, "- (expected fresh_train)"),
        row.format(
            "both", "loss", "killed", 1.3, "export crashed, fresh_train (expected loss_match, finite)"
        ),
    ]
    assert lines[-1] == (
        "killed 4 of 6, equivalent 1 (unexercised by the gated config: 0), holes 1; "
        "score 0.8 (strict 0.8, by the gates alone 0.4: 2 killed only by a stage crash or timeout); wall 12.5s"
    )


def test_an_inconclusive_gate_is_named_in_the_table_never_counted_as_a_kill() -> None:
    """`gates check` exit 3: a measurement that could not judge caught nothing; the score keeps its
    meaning (the mutant is a hole, or killed by what else caught it), and the row says so."""
    hole = classify(mutant("noisy"), {"fresh_train": "pass", "scaling": "inconclusive", "x": "inconclusive"})
    killed = classify(mutant("both"), {"fresh_train": "fail", "scaling": "inconclusive"})
    plain = classify(mutant("plain"), {"fresh_train": "fail", "scaling": "pass"})
    assert (hole.status, hole.caught_by, killed.status, killed.caught_by) == (
        "hole",
        [],
        "killed",
        ["fresh_train"],
    )
    rep = report([hole, killed, plain])
    assert (rep["killed"], rep["holes"], rep["killed_by_gates"]) == (2, ["noisy"], 2)
    row = "{:<34} {:<12} {:<11} {:6.1f}  {}"
    assert mutate.table(rep).splitlines()[1:4] == [
        row.format(
            "noisy", "loss", "hole", 1.3, "-; scaling, x inconclusive (not a kill) (expected fresh_train)"
        ),
        row.format("both", "loss", "killed", 1.3, "fresh_train; scaling inconclusive (not a kill) ok"),
        row.format("plain", "loss", "killed", 1.3, "fresh_train ok"),
    ]
    assert mutate.unsure({"a": "inconclusive", "b": "fail", "c": "skip", "d": "inconclusive"}) == ["a", "d"]


def test_write_puts_the_canonical_report_and_never_over_a_foreign_file(tmp_path: Path) -> None:
    r = report(outcomes())
    path = tmp_path / "mutation.json"
    mutate.write(r, path)
    assert path.read_text() == canonical_json(r)
    mutate.write({**r, "wall_s": 1.0}, path)  # its own report: replaced
    assert json.loads(path.read_text())["wall_s"] == 1.0
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"mine": 1}')
    with pytest.raises(OutputRefused):
        mutate.write(r, foreign)
    assert foreign.read_text() == '{"mine": 1}'


# ---- the campaign's loop, with the process-starting steps replaced --------------------------------


@dataclasses.dataclass
class Planned(mutate.Campaign):
    """A campaign whose baseline and mutants are decided in advance (no DVC, no training)."""

    verdicts: dict[str, mutate.Outcome] = dataclasses.field(default_factory=dict)

    def build_base(self) -> float:
        return 3.14159

    def mutant(self, m: Mutant) -> mutate.Outcome:
        return self.verdicts[m.id]


def test_run_campaign_reports_logs_and_says_every_verdict(tmp_path: Path) -> None:
    rows = outcomes()[:4]
    said: list[str] = []
    ms = [mutant(o.id, o.expect, o.declared_equivalent) for o in rows]
    c = Planned(
        tmp_path,
        tmp_path / "work",
        catalogue(mutants=ms),
        "cpu",
        said.append,
        verdicts={o.id: o for o in rows},
    )
    c.work.mkdir()
    (c.work / "outcomes.jsonl").write_text("a stale line\n")
    r = mutate.run_campaign(c, ms, 3)
    assert {k: r[k] for k in ("format", "profile", "catalogue", "skipped_stages", "jobs", "baseline_s")} == {
        "format": "xtrain-mutation/2", "profile": "cpu", "catalogue": "cat.yaml", "skipped_stages": ["scaling"],
        "jobs": 3, "baseline_s": 3.1,
    }  # fmt: skip
    assert r["judged_gates"] == mutate.judged_gates(["scaling", "perf"])
    assert r["mutants"] == [dataclasses.asdict(o) for o in rows]
    assert {k: r[k] for k in mutate.score(rows)} == mutate.score(rows)
    assert 0 <= r["wall_s"] < 60
    logged = [json.loads(x) for x in (c.work / "outcomes.jsonl").read_text().splitlines()]
    assert sorted(x["id"] for x in logged) == sorted(o.id for o in rows)
    assert said[0] == "4 mutants, 3 at a time, timeout 60s each"
    assert f"  {'by-gate':<34} {'killed':<11} {1.3:7.1f}s  fresh_train" in said
    assert f"  {'by-timeout':<34} {'killed':<11} {1.3:7.1f}s  -" in said


def test_run_campaign_says_an_inconclusive_gate_is_not_a_kill(tmp_path: Path) -> None:
    noisy = classify(mutant("noisy"), {"fresh_train": "pass", "scaling": "inconclusive", "x": "inconclusive"})
    plain = classify(mutant("plain"), {"fresh_train": "fail"})
    said: list[str] = []
    ms = [mutant("noisy"), mutant("plain")]
    c = Planned(tmp_path, tmp_path / "work", catalogue(mutants=ms), "cpu", said.append,
                verdicts={"noisy": noisy, "plain": plain})  # fmt: skip
    c.work.mkdir()
    mutate.run_campaign(c, ms, 1)
    assert f"  {'noisy':<34} {'hole':<11} {1.3:7.1f}s  -; scaling, x inconclusive (not a kill)" in said
    assert f"  {'plain':<34} {'killed':<11} {1.3:7.1f}s  fresh_train" in said


def test_an_interrupted_campaign_starts_no_queued_mutant(tmp_path: Path) -> None:
    """After a signal (gates/campaigns/children.py) no mutant is copied or judged; the campaign says
    it was interrupted, as `gates mutate`."""
    import signal

    from gates.campaigns import children

    rows = outcomes()[:2]
    ms = [mutant(o.id, o.expect, o.declared_equivalent) for o in rows]
    c = Planned(tmp_path, tmp_path / "work", catalogue(mutants=ms), "cpu", lambda s: None, verdicts={})
    c.work.mkdir()
    children._signal.append(signal.SIGINT)
    try:
        with pytest.raises(children.Interrupted) as e:
            mutate.run_campaign(c, ms, 2)  # Planned.mutant would raise KeyError: never reached
    finally:
        children._signal.clear()
    assert str(e.value).startswith("gates mutate: interrupted by SIGINT: 0 running processes ended")
    assert not (c.work / "outcomes.jsonl").exists()  # no verdict logged


def test_run_campaign_checks_every_anchor_before_building(tmp_path: Path) -> None:
    from gates.campaigns.mutants import AnchorError, Edit

    (tmp_path / "f.py").write_text("x = 1\n")
    bad = Mutant("stale", "loss", "w", ["g"], [Edit("f.py", "y = 2", "y = 3")])
    c = Planned(tmp_path, tmp_path / "work", catalogue(mutants=[bad]), "cpu", lambda s: None)
    with pytest.raises(AnchorError, match=r"mutant stale: anchor not found in f\.py"):
        mutate.run_campaign(c, [bad], 1)
    assert not (tmp_path / "work").exists()


# ---- the campaign's steps, with the process runner replaced (tests/pipeline/test_mutate_ci.py runs the real ones) --


class Runner:
    """Stands in for mutate.run: records each command, answers from a script, writes the gates' report."""

    def __init__(
        self, answers: list[tuple[int, str, bool]], gates: list[dict[str, str]] | None = None
    ) -> None:
        self.answers, self.gates, self.calls = answers, gates, []

    def __call__(
        self, cmd: list[str], cwd: Path, env: dict[str, str], timeout: float
    ) -> tuple[int, str, bool]:
        self.calls.append((cmd, cwd, env, timeout))
        if "--report" in cmd and self.gates is not None:
            report = Path(cmd[cmd.index("--report") + 1])
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(json.dumps({"gates": self.gates}))
        return self.answers.pop(0)


GATES = [
    {"id": "fresh_train", "status": "fail", "message": "loss differs at step 3"},
    {"id": "finite", "status": "pass", "message": "ok"},
    {"id": "loss_match.proc", "status": "error", "message": "no runs/proc"},
    {"id": "pilot.base", "status": "skip", "message": "not built"},
]


def test_check_runs_the_checkouts_gates_on_the_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Runner([(1, "out", False)], GATES)
    monkeypatch.setattr(mutate, "run", runner)
    root, tree = tmp_path / "root", tmp_path / "tree"
    (tree / "reports").mkdir(parents=True)
    c = mutate.Campaign(root, tmp_path / "work", catalogue(), "cpu")
    gates, why = c.check(tree, 42.0)
    assert gates == {
        "fresh_train": "fail",
        "finite": "pass",
        "loss_match.proc": "error",
        "pilot.base": "skip",
    }
    assert why == "fresh_train: loss differs at step 3; loss_match.proc: no runs/proc"
    [(cmd, cwd, env, timeout)] = runner.calls
    report = str(tree / "reports" / "mutate-gates.json")
    assert cmd == [mutate.sys.executable, "-m", "gates", "--root", str(tree), "--params", str(tree / "params.yaml"),
                   "check", "--only", *mutate.judged_gates(["scaling", "perf"]), "--report", report]  # fmt: skip
    assert (cwd, timeout, env["PYTHONPATH"].split(os.pathsep)[0]) == (root, 42.0, str(root))


def test_check_names_an_inconclusive_gate_as_not_a_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = [*GATES, {"id": "scaling", "status": "inconclusive", "message": "spread 60%"}]
    monkeypatch.setattr(mutate, "run", Runner([(3, "out", False)], gates))  # exit 3: no gate failed
    (tmp_path / "tree" / "reports").mkdir(parents=True)
    c = mutate.Campaign(tmp_path, tmp_path / "work", catalogue(), "cpu")
    found, why = c.check(tmp_path / "tree", 42.0)
    assert found["scaling"] == "inconclusive"
    assert why == (
        "fresh_train: loss differs at step 3; loss_match.proc: no runs/proc; "
        "scaling inconclusive (not a kill): spread 60%"
    )


def test_check_without_a_report_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "mutate-gates.json").write_text(json.dumps({"gates": GATES}))  # a stale one
    monkeypatch.setattr(mutate, "run", Runner([(2, "a\nb\nc\nerror: bad params", False)]))
    c = mutate.Campaign(tmp_path, tmp_path / "work", catalogue(), "cpu")
    assert c.check(tmp_path, 5.0) == ({}, "gates check exited 2: b | c | error: bad params")


def test_verify_needs_every_gate_to_pass_or_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    c = mutate.Campaign(tmp_path, tmp_path / "work", catalogue(), "cpu", said.append)
    ok = [g for g in GATES if g["status"] in ("pass", "skip")]
    monkeypatch.setattr(mutate, "run", Runner([(0, "", False)], ok))
    c._verify()
    assert said == ["baseline passes 2 gates"]
    monkeypatch.setattr(mutate, "run", Runner([(1, "", False)], GATES))
    with pytest.raises(mutate.CampaignError) as e:
        c._verify()
    assert str(e.value) == (
        f"{c.base}: the unmutated baseline does not pass the gates: "
        "{'fresh_train': 'fail', 'loss_match.proc': 'error'} fresh_train: loss differs at step 3; "
        "loss_match.proc: no runs/proc"
    )
    monkeypatch.setattr(mutate, "run", Runner([(2, "crashed", False)]))
    with pytest.raises(
        mutate.CampaignError, match=r"does not pass the gates: \{\} gates check exited 2: crashed$"
    ):
        c._verify()
    monkeypatch.setattr(
        mutate, "run", Runner([(0, "", False)], [{"id": "a", "status": "inconclusive", "message": "m"}])
    )
    with pytest.raises(mutate.CampaignError, match=r"\{'a': 'inconclusive'\}"):
        c._verify()


def test_repro_keeps_going_over_the_unskipped_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    runner = Runner([(0, "done", False)])
    monkeypatch.setattr(mutate, "run", runner)
    c = mutate.Campaign(tmp_path, tmp_path / "work", catalogue(), "cpu")
    assert c.repro(tmp_path, 7.0) == (0, "done", False)
    [(cmd, cwd, env, timeout)] = runner.calls
    assert cmd == [mutate.sys.executable, "-m", "dvc", "repro", "--keep-going",
                   "corpus", "train@single", "train@thread", "trainer"]  # fmt: skip
    assert (cwd, timeout, env["PYTHONPATH"].split(os.pathsep)[0]) == (tmp_path, 7.0, str(tmp_path))


def test_prepare_base_runs_each_step_and_names_the_failed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = mutate.Campaign(tmp_path, tmp_path / "work", catalogue(), "cpu")
    runner = Runner([(0, "", False)] * 3)
    monkeypatch.setattr(mutate, "run", runner)
    c._prepare_base()
    assert [call[0] for call in runner.calls] == [
        ["git", "init", "-q"],
        [
            mutate.sys.executable,
            "-m",
            "dvc",
            "config",
            "--local",
            "cache.dir",
            str(tmp_path / "work" / "cache"),
        ],
        [mutate.sys.executable, "-m", "pipeline.config", "set", "profile=cpu"],
    ]
    assert {(call[1], call[3], call[2]["PYTHONPATH"].split(os.pathsep)[0]) for call in runner.calls} == {
        (c.base, 300, str(c.base))
    }
    runner = Runner([(0, "", False)] * 2)
    monkeypatch.setattr(mutate, "run", runner)
    mutate.Campaign(tmp_path, tmp_path / "work", catalogue(), "none")._prepare_base()
    assert len(runner.calls) == 2  # no overrides: params.yaml is left as committed
    monkeypatch.setattr(mutate, "run", Runner([(0, "", False), (1, "x\nno dvc", False)]))
    with pytest.raises(mutate.CampaignError) as e:
        c._prepare_base()
    assert str(e.value) == f"{c.base}: {mutate.sys.executable} -m dvc config failed: x | no dvc"


def test_bless_and_verify_blesses_the_baseline_golden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    c = mutate.Campaign(tmp_path, tmp_path / "work", catalogue(), "cpu", said.append)
    runner = Runner([(0, "", False), (0, "", False)], [GATES[1]])
    monkeypatch.setattr(mutate, "run", runner)
    c._bless_and_verify()
    cmd, cwd, env, timeout = runner.calls[0]
    assert cmd == [mutate.sys.executable, "-m", "registry", "bless", "--golden", "--reason",
                   "mutation campaign baseline (cpu profile)"]  # fmt: skip
    assert (cwd, timeout, env["PYTHONPATH"].split(os.pathsep)[0]) == (c.base, 600, str(c.base))
    assert runner.calls[1][3] == 600 and said == ["baseline passes 1 gates"]
    monkeypatch.setattr(mutate, "run", Runner([(3, "error: registry is sealed", False)]))
    with pytest.raises(mutate.CampaignError) as e:
        c._bless_and_verify()
    assert str(e.value) == f"{c.base}: registry bless --golden failed: error: registry is sealed"


def mutant_campaign(
    tmp_path: Path, keep: bool = False, timeout_s: int = 100
) -> tuple[mutate.Campaign, Mutant]:
    from gates.campaigns.mutants import Edit

    c = mutate.Campaign(
        tmp_path / "root", tmp_path / "work", catalogue(timeout_s=timeout_s), "cpu", keep=keep
    )
    write_tree(c.base)
    (c.base / "dvc.yaml").write_text(DVC_YAML)
    (c.base / "code.py").write_text("x = 1\n")
    (c.base / "tmp").mkdir()
    (c.base / "reports").mkdir()
    (c.base / "reports" / "mutate-gates.json").write_text("{}")
    return c, Mutant("m1", "loss", "w", ["fresh_train"], [Edit("code.py", "x = 1", "x = 2")])


DVC_OUT = "Running stage 'train@single':\nStage 'corpus' is cached - skipping\nRunning stage 'export':\n"


def test_a_mutant_is_applied_rerun_and_judged_in_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, m = mutant_campaign(tmp_path, keep=True)
    seen: dict[str, Any] = {}

    def runner(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, bool]:
        if "repro" in cmd:
            seen["code"] = (cwd / "code.py").read_text()
            seen["copied"] = sorted(p.name for p in cwd.iterdir())
            seen["repro_timeout"] = timeout
            return 0, DVC_OUT, False
        seen["check_timeout"] = timeout
        return Runner([(0, "", False)], [GATES[1]])(cmd, cwd, env, timeout)

    monkeypatch.setattr(mutate, "run", runner)
    o = c.mutant(m)
    assert seen["code"] == "x = 2\n" and "tmp" not in seen["copied"] and "code.py" in seen["copied"]
    assert seen["repro_timeout"] == 100 and 99.0 < seen["check_timeout"] <= 100 - 1e-9
    assert (o.status, o.rerun, o.restored, o.identical, o.crashed_stage, o.message) == (
        "equivalent", ["train@single", "export"], ["corpus"], True, None, "")  # fmt: skip
    tree = c.work / "mutants" / "m1"
    assert (tree / "code.py").read_text() == "x = 2\n"  # --keep
    assert json.loads((tree / "reports" / "mutate-gates.json").read_text())["gates"] == [GATES[1]]
    assert (c.base / "code.py").read_text() == "x = 1\n"  # the base is never touched


def test_a_crashed_mutant_names_the_stage_and_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, m = mutant_campaign(tmp_path, timeout_s=30)
    out = DVC_OUT + "ValueError: bad\nERROR: failed to reproduce 'train@single'\n"
    answers = Runner([(1, out, False), (1, "", False)], [GATES[0], GATES[2]])
    monkeypatch.setattr(mutate, "run", answers)
    o = c.mutant(m)
    assert [call[3] for call in answers.calls] == [30, 60.0]  # the gates get at least a minute
    assert (o.status, o.crashed_stage, o.identical, o.caught_by) == (
        "killed",
        "train@single",
        False,
        ["fresh_train"],
    )
    assert o.message == ("stage train@single failed: ValueError: bad; "
                         "fresh_train: loss differs at step 3; loss_match.proc: no runs/proc")  # fmt: skip
    assert not (c.work / "mutants" / "m1").exists()  # removed without --keep


def test_a_timed_out_mutant_is_not_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c, m = mutant_campaign(tmp_path)
    runner = Runner([(-9, DVC_OUT, True)])
    monkeypatch.setattr(mutate, "run", runner)
    o = c.mutant(m)
    assert len(runner.calls) == 1  # no gates check after a timeout
    assert (o.status, o.timed_out, o.crashed_stage, o.identical, o.message, o.gates) == (
        "killed", True, None, False, "timed out", {})  # fmt: skip


def test_a_mutant_that_changed_the_runs_is_a_hole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c, m = mutant_campaign(tmp_path)

    def runner(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, bool]:
        if "repro" in cmd:
            write_tree(cwd, proc={"train_loss": [9.0]})
            return 0, DVC_OUT, False
        return Runner([(0, "", False)], [GATES[1]])(cmd, cwd, env, timeout)

    monkeypatch.setattr(mutate, "run", runner)
    o = c.mutant(m)
    assert (o.status, o.identical) == ("hole", False)


def test_drop_stages_reads_utf8_whatever_the_locale(tmp_path: Path) -> None:
    import locale

    (tmp_path / "dvc.lock").write_text(DVC_LOCK.replace("echo t", "echo tête"), encoding="utf-8")
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale: only an explicit utf-8 read decodes it
    try:
        mutate.drop_stages(tmp_path, ["scaling"])  # no dvc.yaml: the lock is still dropped from
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)
    text = (tmp_path / "dvc.lock").read_text(encoding="utf-8")
    assert "echo tête" in text and "scaling" not in text and not (tmp_path / "dvc.yaml").exists()


def test_a_mutant_replaces_a_stale_copy_keeps_links_and_survives_a_vanished_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, m = mutant_campaign(tmp_path, keep=True)
    (c.base / "link.py").symlink_to("code.py")
    stale = c.work / "mutants" / "m1"
    stale.mkdir(parents=True)
    (stale / "stale.txt").write_text("from an earlier run")
    monkeypatch.setattr(mutate, "run", Runner([(-9, "", True)]))  # timed out: the gates never ran
    o = c.mutant(m)
    assert o.timed_out and 0 <= o.seconds < 60
    assert not (stale / "stale.txt").exists() and (stale / "link.py").is_symlink()
    assert not (stale / "reports" / "mutate-gates.json").exists()  # the base's report is not copied
    assert (stale / "reports").is_dir()

    def vanishing(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, bool]:
        shutil.rmtree(cwd)  # a stage (or the user) removed the copy: removing it again is no error
        return -9, "", True

    c.keep = False
    monkeypatch.setattr(mutate, "run", vanishing)
    assert c.mutant(m).status == "killed" and not stale.exists()


def test_run_campaign_starts_a_fresh_log_runs_jobs_at_a_time_and_validates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools: list[int | None] = []

    class Pool(mutate.ThreadPoolExecutor):
        def __init__(self, max_workers: int | None = None) -> None:
            pools.append(max_workers)
            super().__init__(max_workers=max_workers)

    clock = iter([100.0, 112.3456])
    monkeypatch.setattr(mutate, "ThreadPoolExecutor", Pool)
    monkeypatch.setattr(mutate, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    two = classify(mutant("two"), {"fresh_train": "fail", "finite": "fail"})
    said: list[str] = []
    c = Planned(tmp_path, tmp_path / "work", catalogue(), "cpu", said.append, verdicts={"two": two})
    c.work.mkdir()  # no outcomes.jsonl yet
    r = mutate.run_campaign(c, [mutant("two")], 2)
    assert pools == [2] and r["wall_s"] == 12.3
    assert said[1] == f"  {'two':<34} {'killed':<11} {1.3:7.1f}s  finite, fresh_train"
    assert len((c.work / "outcomes.jsonl").read_text().splitlines()) == 1
    bad = dataclasses.replace(two, status="bogus")
    c = Planned(tmp_path, tmp_path / "work", catalogue(), "cpu", said.append, verdicts={"two": bad})
    monkeypatch.setattr(mutate, "time", SimpleNamespace(perf_counter=lambda: 1.0))
    with pytest.raises(ValidationError, match=r"^mutation report: mutants\[0\]\.status"):
        mutate.run_campaign(c, [mutant("two")], 1)


def base_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[mutate.Campaign, list[str]]:
    root = tmp_path / "root"
    root.mkdir()
    (root / "dvc.yaml").write_text(DVC_YAML)
    (root / "code.py").write_text("x = 1\n")
    monkeypatch.setattr(mutate, "tracked_files", lambda r: ["code.py", "dvc.yaml"] if r == root else [])
    said: list[str] = []
    return mutate.Campaign(root, tmp_path / "new" / "work", catalogue(), "cpu", said.append), said


BUILD = [(0, "", False)] * 3 + [(0, "built", False), (0, "blessed", False), (0, "", False)]


def test_build_base_builds_blesses_stamps_then_reuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, said = base_campaign(tmp_path, monkeypatch)
    runner = Runner(list(BUILD), [GATES[1]])
    monkeypatch.setattr(mutate, "run", runner)
    assert 0 <= c.build_base() < 60
    key = mutate.stamp(c.root, ["code.py", "dvc.yaml"], ["profile=cpu", "skip-stage scaling"])
    assert (c.base / ".mutate-stamp").read_text() == key and (c.base / "code.py").read_text() == "x = 1\n"
    assert "scaling" not in (c.base / "dvc.yaml").read_text()  # the skipped stages are dropped
    assert (c.work / mutate.outputs.MARKER).is_file()
    repro = runner.calls[3]
    assert repro[0][-5:] == ["--keep-going", "corpus", "train@single", "train@thread", "trainer"]
    assert (repro[1], repro[3]) == (c.base, 3600)
    assert said == [f"baseline: dvc repro in {c.base} (cpu profile)", "baseline passes 1 gates"]
    (c.base / "built.txt").write_text("an artifact")
    runner = Runner([(0, "", False)], [GATES[1]])
    monkeypatch.setattr(mutate, "run", runner)
    said.clear()
    assert 0 <= c.build_base() < 60  # the stamp is current: only judged again
    assert len(runner.calls) == 1 and (c.base / "built.txt").exists()
    assert said == [f"baseline {c.base} is current (stamp {key})", "baseline passes 1 gates"]
    (c.root / "code.py").write_text("x = 2\n")
    monkeypatch.setattr(mutate, "run", Runner(list(BUILD), [GATES[1]]))
    c.build_base()  # the code changed: rebuilt from scratch
    assert not (c.base / "built.txt").exists() and (c.base / "code.py").read_text() == "x = 2\n"


def test_build_base_stops_on_a_failed_repro_or_a_failing_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, _ = base_campaign(tmp_path, monkeypatch)
    monkeypatch.setattr(mutate, "run", Runner([(0, "", False)] * 3 + [(1, "a\nb\nc\nerror: x", False)]))
    with pytest.raises(mutate.CampaignError) as e:
        c.build_base()
    assert str(e.value) == f"{c.base}: baseline dvc repro failed: b | c | error: x"
    assert not (c.base / ".mutate-stamp").exists()
    monkeypatch.setattr(mutate, "run", Runner(list(BUILD), [GATES[0]]))
    with pytest.raises(mutate.CampaignError, match="does not pass the gates"):
        c.build_base()
    assert not (c.base / ".mutate-stamp").exists()  # never stamped: rebuilt next time


def test_build_base_refuses_a_work_folder_it_did_not_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, _ = base_campaign(tmp_path, monkeypatch)
    c.work.mkdir(parents=True)
    (c.work / "thesis.tex").write_text("mine")
    runner = Runner([])
    monkeypatch.setattr(mutate, "run", runner)
    with pytest.raises(OutputRefused):
        c.build_base()
    assert sorted(p.name for p in c.work.iterdir()) == ["thesis.tex"] and runner.calls == []


# ---- the process-starting helpers, with cheap real processes (git, sh; milliseconds) -------------------


def test_run_returns_code_and_merged_output_in_the_given_folder(tmp_path: Path) -> None:
    cmd = ["sh", "-c", 'echo "out $JM_X $(pwd)"; echo err >&2; exit 3']
    code, out, timed_out = mutate.run(cmd, tmp_path, {**os.environ, "JM_X": "env"}, 0.001)  # at least 1 s
    assert (code, out, timed_out) == (3, f"out env {tmp_path}\nerr\n", False)


def test_tracked_files_are_committed_and_untracked_files_not_ignored(tmp_path: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "sub").mkdir()
    for name in ("b.py", "sub/a.py", "x.log", "sub/ü.txt"):
        (tmp_path / name).write_text(name)
    subprocess.run(["git", "-C", str(tmp_path), "add", "b.py"], check=True)
    (tmp_path / "gone.py").write_text("")
    subprocess.run(["git", "-C", str(tmp_path), "add", "gone.py"], check=True)
    (tmp_path / "gone.py").unlink()  # in the index, not on disk: not copied
    assert mutate.tracked_files(tmp_path) == [".gitignore", "b.py", "sub/a.py", "sub/ü.txt"]


def test_git_common_dir_of_a_checkout_and_of_a_plain_folder(tmp_path: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    assert mutate.git_common_dir(tmp_path / "repo") == (tmp_path / "repo" / ".git").resolve()
    (tmp_path / "plain").mkdir()
    with pytest.raises(mutate.CampaignError, match=r"plain: not a git checkout: fatal: not a git repository"):
        mutate.git_common_dir(tmp_path / "plain")


def test_tracked_files_of_a_folder_git_does_not_know_is_an_error(tmp_path: Path) -> None:
    import subprocess

    with pytest.raises(subprocess.CalledProcessError):
        mutate.tracked_files(tmp_path)  # never an empty baseline


def gone(pid: int) -> bool:
    """Dead: no such process, or a zombie (a container's init may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except FileNotFoundError:
        return True


def test_run_kills_the_whole_process_group_on_timeout(tmp_path: Path) -> None:
    """The one slow test here (~2 s, run's 1 s floor twice): a hung stage's children (torchrun's ranks) die too."""
    cmd = ["sh", "-c", "sleep 30 & echo $!; echo started; wait"]
    t0 = time.perf_counter()
    code, out, timed_out = mutate.run(cmd, tmp_path, dict(os.environ), 0.001)
    assert (code, timed_out) == (-9, True) and 1.0 <= time.perf_counter() - t0 < 1.9
    child, said = out.split("\n", 1)
    assert said == "started\n"
    for _ in range(2000):  # the kill is delivered at once; the state may take a moment to show
        if gone(int(child)):
            break
        time.sleep(0.001)
    assert gone(int(child)), f"the stage's child {child} outlived the timeout"
    code, out, timed_out = mutate.run(["sh", "-c", "exec sleep 30"], tmp_path, dict(os.environ), 0.001)
    assert (code, out, timed_out) == (-9, "", True)  # no output: "", never None


# ---- --skip-stage: a shorter campaign -------------------------------------------------------------


def test_skipping_a_stage_leaves_out_the_gates_that_read_it() -> None:
    cat = mutants_load()
    ci = cat.select(None, "ci")
    quick = mutate.skipping(cat, ["pilot"], ci, REPO)
    assert quick.skip_stages == [*cat.skip_stages, "pilot"]
    pilot_gates = [g for g in ALL_GATES if g.startswith("pilot.")]
    assert pilot_gates and quick.skip_gates == [*cat.skip_gates, *pilot_gates]
    assert "fresh_train" in mutate.judged_gates(quick.skip_gates)
    assert mutate.skipping(cat, ["scaling"], ci, REPO) == cat  # already skipped: nothing added twice
    # a foreach stage by its name or one of its items; a gate reading it is off, the others stay
    one = mutate.skipping(cat, ["train@proc"], [], REPO).skip_gates
    assert "loss_match.proc" in one and "loss_match.thread" not in one and "export_md5" not in one
    assert "loss_match.thread" in mutate.skipping(cat, ["train"], [], REPO).skip_gates


def test_skipping_refuses_an_unknown_stage_and_a_mutant_left_uncatchable() -> None:
    cat = mutants_load()
    with pytest.raises(mutate.CampaignError) as e:
        mutate.skipping(cat, ["pilott", "probes", "envv"], [], REPO)
    assert str(e.value) == f"--skip-stage envv pilott: not a stage of {REPO / 'dvc.yaml'}"
    with pytest.raises(mutate.CampaignError) as e:
        mutate.skipping(cat, ["train"], [mutant("m", ["loss_match", "cross_rank"])], REPO)
    assert str(e.value) == "mutant m: every gate it expects (loss_match, cross_rank) reads a skipped stage"
    # one expected gate left is enough; no expectation (the control) and a crash expectation pass
    picked = [mutant("a", ["loss_match", "fresh_train"]), mutant("b", []), mutant("c", ["stage"])]
    assert mutate.skipping(cat, ["train@proc"], picked, REPO).skip_stages[-1] == "train@proc"


def test_the_baseline_stamp_holds_the_skipped_stages(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_bytes(b"P")
    cat = Catalogue([], {"cpu": ["profile=cpu"]}, ["scaling"], [], 60)
    campaign = mutate.Campaign(tmp_path, tmp_path / "w", cat, "cpu")
    key = campaign.base_stamp(["params.yaml"])
    assert key == mutate.stamp(tmp_path, ["params.yaml"], ["profile=cpu", "skip-stage scaling"])
    quicker = dataclasses.replace(campaign, cat=dataclasses.replace(cat, skip_stages=["scaling", "pilot"]))
    assert quicker.base_stamp(["params.yaml"]) != key  # a base built without pilot is another base
