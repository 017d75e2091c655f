"""gates/judges/probes.py under mutation (docs/judge-mutation.md): the model_probes verdict on raw numbers.

judge() takes runs/probes.json's content: the attention bound (inclusive), the dropout z-scores and
their pass / inconclusive / fail bands, each with its exact message.
"""

from __future__ import annotations

import math

import pytest

from gates.judges.probes import (
    ATTN_ATOL,
    ATTN_RTOL,
    THRESHOLD,
    Z_FAIL,
    Z_PASS,
    attention_problem,
    dropout_z,
    judge,
)

N, P = 10_000, 0.1


def probes(diff: float = 1e-7, ref: float = 2.0, sum_out: float = float(N), dropped: int = 1000) -> dict:
    return {
        "attention_paths": {"max_abs_diff": diff, "max_abs_ref": ref, "n_heads": 4, "n_kv_heads": 2},
        "dropout_mean": {"n": N, "p": P, "sum_out": sum_out, "dropped": dropped},
    }


def test_the_constants_are_the_documented_bounds() -> None:
    assert (ATTN_RTOL, ATTN_ATOL, Z_PASS, Z_FAIL) == (1e-5, 1e-6, 5.0, 8.0)
    assert THRESHOLD == "attention |diff| <= 1e-06 + 1e-05*max|ref|; dropout z < 5 (fail > 8)"


def test_attention_within_its_bound_inclusive() -> None:
    bound = 1e-6 + 1e-5 * 2.0
    assert attention_problem(probes(diff=bound)["attention_paths"]) is None
    assert attention_problem(probes(diff=bound * 1.01)["attention_paths"]) == (
        "the attention-dropout path at p=0 differs from SDPA by 2.12e-05 > 2.1e-05 (4 heads, 2 kv heads): its "
        "kv-head expansion, scale or mask (xtrain/core/model.py Attention._attention_with_dropout)"
    )


def test_dropout_z_scores() -> None:
    z_mean, z_drop = dropout_z(probes()["dropout_mean"])
    assert (z_mean, z_drop) == (0.0, 0.0)
    sd_mean = math.sqrt(P / ((1 - P) * N))
    sd_drop = math.sqrt(N * P * (1 - P))
    z_mean, z_drop = dropout_z(probes(sum_out=N * (1 + 2 * sd_mean), dropped=1000 - 30)["dropout_mean"])
    assert z_mean == pytest.approx(2.0) and z_drop == pytest.approx(30 / sd_drop)
    assert dropout_z(probes(sum_out=N * (1 - 3 * sd_mean))["dropout_mean"])[0] == pytest.approx(3.0)


def test_correct_probes_pass() -> None:
    o = judge(probes())
    assert (o.status, o.measured, o.threshold) == ("pass", "attention 1e-07, dropout z 0.0 / 0.0", THRESHOLD)
    assert o.message == (
        "attention-dropout path at p=0 = SDPA within 1e-07; dropout p=0.1 on 10000 ones: mean 1.00000 (z 0.0), "
        "dropped 1000 (z 0.0)"
    )


def test_a_dropout_between_the_bands_is_inconclusive() -> None:
    sd = math.sqrt(N * P * (1 - P))
    o = judge(probes(dropped=int(1000 + 6 * sd)))
    assert o.status == "inconclusive"
    assert o.message == (
        f"dropout p=0.1 on 10000 ones: mean 1.00000 (z 0.0), dropped {int(1000 + 6 * sd)} (z 6.0): between z 5 and 8"
    )


@pytest.mark.parametrize("z", [5.0, 4.99])
def test_z_at_the_pass_band_passes(z: float) -> None:
    sd = math.sqrt(P / ((1 - P) * N))
    assert judge(probes(sum_out=N * (1 + z * sd))).status == "pass"


def test_z_just_over_the_fail_band_fails() -> None:
    sd = math.sqrt(P / ((1 - P) * N))
    assert judge(probes(sum_out=N * (1 + 8.0 * sd))).status == "inconclusive"
    o = judge(probes(sum_out=N * (1 + 8.1 * sd)))
    assert o.status == "fail" and o.message.endswith(
        ": not inverted dropout at rate p (xtrain/core/model.py Dropout)"
    )


def test_every_problem_is_in_the_failure() -> None:
    o = judge(probes(diff=1.0, sum_out=N * 0.9, dropped=1000))
    assert (o.status, o.measured) == ("fail", "attention 1, dropout z 30.0 / 0.0")
    assert o.message == (
        "the attention-dropout path at p=0 differs from SDPA by 1 > 2.1e-05 (4 heads, 2 kv heads): its kv-head "
        "expansion, scale or mask (xtrain/core/model.py Attention._attention_with_dropout); dropout p=0.1 on "
        "10000 ones: mean 0.90000 (z 30.0), dropped 1000 (z 0.0): not inverted dropout at rate p "
        "(xtrain/core/model.py Dropout)"
    )
    o = judge(probes(diff=1.0))
    assert o.status == "fail" and o.message.endswith("Attention._attention_with_dropout)")


class Reader:
    """What model_probes reads of the Artifacts: one validated JSON file."""

    def __init__(self, data: dict) -> None:
        self.data, self.asked = data, []

    def json(self, rel: str, schema: str, stage: str, refuse_non_finite: bool = True) -> dict:
        self.asked.append((rel, schema, stage, refuse_non_finite))
        return self.data


def test_the_gate_reads_runs_probes_json_and_its_picture_shows_each_probe() -> None:
    from gates.judges.probes import GATE, model_probes, model_probes_picture
    from gates.reading.measurements import read_probes, read_probes_for_picture

    a = Reader(probes(diff=3e-6))
    assert model_probes(read_probes(a)).status == "pass" and a.asked == [
        ("runs/probes.json", "probes.schema.json", "probes", True)
    ]
    pic = model_probes_picture(read_probes_for_picture(a), {})
    assert a.asked[-1] == ("runs/probes.json", "probes.schema.json", "probes", False)
    assert pic.html == (
        "<table class='files'><tr><th>probe</th><th>measured</th><th>pass</th></tr>"
        "<tr><td>attention-dropout path at p=0 vs SDPA: max |diff|</td><td>3e-06</td><td>&lt;= 2.1e-05</td></tr>"
        "<tr><td>dropout(ones) mean, z</td><td>0</td><td>&lt; 5 (fail &gt; 8)</td></tr>"
        "<tr><td>dropout(ones) dropped count, z</td><td>0</td><td>&lt; 5 (fail &gt; 8)</td></tr></table>"
    )
    assert pic.caption == (
        "Raw numbers of runs/probes.json (4 heads, 2 kv heads; dropout p=0.1 on 10000 ones). Pass: every row "
        "within its bound."
    )
    assert GATE.id == "model_probes" and GATE.threshold({}) == THRESHOLD and GATE.run(a, {}).status == "pass"


def test_the_gate_judges_records_built_by_hand_no_tree() -> None:
    from gates.judges.probes import GATE, model_probes, model_probes_picture
    from gates.reading.measurements import ProbeRecords

    sigma = math.sqrt(N * P * (1 - P))
    kinds = {
        "pass": probes(),
        "inconclusive": probes(dropped=round(N * P + 6 * sigma)),
        "fail": probes(diff=1.0),
    }
    for status, data in kinds.items():
        assert model_probes(ProbeRecords(data)) == judge(data) and judge(data).status == status
        assert GATE.judge(ProbeRecords(data), {}).status == status
    assert model_probes_picture(ProbeRecords(probes(diff=float("nan"))), {}).html.count("nan") == 1
