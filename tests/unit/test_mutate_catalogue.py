"""The mutation catalogue (gates/campaigns/mutants.yaml) stays in step with the code; the verdict logic is honest.

No training here: every mutant is applied to a copy of the files it edits and must parse; a stale
anchor fails loudly; classify/score are checked on hand-made outcomes (tests/pipeline/test_mutate_ci.py runs
real campaigns).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from contracts.validate import ValidationError, load_schema, validate
from gates.campaigns import mutants, mutate

AREAS_REQUIRED = {"model", "optimizer", "schedule", "loss", "data", "sync", "accumulation", "dropout", "eval",
                  "checkpoint", "export", "tokenizer"}  # fmt: skip


def test_catalogue_is_valid_and_covers_the_training_stack() -> None:
    cat = mutants.load()
    real = [m for m in cat.mutants if not m.equivalent]
    assert len(real) >= 30
    assert AREAS_REQUIRED <= {m.area for m in real}
    assert [m.id for m in cat.mutants if m.equivalent] == ["identity"]
    ci = [m.id for m in cat.select(None, "ci")]
    assert "identity" in ci and 3 <= len(ci) <= 4  # the negative control and 2-3 mutants
    assert all(m.expect for m in real if m.id != "ddp-broadcasts-rope-buffers")


@pytest.mark.parametrize("mutant", mutants.load().mutants, ids=lambda m: m.id)
def test_every_anchor_matches_exactly_once_and_the_mutant_parses(mutant: mutants.Mutant) -> None:
    texts = mutants.mutated_text(mutant, REPO)
    for rel, text in texts.items():
        ast.parse(text, rel)  # a mutant is a bug in behaviour, never a syntax error
        if not mutant.equivalent:
            assert text != (REPO / rel).read_text()


def copy_edited(m: mutants.Mutant, dest: Path) -> None:
    for e in m.edits:
        (dest / e.file).parent.mkdir(parents=True, exist_ok=True)
        (dest / e.file).write_text((REPO / e.file).read_text())


def test_a_stale_anchor_fails_loudly_naming_the_mutant_and_the_file(tmp_path: Path) -> None:
    m = next(m for m in mutants.load().mutants if m.id == "rmsnorm-eps-outside-rsqrt")
    copy_edited(m, tmp_path)
    assert mutants.apply(m, tmp_path) == ["xtrain/core/model.py"]  # positive control: it applies
    with pytest.raises(
        mutants.AnchorError,
        match=r"mutant rmsnorm-eps-outside-rsqrt: anchor not found in xtrain/core/model\.py",
    ):
        mutants.apply(m, tmp_path)  # applied once: the anchor is gone
    twice = dataclasses.replace(m, edits=[dataclasses.replace(m.edits[0], old="self.eps")])
    copy_edited(m, tmp_path)
    with pytest.raises(mutants.AnchorError, match=r"found \d+ times, expected once in xtrain/core/model\.py"):
        mutants.apply(twice, tmp_path)


def test_a_multi_line_anchor_matches_at_its_indentation(tmp_path: Path) -> None:
    m = next(m for m in mutants.load().mutants if m.id == "gqa-heads-tiled")
    copy_edited(m, tmp_path)
    mutants.apply(m, tmp_path)
    text = (tmp_path / "xtrain/core/model.py").read_text()
    assert (
        "            rep = cfg.n_heads // cfg.n_kv_heads\n            y = F.scaled_dot_product_attention("
        in text
    )


def test_a_bad_catalogue_is_one_line_naming_the_key(tmp_path: Path) -> None:
    raw = yaml.safe_load(mutants.CATALOGUE.read_text())
    raw["mutants"][1]["area"] = "vibes"
    bad = tmp_path / "mutants.yaml"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValidationError, match=r"mutants\[1\]\.area"):
        mutants.load(bad)
    raw["mutants"][1]["area"] = "model"
    raw["mutants"].append(copy.deepcopy(raw["mutants"][1]))  # a copy: the catalogue refuses aliases
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValidationError, match="duplicate ids"):
        mutants.load(bad)
    with pytest.raises(ValidationError, match="unknown mutant ids"):
        mutants.load().select(["no-such-mutant"], None)


def outcome(m: mutants.Mutant, gates: dict[str, str], identical: bool, crashed: str | None = None):
    return mutate.classify(m, gates, identical, ([], []), 1.0, crashed, False, "")


def test_classify_and_score() -> None:
    cat = {m.id: m for m in mutants.load().mutants}
    ok = {"fresh_train": "pass", "loss_match.proc": "pass"}
    caught = {"fresh_train": "fail", "loss_match.proc": "pass"}
    rows = [
        outcome(cat["identity"], ok, True),  # the control: equivalent
        outcome(cat["warmup-off-by-one"], caught, False),  # killed, as expected
        outcome(cat["accum-loss-not-divided"], ok, True),  # unexercised: equivalent, not declared
        outcome(cat["adam-betas-swapped"], ok, False),  # a hole
        outcome(cat["ddp-eval-mode-after-eval"], {"loss_match.proc": "error"}, False, crashed="train@proc"),
    ]
    assert [o.status for o in rows] == ["equivalent", "killed", "equivalent", "hole", "killed"]
    assert rows[1].expected_caught and not rows[3].expected_caught
    # killed by the crash alone: the gate errors because the stage left no artifact; no gate caught it
    assert rows[4].caught_by == [] and not rows[4].expected_caught
    s = mutate.score(rows)
    assert (s["killed"], s["equivalent"], s["holes"], s["unexercised"]) == (
        2,
        2,
        ["adam-betas-swapped"],
        ["accum-loss-not-divided"],
    )
    assert s["score"] == round(2 / 3, 4) and s["score_strict"] == 0.5
    assert s["killed_by_gates"] == 1 and s["stage_only"] == ["ddp-eval-mode-after-eval"]
    assert s["score_gates"] == round(1 / 3, 4)
    # a gate that fails beside a crashed stage counts (k-norm-uses-q-norm: train@proc crashes, fresh_train
    # fails); so does a gate error with no crashed stage; a timeout alone does not
    crashed_and_failed = outcome(cat["k-norm-uses-q-norm"], {"fresh_train": "fail", "loss_match.proc": "error"},
                                 False, crashed="train@proc")  # fmt: skip
    assert crashed_and_failed.caught_by == ["fresh_train"] and crashed_and_failed.expected_caught
    errored = outcome(cat["lr-drift-0.1pct"], {"fresh_train": "error"}, False)
    timed_out = mutate.classify(cat["warmup-off-by-one"], {}, False, ([], []), 1.0, None, True, "timed out")
    s = mutate.score([crashed_and_failed, errored, timed_out])
    assert (s["killed"], s["killed_by_gates"], s["stage_only"]) == (3, 2, ["warmup-off-by-one"])
    assert s["score_gates"] == round(2 / 3, 4) and s["score"] == 1.0
    # negative controls of the control: a caught or non-bitwise identity mutant is a campaign failure
    assert outcome(cat["identity"], caught, True).status == "false-alarm"
    assert outcome(cat["identity"], ok, False).status == "nondeterministic"
    assert mutate.score([outcome(cat["identity"], caught, True)])["control_failures"] == ["identity"]


def test_crashed_stages_are_read_from_dvc_keep_going_output() -> None:
    two = "WARNING: failed to run: false, exited with 1\nERROR: failed to reproduce stages: 'train@thread' and 'train@proc'"
    assert mutate.crashed_stages(two) == "train@thread, train@proc"
    assert mutate.crashed_stages("ERROR: failed to reproduce 'export'") == "export"
    assert mutate.crashed_stages("something else") == "dvc repro"
    out = "RuntimeError: model is in eval mode at a training step\nChildFailedError:\nERROR: failed to reproduce 'x'"
    assert mutate.error_line(out).startswith("RuntimeError: model is in eval mode")
    # the pilot's recorded crash, printed after train@proc's own error (dvc repro --keep-going), is a
    # progress line of another stage, not the crashed stage's error (the 2026-12-01b campaign's message)
    both = (
        "error: rank 0 failed: RuntimeError: Expected to have finished reduction\n"
        "[pilot] all proc: FAILED (rank 0: RuntimeError: Expected to have finished reduction)\n"
        "ERROR: failed to reproduce 'train@proc'"
    )
    assert (
        mutate.error_line(both) == "error: rank 0 failed: RuntimeError: Expected to have finished reduction"
    )


def test_the_report_carries_the_gates_alone_score_and_the_table_prints_it() -> None:
    cat = {m.id: m for m in mutants.load().mutants}
    rows = [
        outcome(cat["identity"], {"fresh_train": "pass"}, True),
        outcome(cat["warmup-off-by-one"], {"fresh_train": "fail"}, False),
        outcome(cat["ddp-eval-mode-after-eval"], {"loss_match.proc": "error"}, False, crashed="train@proc"),
    ]
    report = {
        "format": mutate.REPORT_FORMAT, "profile": "tiny", "catalogue": "gates/campaigns/mutants.yaml",
        "judged_gates": ["fresh_train"], "skipped_stages": [], "jobs": 1, "baseline_s": 1.0, "wall_s": 2.0,
        **mutate.score(rows), "mutants": [dataclasses.asdict(o) for o in rows],
    }  # fmt: skip
    validate(report, load_schema("mutation_report.schema.json"), "report")
    assert report["score_gates"] == 0.5 and report["score"] == 1.0
    line = mutate.table(report).splitlines()[-1]
    assert "score 1.0 (strict 1.0, by the gates alone 0.5: 1 killed only by a stage crash or timeout)" in line
    with pytest.raises(ValidationError, match="score_gates"):
        validate(
            {k: v for k, v in report.items() if k != "score_gates"},
            load_schema("mutation_report.schema.json"),
            "r",
        )
