"""gates/judges/catalogue.py and gates/judges/outcome.py under mutation (docs/judge-mutation.md).

Which gates a selection runs (the seals gate always), which stages they read, which gates a project
without those stages skips, lookups by id, and the Outcome every gate returns (statuses, JSON-safe
non-finite numbers, the helpers).
"""

from __future__ import annotations

import math

import pytest

from gates.judges import catalogue
from gates.judges.catalogue import GATES, SEALS, find, get, not_in_pipeline, select, stages_of
from gates.judges.outcome import STATUSES, Outcome, failed, fmt, inconclusive, passed

IDS = [g.id for g in GATES]


def test_select_runs_every_gate_or_the_chosen_with_the_seals_first() -> None:
    assert select(None) is GATES and select([]) is GATES
    assert [g.id for g in select(["loss_match"])] == ["seals", "loss_match.thread", "loss_match.proc"]
    assert [g.id for g in select(["loss_match.proc", "finite"])] == ["seals", "loss_match.proc", "finite"]
    assert [g.id for g in select(["seals", "finite"])] == ["seals", "finite"]
    assert [g.id for g in select(["cross_rank"])] == ["seals", "cross_rank.thread", "cross_rank.proc"]


def test_select_refuses_unknown_gates_naming_the_known() -> None:
    with pytest.raises(KeyError) as e:
        select(["finite", "loss", "nope"])
    assert e.value.args[0] == f"unknown gate loss, nope (known: {', '.join(IDS)})"
    with pytest.raises(KeyError):
        select(["loss_match.threadx"])


def test_stages_of_the_selected_gates() -> None:
    from gates.campaigns.bisect import stages_for

    assert stages_of(GATES) is None
    assert stages_of([SEALS]) is None  # `--only seals` alone seals every stage, not none
    assert stages_of(select(["finite"])) == sorted(stages_for("finite"))
    both = select(["export_md5", "closed_loop"])
    assert stages_of(both) == sorted(set(stages_for("export_md5")) | set(stages_for("closed_loop")))


def test_a_gate_without_a_stage_map_means_every_stage(monkeypatch) -> None:
    from gates.judges import catalogue

    monkeypatch.setattr(catalogue, "stages_for", lambda gid: [])
    assert stages_of(select(["finite"])) is None
    monkeypatch.setattr(catalogue, "stages_for", lambda gid: (_ for _ in ()).throw(KeyError("no")))
    assert stages_of(select(["finite"])) is None
    assert not_in_pipeline(get("finite"), lambda s: False) == []


def test_the_stage_map_names_a_gate_by_prefix_and_refuses_an_unknown_one() -> None:
    from gates.campaigns import bisect
    from gates.judges.catalogue import stages_for

    assert stages_for(None) == [] and stages_for("seals") == []
    assert stages_for("loss_match.proc") == ["train_single", "train@proc"]
    assert stages_for("loss_match") == ["train_single", "train@thread"]  # a family: its first member
    assert stages_for("pilot.dropout") == ["pilot"]
    with pytest.raises(KeyError, match="no stage map for gate nope"):
        stages_for("nope")
    with pytest.raises(bisect.BisectError, match=r"^no stage map for gate nope \(known: "):
        bisect.stages_for("nope")  # bisect's own error, the same message


def test_not_in_pipeline_names_the_stages_a_project_lacks() -> None:
    from gates.judges.catalogue import stages_for

    gate = get("closed_loop")
    assert not_in_pipeline(gate, lambda s: False) == stages_for("closed_loop")
    assert not_in_pipeline(gate, lambda s: s == stages_for("closed_loop")[0]) == []
    assert not_in_pipeline(gate, lambda s: True) == []


def test_a_gate_lacking_one_stage_it_compares_is_not_in_the_pipeline() -> None:
    def thread_less(stage: str) -> bool:  # a project with train_single and train@proc only
        return stage != "train@thread"

    assert not_in_pipeline(get("loss_match.thread"), thread_less) == ["train@thread"]
    assert not_in_pipeline(get("launcher_parity"), thread_less) == ["train@thread"]
    assert not_in_pipeline(get("launcher_parity"), lambda s: False) == ["train@thread", "train@proc"]
    assert not_in_pipeline(get("loss_match.proc"), thread_less) == []
    assert not_in_pipeline(get("fresh_train"), lambda s: s == "export") == ["train_single"]


def test_stages_read_names_what_the_bisect_map_lacks() -> None:
    from gates.campaigns.bisect import stages_for

    assert catalogue.stages_read("export_gguf") == ["export"]
    assert catalogue.stages_read("closed_loop") == stages_for("closed_loop")
    assert catalogue.stages_read("nope") == [] and catalogue.stages_read("seals") == []
    assert not_in_pipeline(get("export_gguf"), lambda s: s != "export") == ["export"]


def test_find_and_get() -> None:
    assert find("seals") is SEALS and find("nope") is None
    assert get("finite").id == "finite"
    with pytest.raises(KeyError) as e:
        get("nope")
    assert e.value.args[0] == f"unknown gate nope (known: {', '.join(IDS)})"
    exported = {"GATES", "SEALS", "Gate", "find", "get", "not_in_pipeline", "select", "stages_of"}
    assert exported <= set(catalogue.__all__)


def test_the_report_order_begins_with_the_seals_and_the_run_gates() -> None:
    order = ["seals", "consistency", "loss_match.thread", "loss_match.proc", "launcher_parity",
             "cross_rank.thread", "cross_rank.proc", "export_md5", "fresh_train", "closed_loop", "finite"]  # fmt: skip
    assert [i for i in IDS if i in order] == order and IDS[0] == "seals"
    assert len(IDS) == len(set(IDS))


def test_outcomes() -> None:
    assert STATUSES == ("pass", "fail", "inconclusive", "skip", "error")
    assert passed(1, 2, "m") == Outcome("pass", 1, 2, "m", {})
    assert failed(1, 2, "m").status == "fail" and inconclusive(1, 2, "m").status == "inconclusive"
    assert (
        Outcome("skip").measured is None and Outcome("skip").message == "" and Outcome("skip").artifacts == {}
    )
    with pytest.raises(AssertionError):
        Outcome("maybe")
    assert Outcome("fail", math.nan).measured == "nan" and Outcome("fail", -math.inf).measured == "-inf"
    assert Outcome("pass", 1.5).measured == 1.5 and Outcome("pass", 7).measured == 7
    assert fmt(0.000123456) == "0.000123" and fmt(12345.0) == "1.23e+04"
