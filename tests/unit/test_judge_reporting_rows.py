"""gates/reporting/rows.py under mutation (docs/judge-mutation.md): the rows people read.

The order of the statuses, the one line for gates not in this pipeline, a family's threshold stated
once (its parts, keys, majority, the shortest legend worth stating), checks not applied, and the
report entry of an Outcome: each asserted as the exact text or value, at the boundaries.
"""

from __future__ import annotations

from typing import Any

import pytest

from gates.judges.outcome import Outcome
from gates.reporting import rows


def gate(gid: str, status: str = "pass", threshold: Any = None, **extra: Any) -> dict[str, Any]:
    return {"id": gid, "status": status, "threshold": threshold, **extra}


def test_severity_orders_fail_error_inconclusive_pass_skip_stably() -> None:
    entries = [gate(f"{s}{i}", s) for i in (1, 2) for s in ("skip", "pass", "inconclusive", "error", "fail")]
    got = [g["id"] for g in rows.by_severity(entries)]
    statuses = ("fail", "error", "inconclusive", "pass", "skip")
    assert got == [f"{s}{i}" for s in statuses for i in (1, 2)]


def test_an_unknown_status_sorts_first_with_the_failures() -> None:
    entries = [gate("p", "pass"), gate("odd", "odd"), gate("f", "fail"), gate("e", "error")]
    assert [g["id"] for g in rows.by_severity(entries)] == ["odd", "f", "e", "p"]


def absent(gid: str, *stages: str) -> dict[str, Any]:
    return gate(gid, "skip", not_in_pipeline=list(stages))


@pytest.mark.parametrize(
    ("gates", "line"),
    [
        ([], None),
        (
            [absent("a", "train@thread")],
            "not in this pipeline: 1 gate (stages train@thread: not in dvc.yaml or dvc.lock, nothing to judge)",
        ),
        (
            [absent("a", "pilot", "export"), absent("b", "export"), gate("c", "skip")],
            "not in this pipeline: 3 gates (stages export, pilot: not in dvc.yaml or dvc.lock, "
            "nothing to judge)",
        ),
    ],
)
def test_the_absent_line(gates: list[dict[str, Any]], line: str | None) -> None:
    assert rows.Rows([], gates, {}, []).absent_line() == line


@pytest.mark.parametrize(("gid", "fam"), [("pilot.a.b", "pilot"), ("seals", "seals"), (".x", "")])
def test_family_is_the_text_before_the_first_dot(gid: str, fam: str) -> None:
    assert rows.family(gid) == fam


@pytest.mark.parametrize(
    ("threshold", "labels", "text"),
    [
        ("rel <= 1e-3", {"g": "label"}, "rel <= 1e-3"),
        (0.001234567, None, "0.00123"),
        (0.001234567, {"g": "catalogue text"}, "catalogue text"),
        (0.001234567, {"other": "catalogue text"}, "0.00123"),
        (None, None, "-"),
        (None, {"g": "said"}, "said"),
        (7, None, "7"),
        (True, {}, "True"),
    ],
)
def test_threshold_text(threshold: Any, labels: dict[str, str] | None, text: str) -> None:
    assert rows.threshold_text(gate("g", threshold=threshold), labels) == text


def test_parts_key_on_the_text_before_a_short_head() -> None:
    head40, head41 = "h" * 40, "h" * 41
    text = f"cpu: 1 (a: b); plain; {head40}: x; {head41}: y; :z"
    assert rows._parts(text) == [
        ("cpu", "cpu: 1 (a: b)"),
        ("plain", "plain"),
        (head40, f"{head40}: x"),
        (f"{head41}: y", f"{head41}: y"),
        ("", ":z"),
    ]
    assert rows._parts("a;b: c") == [("a;b", "a;b: c")]  # only "; " separates


@pytest.mark.parametrize(
    ("part", "shown"),
    [
        ("(a)", "(a)"),
        ("  a  ", "a"),
        ("a)", "a"),
        ("(a", "a"),
        ("f(a) b) c", "f(a) b c"),  # the last closing one is the stray
        ("a)) c)", "a c"),
        ("((a) b", "(a) b"),  # the first opening one is the stray
        ("(((a) b", "(a) b"),
        (") (a ", ") (a"),  # as many of each: left as is
        ("a)) (b", "a) (b"),
        ("x (a) ", "x (a)"),
    ],
)
def test_a_part_shown_alone_drops_its_stray_parentheses(part: str, shown: str) -> None:
    assert rows._balanced(part) == shown


def test_shared_is_what_more_than_half_state_word_for_word() -> None:
    assert rows._shared(["cpu: 1; cuda: 2", "cpu: 1; cuda: 3", "cpu: 9"]) == [("cpu", "cpu: 1")]
    assert rows._shared(["cpu: 1", "cpu: 1", "cpu: 2", "cpu: 2"]) == []  # half is not more than half
    assert rows._shared(["a: 1; b: 2", "b: 2; a: 1", "a: 1; b: 2"]) == [("a", "a: 1"), ("b", "b: 2")]
    assert rows._shared(["x", "y"]) == []
    assert rows._shared(["only"]) == [("only", "only")]


