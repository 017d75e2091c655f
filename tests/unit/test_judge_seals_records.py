"""gates/judges/seals.py under mutation (docs/judge-mutation.md): the seals' verdict on records built
by hand, no tree at all (gates/reading/seal_records.py reads them; tests/process/test_judge_seals.py
reads them from small trees). One test per verdict, in the order the judge gives them: the declared
scope, a file that could not be hashed, no stage, dvc.lock's gaps, the sealed files, staleness,
frozen stages, the pass; and gates/reading/deferred.py, which keeps a later read's failure.
"""

from __future__ import annotations

import pytest

from gates.judges.seals import GATE, seals, seals_picture
from gates.reading.deferred import Deferred, deferred
from gates.reading.dvcstatus import Change
from gates.reading.seal_records import SealRecords, SealRows
from registry.store import FileCheck

FILES = "every file equal to dvc.lock"


def records(**given: object) -> SealRecords:
    """A clean read of two stages (3 files, nothing stale or frozen), with `given` replaced."""
    base = {
        "stages": ["a", "b"],
        "declared": ["b"],
        "scope_problems": [],
        "hashed": Deferred(None),
        "gaps": Deferred([]),
        "differences": Deferred((3, [])),
        "status": Deferred({"a": [], "b": []}),
        "frozen": Deferred({}),
    }
    return SealRecords(**{**base, **given})  # type: ignore[arg-type]


def failed(e: BaseException) -> Deferred:
    return Deferred(error=e)


def verdict(r: SealRecords) -> tuple:
    o = seals(r)
    return o.status, o.measured, o.threshold, o.message


def test_the_pass_names_the_files_and_stages_checked() -> None:
    assert verdict(records()) == ("pass", 3, FILES, "3 files of 2 stages equal dvc.lock")
    assert verdict(records(declared=None))[3] == (
        "3 files of 2 stages equal dvc.lock; scope not declared (gates.scope.stages): judged the stages dvc.yaml "
        "defines"
    )
    assert verdict(records(frozen=Deferred({"b": [], "a": []})))[3] == (
        "3 files of 2 stages equal dvc.lock; frozen, not rerun by dvc repro (deps and params unchanged): a, b"
    )
    assert GATE.judge(records(), {}).status == "pass"


def test_the_scope_is_the_first_verdict_before_any_later_read_fails() -> None:
    broken = failed(OSError("unreadable"))
    r = records(scope_problems=["stage x (gates.scope.stages) is not in dvc.yaml"], hashed=broken, gaps=broken,
                differences=broken, status=broken, frozen=broken)  # fmt: skip
    assert verdict(r) == (
        "error", 1, "dvc.yaml defines every stage and dep the verdict needs",
        "stage x (gates.scope.stages) is not in dvc.yaml: the verdict would judge less than the pipeline "
        "(restore dvc.yaml: git checkout dvc.yaml; or add each dep and dvc repro the stage)",
    )  # fmt: skip


def test_a_file_that_could_not_be_hashed_is_raised_after_the_scope() -> None:
    with pytest.raises(OSError, match=r"^unreadable$"):
        seals(records(hashed=failed(OSError("unreadable")), stages=[]))


def test_no_stage_is_a_skip() -> None:
    broken = failed(OSError("not read"))
    assert verdict(records(stages=[], gaps=broken, differences=broken)) == (
        "skip", None, FILES, "no stage in dvc.yaml or dvc.lock",
    )  # fmt: skip


def test_a_partial_lock_names_each_gap_before_any_file() -> None:
    gaps = Deferred(["stage a has no entry (dvc repro a)", "stage b: out o has no entry (dvc repro b)"])
    assert verdict(records(gaps=gaps, differences=failed(OSError("not read")))) == (
        "error", 2, "dvc.lock records every stage and out",
        "dvc.lock is partial: stage a has no entry (dvc repro a); stage b: out o has no entry (dvc repro b) "
        "(restore it: git checkout dvc.lock)",
    )  # fmt: skip


def test_each_changed_file_is_named_before_staleness() -> None:
    why = [f"f{i}: md5 x, dvc.lock recorded y" for i in range(9)]
    r = records(differences=Deferred((9, why)), status=failed(OSError("not read")))
    assert verdict(r) == (
        "error", 9, FILES,
        "; ".join(why[:8]) + " (and 1 more): changed since dvc repro wrote it (dvc repro the stage, or restore it)",
    )  # fmt: skip
    with pytest.raises(OSError, match=r"^not read$"):
        seals(records(status=failed(OSError("not read"))))


def test_a_stale_stage_is_named_and_an_out_is_left_to_the_seals() -> None:
    out = Change("a", "out", "o", "modified", "out o changed")
    dep = Change("b", "dep", "x.py", "modified", "dep x.py md5 m, dvc.lock recorded n")
    assert verdict(records(status=Deferred({"a": [out], "b": []}))) == verdict(records())
    r = records(status=Deferred({"a": [out], "b": [dep]}), frozen=failed(OSError("not read")))
    assert verdict(r) == (
        "error", 1, "every dep and param equal to dvc.lock",
        "stale: stage b: dep x.py md5 m, dvc.lock recorded n: the artifacts were made before this edit and would "
        "be judged as this tree's (dvc repro b, or undo the edit)",
    )  # fmt: skip


def test_a_thawed_frozen_stage_is_the_last_error() -> None:
    dep = Change("b", "dep", "x.py", "modified", "dep x.py md5 m, dvc.lock recorded n")
    assert verdict(records(frozen=Deferred({"a": [], "b": [dep]}))) == (
        "error", 1, "every frozen stage's deps and params equal to dvc.lock",
        "frozen: stage b: dep x.py md5 m, dvc.lock recorded n: dvc repro never reruns a frozen stage, so its "
        "artifacts are older than this tree (dvc unfreeze b && dvc repro b, or undo the edit)",
    )  # fmt: skip


def test_the_picture_is_the_rows_read() -> None:
    rows = SealRows([FileCheck("f.txt", "m", "m"), FileCheck("d/ (2 files)", "x.dir", None)])
    pic = seals_picture(rows, {})
    assert pic.html.count("<tr class='ok'>") == 1 and pic.html.count("<tr class='bad'>") == 1
    assert pic.caption.startswith("Every out of dvc.lock (a folder by DVC's .dir hash of its files)")


def test_deferred_keeps_a_value_or_the_reads_own_error() -> None:
    assert deferred(lambda: 3).get() == 3 and deferred(lambda: None).get() is None
    e = KeyError("k")
    kept = deferred(lambda: {}["k"])
    assert isinstance(kept.error, KeyError) and kept.value is None
    with pytest.raises(KeyError):
        kept.get()
    with pytest.raises(KeyError) as raised:
        Deferred(error=e).get()
    assert raised.value is e
