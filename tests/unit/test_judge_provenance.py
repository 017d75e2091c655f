"""The provenance gate's picture and the report formats the check writes, in-process (issue #37: a
change to the judge comes with unit tests that kill its mutants; `tests/judge_mutation.py --changed`).

The picture reads through the gates' reader (`Artifacts.json`, `lock.in_pipeline`); a small reader
holding plain records stands in for the artifact tree, whose real form tests/pipeline/test_provenance.py and
tests/pipeline/test_green_pictures.py judge.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from conftest import PARAMS
from contracts.machine import facts_hash
from gates import __main__ as cli
from gates.judges.gate import NoPicture
from gates.judges.provenance import provenance_picture
from gates.reading.run_origins import read_machines_for_picture
from params.config import load_thresholds

MACHINE = {"cpu": {"model_name": "Some CPU", "isa": ["avx2"]}, "torch": "2.13.0+cpu"}
HERE = facts_hash(MACHINE)


class Lock:
    def __init__(self, stages: set[str]) -> None:
        self.stages = stages

    def in_pipeline(self, stage: str) -> bool:
        return stage in self.stages


class Records:
    """What provenance_picture reads: runs/env.json and each run's metrics.json, by path."""

    def __init__(self, runs: dict[str, dict[str, Any]], stages: set[str]) -> None:
        self.files = {"runs/env.json": {"machine": MACHINE, "machine_hash": HERE}} | {
            f"runs/{k}/metrics.json": {"env": v} for k, v in runs.items()
        }
        self.lock = Lock(stages)
        self.read: list[tuple[str, str, str]] = []

    def json(self, rel: str, schema: str, stage: str) -> dict[str, Any]:
        self.read.append((rel, schema, stage))
        return self.files[rel]


def run_env(env_id: str, **cpu: Any) -> dict[str, Any]:
    facts = {**MACHINE, "cpu": {**MACHINE["cpu"], **cpu}, "threads_per_rank": 2, "precision": "fp32"}
    return {"env_id": env_id, "dispatch_facts": facts}


TRAINS = {"train_single", "train@thread", "train@proc"}


def test_each_run_is_a_row_beside_this_machine() -> None:
    a = Records({k: run_env(f"e-{k}") for k in ("single", "thread", "proc")}, TRAINS)
    pic = provenance_picture(read_machines_for_picture(a), {})
    assert pic.html == (
        "<table class='files'><tr><th>run</th><th>machine</th><th>environment</th><th>this machine: "
        f"<code>{HERE}</code></th></tr>"
        + "".join(
            f"<tr class='ok'><td>runs/{k}</td><td><code>{HERE}</code></td><td>e-{k}</td><td>here</td></tr>"
            for k in ("single", "thread", "proc")
        )
        + "</table>"
    )
    assert (
        pic.caption == "Each run's machine facts, hashed, against runs/env.json's. Pass: every row is here."
    )
    assert a.read == [
        ("runs/env.json", "env.schema.json", "env"),
        ("runs/single/metrics.json", "metrics.schema.json", "train_single"),
        ("runs/thread/metrics.json", "metrics.schema.json", "train@thread"),
        ("runs/proc/metrics.json", "metrics.schema.json", "train@proc"),
    ]


def test_a_run_from_another_machine_is_a_bad_row_and_escaped() -> None:
    a = Records({"thread": run_env("<e>", model_name="Other CPU")}, {"train@thread"})
    html = provenance_picture(read_machines_for_picture(a), {}).html
    other = facts_hash({**MACHINE, "cpu": {**MACHINE["cpu"], "model_name": "Other CPU"}})
    assert f"<tr class='bad'><td>runs/thread</td><td><code>{other}</code></td><td>&lt;e&gt;</td>" in html
    assert html.endswith("<td>ANOTHER MACHINE</td></tr></table>") and "runs/single" not in html


def test_a_pipeline_without_training_has_no_picture() -> None:
    with pytest.raises(NoPicture, match=r"^no training stage in this pipeline$"):
        provenance_picture(read_machines_for_picture(Records({}, set())), {})


def formats(tmp_path: Path, **flags: str | None) -> argparse.Namespace:
    return argparse.Namespace(**{"junit": None, "markdown": None, "html": None, **flags})


REPORT = {"gates": [], "summary": {}, "exit_code": 0}
THRESHOLDS = load_thresholds(PARAMS)


