"""Every writer safe under concurrency and bad input (issue #51 item 4), through the real commands.

Real processes at once, real signals, real files: `python -m pipeline.config set` twice at once
keeps both values; the negative controls re-plant the old behaviour (no lock) in the same harness
and see the value lost. The in-process tests of the same code are the judge's unit tests
(tests/test_judge_contracts_lockfile.py, test_judge_params_config_writers.py, ...).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import PARAMS, REPO, code_first

# `config set` with a pause between reading the file and writing it (so two writers overlap for
# certain); NO_LOCK re-plants main's writer (no lock) for the negative control.
SLOW_SET = """
import sys, time
import params.config as c
check = c._check_edit_takes_effect
def slow(*a, **k):
    check(*a, **k)
    time.sleep(0.5)
c._check_edit_takes_effect = slow
if sys.argv[1] == "no-lock":
    import contextlib
    c.lockfile.held = lambda *a, **k: contextlib.nullcontext()
from pipeline.config import main
sys.exit(main(sys.argv[2:]))
"""

KEYS = ("seed=11", "train.eval_batches=3", "train.log_every=7", "export.dtype=bf16")


def start_setters(params: Path, mode: str) -> list[subprocess.Popen]:
    if mode == "real":
        head = [sys.executable, "-m", "pipeline.config"]
    else:
        head = [sys.executable, "-c", SLOW_SET, mode]
    return [
        subprocess.Popen(
            [*head, "--params", str(params), "set", kv],
            cwd=REPO,
            env=code_first(REPO),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kv in KEYS
    ]


def values(params: Path) -> tuple:
    raw = yaml.safe_load(params.read_text())
    return raw["seed"], raw["train"]["eval_batches"], raw["train"]["log_every"], raw["export"]["dtype"]


@pytest.mark.parametrize("mode", ["real", "slow"])
def test_config_set_at_once_keeps_every_value(tmp_path: Path, mode: str) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS.read_text())
    procs = start_setters(params, mode)
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(KEYS), outs
    assert values(params) == (11, 3, 7, "bf16")  # main: 1 to 3 of the 4 values lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # no lock file left


def test_negative_control_without_the_lock_a_value_is_lost(tmp_path: Path) -> None:
    """The same overlapping writers with main's writer (no lock): each says "set", exits 0, and all
    but one value are lost: what the test above would see without contracts/lockfile.py."""
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS.read_text())
    procs = start_setters(params, "no-lock")
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(KEYS)
    assert all(": set " in out for out, _ in outs)
    assert values(params) != (11, 3, 7, "bf16")
