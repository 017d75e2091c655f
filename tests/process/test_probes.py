"""The model_probes gate (gates/judges/probes.py) on the real probes (xtrain/core/probes.py, pipeline/probes.py).

Negative controls are the mutation campaign's own bugs, applied to a scratch copy of the code by
gates/campaigns/mutants.py: the two feature-path bugs that passed every other gate (issue #24).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PARAMS, REPO, code_first
from gates.campaigns import mutants
from gates.judges import probes

CODE = ("contracts", "params", "pipeline", "xtrain", "gates")


def probe_with(tmp_path: Path, mutant_id: str | None) -> dict:
    """runs/probes.json from a scratch copy of the code, with one catalogue mutant applied."""
    root = tmp_path / "tree"
    for pkg in CODE:
        shutil.copytree(REPO / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PARAMS, root / "params.yaml")
    if mutant_id:
        (mutant,) = mutants.load().select([mutant_id], None)
        mutants.apply(mutant, root)
    out = root / "probes.json"
    env = code_first(root)
    subprocess.run(
        [sys.executable, "-m", "pipeline.probes", "--out", str(out)], cwd=root, env=env, check=True
    )
    return json.loads(out.read_text())


def test_the_unmutated_model_passes(tmp_path: Path) -> None:
    outcome = probes.judge(probe_with(tmp_path, None))
    assert outcome.status == "pass", outcome.message


@pytest.mark.parametrize(
    ("mutant_id", "names"),
    [("gqa-tiled-attn-dropout-path", "_attention_with_dropout"), ("dropout-no-rescale", "Dropout")],
)
def test_negative_control_a_feature_path_bug_fails(tmp_path: Path, mutant_id: str, names: str) -> None:
    outcome = probes.judge(probe_with(tmp_path, mutant_id))
    assert outcome.status == "fail" and names in outcome.message, outcome.message


def record(diff: float = 1e-7, sum_out: float | None = None, dropped: int | None = None) -> dict:
    n, p = 100_000, 0.1
    return {
        "attention_paths": {"n_heads": 4, "n_kv_heads": 2, "max_abs_diff": diff, "max_abs_ref": 2.0},
        "dropout_mean": {
            "p": p,
            "n": n,
            "sum_out": float(n) if sum_out is None else sum_out,
            "dropped": round(n * p) if dropped is None else dropped,
        },
    }


def test_the_bounds_are_where_the_docstring_says() -> None:
    bound = probes.ATTN_ATOL + probes.ATTN_RTOL * 2.0
    assert probes.judge(record(diff=bound)).status == "pass"
    assert probes.judge(record(diff=bound * 1.01)).status == "fail"
    sigma = math.sqrt(100_000 * 0.1 * 0.9)
    assert probes.judge(record(dropped=round(10_000 + 4 * sigma))).status == "pass"
    assert probes.judge(record(dropped=round(10_000 + 6 * sigma))).status == "inconclusive"
    assert probes.judge(record(dropped=round(10_000 + 9 * sigma))).status == "fail"
    assert probes.judge(record(sum_out=90_000.0)).status == "fail"  # no 1/(1-p) rescale