def test_each_format_is_written_under_the_root(tmp_path: Path, monkeypatch, capsys) -> None:
    from gates.reporting import html_report

    seen: dict[str, Any] = {}

    def render(rep, root, thresholds, labels, params) -> str:
        seen.update(rep=rep, root=root, thresholds=thresholds, labels=labels, params=params)
        return "<html>page</html>"

    monkeypatch.setattr(html_report, "render", render)
    monkeypatch.setattr(cli.ci_report, "junit_xml", lambda rep, s: f"<junit {len(s)}/>")
    monkeypatch.setattr(cli.ci_report, "markdown", lambda rep, labels: f"md {len(labels)}")
    args = formats(tmp_path, junit="j.xml", markdown="m.md", html="p.html")
    cli.write_formats(args, REPORT, tmp_path, THRESHOLDS, {"x": 1.0, "y": 2.0}, "PARAMS")
    assert (tmp_path / "j.xml").read_text() == "<junit 2/>"
    labels = seen["labels"]
    assert (tmp_path / "m.md").read_text() == f"md {len(labels)}" and len(labels) >= 15
    assert (tmp_path / "p.html").read_text() == "<html>page</html>"
    assert seen["rep"] is REPORT and seen["root"] == tmp_path and seen["params"] == "PARAMS"
    assert seen["thresholds"] is THRESHOLDS and set(labels) >= {"seals", "provenance", "fresh_train"}
    err = capsys.readouterr().err
    assert err.startswith("wrote p.html in ") and err.endswith("s\n")


def test_no_flag_writes_nothing(tmp_path: Path) -> None:
    cli.write_formats(formats(tmp_path), REPORT, tmp_path, THRESHOLDS, {}, None)
    assert list(tmp_path.iterdir()) == []  # control: the files above come from the flags


@pytest.mark.parametrize("flag", ["junit", "markdown", "html"])
def test_a_foreign_file_at_a_format_path_is_refused_and_kept(tmp_path: Path, monkeypatch, flag: str) -> None:
    """Each format is written as its own kind: a user's file at that path is never replaced."""
    from contracts.outputs import OutputRefused
    from gates.reporting import html_report

    monkeypatch.setattr(html_report, "render", lambda *a: "<html>page</html>")
    monkeypatch.setattr(cli.ci_report, "junit_xml", lambda rep, s: "<junit/>")
    monkeypatch.setattr(cli.ci_report, "markdown", lambda rep, labels: "md")
    (tmp_path / "mine.txt").write_text("my notes")
    with pytest.raises(OutputRefused):
        cli.write_formats(formats(tmp_path, **{flag: "mine.txt"}), REPORT, tmp_path, THRESHOLDS, {}, None)
    assert (tmp_path / "mine.txt").read_text() == "my notes"


def test_the_page_time_is_the_time_it_took(tmp_path: Path, monkeypatch, capsys) -> None:
    from gates.reporting import html_report

    clock = iter([1000.0, 1000.25])
    monkeypatch.setattr(cli.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(html_report, "render", lambda *a: "<html>page</html>")
    cli.write_formats(formats(tmp_path, html="p.html"), REPORT, tmp_path, THRESHOLDS, {}, None)
    assert capsys.readouterr().err == "wrote p.html in 0.25s\n"


def test_the_gate_names_each_run_made_elsewhere_and_refuses_a_forged_env_record() -> None:
    from gates.judges.provenance import machine_problems
    from gates.reading.artifacts import ArtifactError

    a = Records(
        {"single": run_env("e-s"), "proc": run_env("e-p", model_name="Other CPU")}, TRAINS - {"train@thread"}
    )
    other = facts_hash({**MACHINE, "cpu": {**MACHINE["cpu"], "model_name": "Other CPU"}})
    r = read_machines_for_picture(a)
    assert (r.here, machine_problems(r)) == (
        HERE,
        [
            f"runs/proc was made on machine {other} (e-p), this is {HERE}: a run restored from another "
            "environment's cache (dvc repro -f train@proc)"
        ],
    )
    a.files["runs/env.json"]["machine_hash"] = "0" * 8
    with pytest.raises(
        ArtifactError, match=rf"^runs/env.json: machine_hash 00000000, its facts hash to {HERE}$"
    ):
        read_machines_for_picture(a)
