"""`python -m gates mutate --subset ci` on the default profile: real DVC, real training, real gates.

The default CPU profile is sized by the catalogue's power (docs/profiles.md): this test fails when a
mutant of the CI subset is no longer caught by the gates on it, the score the profile was sized by.

The CI subset is two or three catalogued bugs, each of which must be caught by the gates the
catalogue expects, and the negative control: the identity mutant (a no-op edit that reruns every
training stage) must pass every gate and leave the runs bitwise identical to the baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, code_first, scratch_repo
from gates.campaigns import mutants

pytestmark = pytest.mark.xdist_group("mutate")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict]:
    work = tmp_path_factory.mktemp("mutate")
    report = work / "mutation.json"
    # a scratch copy with the committed params.yaml: the campaign's baseline is the checkout's tracked
    # files, and the GPU nightly switches the working params.yaml to world 1, where a rank reading
    # another rank's row changes nothing (the nightly failed this test: 'equivalent', not 'killed')
    root = scratch_repo(work / "checkout")
    # without the pilot stage: no CI mutant expects a pilot gate (the campaign refuses one that does),
    # and its cells were a quarter of this test's CPU (docs/performance.md); the pilot gates' own
    # power is tested by tests/process/test_pilot_gate.py and measured by the whole-catalogue campaign
    cmd = [sys.executable, "-m", "gates", "--root", str(root), "mutate", "--subset", "ci", "--profile", "cpu",
           "--jobs", "1", "--skip-stage", "pilot", "--work", str(work / "w"), "--json", str(report)]  # fmt: skip
    env = {**code_first(root), "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env, timeout=1800)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(report.read_text())


def test_every_ci_mutant_is_caught_by_the_gates_it_is_expected_to(campaign) -> None:
    proc, rep = campaign
    ci = {m.id: m for m in mutants.load().select(None, "ci")}
    rows = {o["id"]: o for o in rep["mutants"]}
    assert set(rows) == set(ci)
    for mid, o in rows.items():
        if ci[mid].equivalent:
            continue
        assert o["status"] == "killed", (mid, o)
        assert o["expected_caught"] and o["caught_by"], (mid, o)
        assert not o["crashed_stage"] and not o["timed_out"], (mid, o)  # caught by a gate, not a crash
        assert o["rerun"], (mid, o)  # DVC reran the stages the mutant touches
    assert rep["holes"] == [] and rep["control_failures"] == []
    assert "pilot" in rep["skipped_stages"] and not any(g.startswith("pilot") for g in rep["judged_gates"])
    assert not any("pilot" in o["rerun"] for o in rep["mutants"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "killed" in proc.stdout and "score" in proc.stdout


def test_the_identity_mutant_is_not_caught_and_is_shown_equivalent(campaign) -> None:
    _, rep = campaign
    o = next(o for o in rep["mutants"] if o["id"] == "identity")
    assert o["status"] == "equivalent" and o["identical"] is True
    assert o["caught_by"] == [] and set(o["gates"].values()) <= {"pass", "skip"}
    assert {"train_single", "train@thread", "train@proc"} <= set(o["rerun"])  # it did rerun the trainings
    assert rep["score"] == 1.0 and rep["equivalent"] == 1


def test_a_stale_anchor_stops_the_campaign_before_any_work(tmp_path: Path) -> None:
    cat = tmp_path / "mutants.yaml"
    cat.write_text(mutants.CATALOGUE.read_text().replace("return t.lr * (step + 1) / t.warmup_steps",
                                                          "return t.lr * (step + 7) / t.warmup_steps"))  # fmt: skip
    cmd = [sys.executable, "-m", "gates", "--root", str(REPO), "mutate", "--only", "warmup-off-by-one",
           "--catalogue", str(cat), "--work", str(tmp_path / "w")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "mutant warmup-off-by-one: anchor not found in xtrain/core/optim.py" in proc.stderr
    assert not (tmp_path / "w" / "base").exists()
