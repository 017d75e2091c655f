"""The few mutants of gates/judges/{probes,gate,catalogue}.py and registry/checks.py that survived the
judge's unit tests (issue #37): each test holds the boundary or value a surviving mutant changed."""

from __future__ import annotations

import pytest

from gates.judges.catalogue import GATE_STAGES, stages_for
from gates.judges.gate import Picture, Unpaired
from gates.judges.probes import THRESHOLD, judge

N = 10_000  # with p = 0.1: sd of the dropped count sqrt(n p (1 - p)) = 30 exactly in floating point


def probes(dropped: int) -> dict:
    return {
        "attention_paths": {"max_abs_diff": 1e-7, "max_abs_ref": 2.0, "n_heads": 4, "n_kv_heads": 2},
        "dropout_mean": {"n": N, "p": 0.1, "sum_out": float(N), "dropped": dropped},
    }


@pytest.mark.parametrize(
    ("dropped", "status", "z"),
    [
        (1000 + 150, "pass", "5.0"),  # z exactly 5: the pass band is inclusive
        (1000 + 151, "inconclusive", "5.0"),
        (1000 + 240, "inconclusive", "8.0"),  # z exactly 8: not yet a failure
        (1000 + 241, "fail", "8.0"),
        (1000 - 241, "fail", "8.0"),
    ],
)
def test_probes_z_bands_at_their_exact_edges(dropped: int, status: str, z: str) -> None:
    o = judge(probes(dropped))
    assert (o.status, o.measured, o.threshold) == (status, f"attention 1e-07, dropout z 0.0 / {z}", THRESHOLD)
    said = f"dropout p=0.1 on 10000 ones: mean 1.00000 (z 0.0), dropped {dropped} (z {z})"
    assert said in o.message


def test_unpaired_carries_its_picture_and_says_its_caption() -> None:
    picture = Picture("<table></table>", "runs differ in length: 12 vs 10 steps")
    e = Unpaired(picture)
    assert e.picture is picture
    assert str(e) == "runs differ in length: 12 vs 10 steps" and e.args == (picture.caption,)


def test_stages_for_an_unknown_gate_lists_every_known_one() -> None:
    with pytest.raises(KeyError) as e:
        stages_for("nope")
    (said,) = e.value.args
    assert said == f"no stage map for gate nope (known: {', '.join(GATE_STAGES)})"
    assert "(known: loss_match.thread, loss_match.proc, " in said
