"""runrecord meets real loops where they are (issue #54 item 3), in process: evals at any steps (none
refused as "not due", none demanded at finish()), config.train.eval_every optional, the steps the
run evaluated at are the record's; a wrong call is refused at that call, a refused setting at
construction, and a refusal the loop does not catch becomes one line and exit 2 (runrecord/one_line.py).
The world-2 torchrun run with rank-0-only evals is tests/process/test_byo_meet.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from runrecord import RunRecorder, RunRecordError
from runrecord.one_line import _OneLine, one_line_errors

CONFIG = {"seed": 7, "model": {"dim": 8}, "train": {"steps": 4, "eval_every": 2}}


def tiny() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(20, 8), nn.Linear(8, 20))


def train(rec: RunRecorder, model: nn.Module, eval_at: tuple[int, ...]) -> None:
    """Four steps of two rows, evals at `eval_at` (any steps)."""
    data = torch.arange(80).reshape(40, 2) % 20

    def val() -> float:
        with torch.no_grad():
            return F.cross_entropy(model(data[:4, :1]).flatten(0, 1), data[:4, 1]).item()

    if 0 in eval_at:
        rec.eval(0, val())
    for step in range(4):
        ids = [2 * step, 2 * step + 1]
        rec.samples(ids)
        loss = F.cross_entropy(model(data[ids, :1]).flatten(0, 1), data[ids, 1])
        loss.backward()
        rec.step(loss.item(), 1.0, 0.1)
        if step + 1 in eval_at:
            rec.eval(step + 1, val())


@pytest.mark.parametrize("eval_at", [(0, 3), (1,), (), (0, 1, 2, 3, 4)])
def test_evals_at_any_steps_are_recorded_as_they_came(tmp_path: Path, eval_at: tuple[int, ...]) -> None:
    model = tiny()
    rec = RunRecorder(CONFIG, tokens_per_step=2, model=model, run_dir=tmp_path / "run")
    train(rec, model, eval_at)
    record = rec.finish()
    assert record is not None and [e["step"] for e in record["eval"]] == list(eval_at)
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert [e["step"] for e in written["eval"]] == list(eval_at)
    assert written["final_val_loss"] == (written["eval"][-1]["loss"] if eval_at else None)
    assert written["initial_val_loss"] == (written["eval"][0]["loss"] if eval_at[:1] == (0,) else None)
    assert eval_at != (0, 2, 4)  # the negative control: the cadence's own steps are not what is tested


def test_eval_every_is_optional_and_eval_due_says_so_in_one_line(tmp_path: Path) -> None:
    config = {"seed": 7, "model": {}, "train": {"steps": 4}}
    rec = RunRecorder(config, tokens_per_step=2, run_dir=tmp_path / "run")
    with pytest.raises(RunRecordError) as e:
        rec.eval_due(0)
    assert str(e.value) == (
        "runrecord: eval_due: : config.train.eval_every is not set (rule: set it, or evaluate where your loop does)"
    )
    assert RunRecorder(CONFIG, tokens_per_step=2).eval_due(2)  # with it: the cadence, as before
    with pytest.raises(RunRecordError, match=r"config\.train\.eval_every: -1 is not an integer >= 0"):
        RunRecorder({**config, "train": {"steps": 4, "eval_every": -1}}, tokens_per_step=2)


def test_a_wrong_call_is_refused_at_that_call() -> None:
    rec = RunRecorder(CONFIG, tokens_per_step=2)
    with pytest.raises(RunRecordError, match=r"^runrecord: step: : step 0 has no samples \(rule: call rec"):
        rec.step(1.0, 1.0, 0.1)  # a step() without samples(): refused at step 0, not at finish()
    with pytest.raises(RunRecordError, match=r"^runrecord: eval: step: 3, after 0 recorded steps \(rule: "):
        rec.eval(3, 1.0)
    rec.eval(0, 1.0)
    with pytest.raises(RunRecordError, match="eval: step: 0 is recorded already"):
        rec.eval(0, 1.0)


def test_a_refused_setting_is_refused_at_construction_with_the_hook_in_place(monkeypatch) -> None:
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    model = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1)
    with pytest.raises(
        RunRecordError, match=r"^runrecord: RunRecorder: dropout: .* drawn inside torch's kernels"
    ):
        RunRecorder(CONFIG, tokens_per_step=2, model=model)
    assert isinstance(sys.excepthook, _OneLine)  # installed before the first check


def test_an_uncaught_refusal_is_one_line_and_exit_2(monkeypatch, capsys) -> None:
    seen = []
    monkeypatch.setattr(sys, "excepthook", lambda *a: seen.append(a))
    monkeypatch.delenv("XTRAIN_DEBUG", raising=False)
    one_line_errors()
    one_line_errors()  # once: not a hook around a hook
    hook = sys.excepthook
    assert isinstance(hook, _OneLine) and not isinstance(hook.previous, _OneLine)
    err = RunRecordError("RunRecorder", "dropout", "cannot be seeded", "dropout='off'")
    with pytest.raises(SystemExit) as e:
        hook(type(err), err, None)
    assert e.value.code == 2
    out = capsys.readouterr()
    assert out.err == "error: runrecord: RunRecorder: dropout: cannot be seeded (rule: dropout='off')\n"
    assert seen == []
    other = ValueError("a bug of the loop")  # the negative control: anything else is the old hook's
    hook(ValueError, other, None)
    assert seen == [(ValueError, other, None)] and capsys.readouterr().err == ""
