"""runrecord's side of the statistical tier: dropout="replicas" leaves the model's dropout as torch draws
it, rec.reseed(k) seeds only the noise left after init and data order, the record names the replica.

Negative controls: the default dropout="seed" still refuses kernel dropout (now naming 'replicas'); a
replica that never reseeds is refused at step 0, not at finish()."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from runrecord import RunRecorder, RunRecordError
from runrecord.dropout import install, noise_seed, reseed_noise


class Attn(nn.Module):
    """nanoGPT's shape: a float `dropout` handed to scaled_dot_product_attention, plus an nn.Dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.resid = nn.Dropout(0.1)
        self.dropout = 0.1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.lin(x).unsqueeze(1)
        y = nn.functional.scaled_dot_product_attention(
            q, q, q, dropout_p=self.dropout if self.training else 0
        )
        return self.resid(y.squeeze(1)).sum(-1)


def config(steps: int = 2) -> dict:
    return {"seed": 3, "model": {"d": 4}, "train": {"steps": steps, "eval_every": 0}}


def test_replicas_mode_leaves_dropout_as_torch_draws_it():
    m = Attn()
    record, state = install(m, "replicas", 3)
    assert record == {"masks": "unseeded", "modules": 2, "p": [0.1]} and state is None
    assert type(m.resid) is nn.Dropout and m.resid.p == 0.1 and m.dropout == 0.1
    with pytest.raises(RunRecordError, match=r"dropout='replicas'\) and rec.reseed\(replica\)"):
        install(Attn(), "seed", 3)  # control: the default still refuses kernel dropout


def test_noise_seeds_differ_per_replica_rank_and_world():
    seeds = {noise_seed(3, k, r, w) for k in range(4) for w in (1, 2) for r in range(w)}
    assert len(seeds) == 12 and all(0 <= s < 2**63 for s in seeds)
    assert noise_seed(3, 1, 0, 1) == noise_seed(3, 1, 0, 1)
    assert noise_seed(3, 1, 0, 1) != noise_seed(4, 1, 0, 1)
    assert noise_seed("a", 1, 0, 1) == noise_seed("a", 1, 0, 1) != noise_seed("b", 1, 0, 1)
    seed = reseed_noise(3, 2, 0, 1)
    drawn = torch.rand(3)
    torch.manual_seed(seed)
    assert torch.equal(drawn, torch.rand(3))


def test_reseed_is_refused_outside_replicas_mode_and_after_step_0(tmp_path):
    m = nn.Sequential(nn.Linear(4, 1))
    rec = RunRecorder(config(), 8, model=m, run_dir=tmp_path / "a")
    with pytest.raises(
        RunRecordError, match=r"reseed: : dropout='seed' \(rule: RunRecorder\(\.\.\., dropout='replicas'\)\)"
    ):
        rec.reseed(0)
    rec = RunRecorder(config(), 8, model=Attn(), dropout="replicas", run_dir=tmp_path / "b")
    rec.samples([0, 1])
    with pytest.raises(RunRecordError, match="dropout='replicas' but no replica seeded"):
        rec.step(1.0, 1.0, 0.1)  # refused at step 0, before training goes on
    with pytest.raises(RunRecordError, match="after training began"):
        rec.reseed(0)
    with pytest.raises(RunRecordError, match="replica"):
        RunRecorder(config(), 8, model=Attn(), dropout="replicas", run_dir=tmp_path / "c").reseed(-1)


def test_a_replica_run_records_its_index_and_tier(tmp_path):
    model = Attn()
    rec = RunRecorder(config(), 8, model=model, dropout="replicas", run_dir=tmp_path / "r1")
    seed = rec.reseed(1)
    assert seed == noise_seed(3, 1, 0, 1)
    for step in range(2):
        rec.samples([step, step + 1])
        loss = model(torch.randn(2, 4)).pow(2).mean()
        loss.backward()
        rec.step(loss.item(), 1.0, 0.1)
    out = rec.finish(checkpoint=False)
    assert out["replica"] == {"index": 1, "tier": "statistical", "noise_seed": seed}
    assert out["dropout"] == {"masks": "unseeded", "modules": 2, "p": [0.1]}
    written = json.loads((tmp_path / "r1" / "metrics.json").read_text())  # the schema accepted it
    assert written["replica"]["index"] == 1 and written["dropout"]["masks"] == "unseeded"
    plain = RunRecorder(config(), 8, model=nn.Linear(4, 1), dropout="off", run_dir=tmp_path / "p")
    for step in range(2):
        plain.samples([step])
        plain.step(1.0, 1.0, 0.1)
    assert "replica" not in plain.finish(checkpoint=False)  # control: only a reseeded run names one
