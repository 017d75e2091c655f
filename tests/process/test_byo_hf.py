"""runrecord's transformers.Trainer adapter with dropout (issue #34): a user's tiny GPT-2 with residual
and embedding dropout 0.1 (tests/byo_user_trainer.py), one device and real torchrun (CPU, gloo,
world 2), matches under the DDP gate because the callback seeds the masks per sample; what the
adapter cannot seed (GPT-2's attention dropout runs inside SDPA) and an eval set carrying
sample_index are refused in one line before training goes on; an eval set that does not divide by
the world draws a warning.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TinyData, code_first
from gates.judges import ddp
from gates.judges.training import with_train_mode

pytestmark = [pytest.mark.ddp, pytest.mark.xdist_group("ddp")]

SCRIPT = Path(__file__).parents[1] / "byo_user_trainer.py"
LOSS_MATCH = {"max_rel": 1e-3, "cpu": {"first_step_rtol": 1e-5, "prefix_steps": 64, "final_val_atol": 0.01}}


def run(data: TinyData, run_dir: Path, world: int, *extra: str) -> subprocess.CompletedProcess:
    args = [str(SCRIPT), "--tokens", str(data.tokens), "--vocab-size", str(data.vocab_size)]
    start = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}"]
    cmd = [*(start if world > 1 else [sys.executable]), *args, "--run-dir", str(run_dir), *extra]
    env = {**code_first(REPO), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=run_dir.parent, timeout=600, env=env)


def metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def test_a_trainer_with_dropout_matches_one_device_under_torchrun(
    tiny_data: TinyData, tmp_path: Path
) -> None:
    for name, world in (("single", 1), ("proc", 2)):
        proc = run(tiny_data, tmp_path / name, world)
        assert proc.returncode == 0, proc.stderr[-3000:]
    single, got = metrics(tmp_path / "single"), metrics(tmp_path / "proc")
    o = with_train_mode(ddp.equivalence(single, got, "proc", LOSS_MATCH), [("single", single), ("proc", got)])
    print(o.message)
    assert o.status == "pass" and o.not_applied == {}, o.message
    assert single["dropout"] == {
        "masks": "seeded",
        "modules": 5,
        "p": [0.1],
    }  # attn_dropout too (p 0.0: none)
    assert all(single["samples"]["dropout_hash_sum"]) and got["samples"] == single["samples"]
    assert single["eval_mode_steps"] == got["eval_mode_steps"] == []


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (
            ("--attn-pdrop", "0.1"),
            "runrecord: RunRecorder: dropout: config.attn_pdrop (attention dropout inside the attention "
            "kernel) is dropout 0.1 drawn inside torch's kernels",
        ),
        (
            ("--indexed-eval",),
            "runrecord: RecordingCallback: eval_dataset: its examples carry 'sample_index'",
        ),
    ],
)
def test_what_the_adapter_cannot_record_is_refused_before_training(
    tiny_data: TinyData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: tuple[str, ...], says: str
) -> None:
    import byo_user_trainer  # in this process: the refusal comes before any training step

    from runrecord import RunRecordError

    args = ["--tokens", str(tiny_data.tokens), "--vocab-size", str(tiny_data.vocab_size)]
    monkeypatch.setattr(sys, "argv", ["byo_user_trainer.py", *args, "--run-dir", str(tmp_path / "r"), *extra])
    with pytest.raises(RunRecordError) as e:
        byo_user_trainer.main()
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert not (tmp_path / "r").exists()  # nothing recorded, nothing half-written


def test_an_eval_set_that_does_not_divide_by_the_world_is_warned_about(capfd: pytest.CaptureFixture) -> None:
    from runrecord import RunRecorder
    from runrecord.hf import IndexedCollator, RecordingCallback

    rec = RunRecorder({"seed": 0, "model": {}, "train": {"steps": 1, "eval_every": 1}}, tokens_per_step=1)
    rec.world = 2  # the adapter reads the recorder's world (torchrun world 2)
    callback = RecordingCallback(rec, IndexedCollator(lambda f: f))

    class Loader:
        dataset = [{"input_ids": [1]}] * 9

    callback.on_prediction_step(None, None, None, eval_dataloader=Loader())
    err = capfd.readouterr().err
    assert "the eval set has 9 examples, not a multiple of world 2" in err, err
    Loader.dataset = [{"input_ids": [1]}] * 8
    fresh = RecordingCallback(rec, IndexedCollator(lambda f: f))
    fresh.on_prediction_step(None, None, None, eval_dataloader=Loader())
    assert "eval set" not in capfd.readouterr().err  # the control: 8 divides by 2