def test_a_key_stated_twice_in_one_text_counts_once() -> None:
    # the last statement of a key is the member's; counted twice it would make a majority of 2 of 3
    assert rows._shared(["k: 1; k: 1", "k: 2", "k: 3"]) == []
    assert rows._shared(["k: 0; k: 1", "k: 1", "k: 2"]) == [("k", "k: 1")]


def test_own_is_what_a_member_says_beyond_the_family() -> None:
    shared = [("cpu", "cpu: 1"), ("vs base", "vs base: z")]
    assert rows._own("cpu: 1; cuda: 2 (x; y)", shared) == "cuda: 2 x; y; no vs base"
    assert rows._own("cpu: 1; vs base: z", shared) == ""
    assert rows._own("cpu: 2; vs base: z", shared) == "cpu: 2"
    assert rows._own("other", shared) == "other; no cpu, vs base"


LONG = "cpu: step 0 rel <= 1e-05, max rel <= 0.001"  # 42 characters


def view(*gates: dict[str, Any], labels: dict[str, str] | None = None) -> rows.Rows:
    return rows.rows(list(gates), labels)


def test_a_family_states_its_shared_threshold_once() -> None:
    v = view(
        gate("short.a", "fail", "x"),  # a family too short for a legend, judged first
        gate("short.b", "fail", "x"),
        gate("pilot.a", threshold=LONG),
        gate("pilot.b", "fail", f"{LONG}; vs base: masks (drawn; every step)"),
        gate("pilot.c", threshold="other"),
        gate("seals", threshold=LONG),
    )
    assert v.legend == [("pilot.*", LONG)]
    assert v.thresholds == {
        "short.a": "x",
        "short.b": "x",
        "pilot.b": "pilot.* (below) + vs base: masks drawn; every step",
        "pilot.a": "pilot.* (below)",
        "pilot.c": "pilot.* (below) + other; no cpu",
        "seals": LONG,
    }
    assert [g["id"] for g in v.shown] == ["short.a", "short.b", "pilot.b", "pilot.a", "pilot.c", "seals"]


@pytest.mark.parametrize(("size", "stated"), [(39, False), (40, True)])
def test_a_legend_shorter_than_forty_characters_is_not_stated(size: int, stated: bool) -> None:
    text = "k: " + "x" * (size - 3)
    v = view(gate("f.a", threshold=text), gate("f.b", threshold=text))
    assert v.legend == ([("f.*", text)] if stated else [])
    assert v.thresholds == (
        {"f.a": "f.* (below)", "f.b": "f.* (below)"} if stated else {"f.a": text, "f.b": text}
    )


def test_the_legend_joins_the_shared_parts() -> None:
    a, b = "a: " + "1" * 20, "b: " + "2" * 20
    v = view(gate("f.x", threshold=f"{a}; {b}"), gate("f.y", threshold=f"{a}; {b}; c: 3"))
    assert v.legend == [("f.*", f"{a}; {b}")]
    assert v.thresholds == {"f.x": "f.* (below)", "f.y": "f.* (below) + c: 3"}


def test_a_family_of_one_keeps_its_row_and_labels_fill_bare_numbers() -> None:
    v = view(gate("solo.a", threshold=LONG), gate("n.a", threshold=0.5), labels={"n.a": "catalogue"})
    assert v.legend == [] and v.thresholds == {"solo.a": LONG, "n.a": "catalogue"}


def test_rows_fold_the_gates_not_in_this_pipeline() -> None:
    v = view(absent("gone", "export"), gate("p"), gate("f", "fail"), gate("s", "skip", not_in_pipeline=[]))
    assert [g["id"] for g in v.shown] == ["f", "p", "s"]
    assert [g["id"] for g in v.absent] == ["gone"]
    assert v.thresholds == {"f": "-", "p": "-", "s": "-"}


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({}, ""),
        ({"not_applied": []}, ""),
        ({"not_applied": None}, ""),
        (
            {"not_applied": [{"check": "train mode", "why": "not recorded"}]},
            "not applied: train mode: not recorded",
        ),
        (
            {"not_applied": [{"check": "a", "why": "x"}, {"check": "b", "why": "y"}]},
            "not applied: a: x; b: y",
        ),
    ],
)
def test_not_applied_names_each_check_and_why(extra: dict[str, Any], said: str) -> None:
    assert rows.not_applied(gate("g", **extra)) == said


def test_entry_keeps_the_optional_keys_only_where_set() -> None:
    arts = {"runs/a": {"md5": "0" * 32}}
    assert rows.entry("g", Outcome("fail", 1.5, 2.0, "over", arts)) == {
        "id": "g",
        "status": "fail",
        "measured": 1.5,
        "threshold": 2.0,
        "message": "over",
        "artifacts": arts,
    }
    out = Outcome("skip", None, None, "m", not_applied={"a": "x", "b": "y"}, not_in_pipeline=["pilot"])
    assert rows.entry("h", out) == {
        "id": "h",
        "status": "skip",
        "measured": None,
        "threshold": None,
        "message": "m",
        "artifacts": {},
        "not_applied": [{"check": "a", "why": "x"}, {"check": "b", "why": "y"}],
        "not_in_pipeline": ["pilot"],
    }
