"""runrecord itself, one process (issues #34 and #36): every value checked at the call that receives
it, the run folder guarded and written as a staged folder, train mode recorded per step, dropout
masks seeded per sample (the same bits whichever rank or micro-batch holds a sample) or refused
where they cannot be, and switched off by the documented switch.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from contracts.errors import FileWriteError
from contracts.lockfile import Busy, WriteLock
from contracts.outputs import OutputRefused
from runrecord import RunRecorder, RunRecordError
from runrecord.dropout import SeededDropout

CONFIG = {"seed": 7, "model": {"dim": 8}, "train": {"steps": 4, "eval_every": 2}}


def tiny(p: float = 0.1) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(20, 8), nn.Dropout(p), nn.Linear(8, 20))


def train(rec: RunRecorder, model: nn.Module, eval_mode_after_eval: bool = False) -> None:
    """A plain loop: four steps of two rows, evals where eval_due says."""
    data = torch.arange(80).reshape(40, 2) % 20

    def val() -> float:
        model.eval()
        with torch.no_grad():
            loss = F.cross_entropy(model(data[:4, :1]).flatten(0, 1), data[:4, 1])
        if not eval_mode_after_eval:
            model.train()
        return loss.item()

    rec.eval(0, val())
    for step in range(4):
        ids = [2 * step, 2 * step + 1]
        rec.samples(ids)
        loss = F.cross_entropy(model(data[ids, :1]).flatten(0, 1), data[ids, 1])
        loss.backward()
        rec.step(loss.item(), 1.0, 0.1)
        if rec.eval_due(step + 1):
            rec.eval(step + 1, val())


def tree_md5(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


# ---- values refused where they arrive (issue #36 item 5) ---------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"tokens_per_step": -5}, "runrecord: RunRecorder: tokens_per_step: -5 is not an integer >= 1"),
        ({"tokens_per_step": 2.5}, "tokens_per_step: 2.5 is not an integer >= 1"),
        ({"launcher": "../../etc"}, "launcher: '../../etc' is not one of single, thread, proc"),
        ({"launcher": "proc"}, "launcher: 'proc' at world 1"),
        ({"precision": "fp8"}, "precision: 'fp8' is not one of fp32, bf16"),
        ({"dropout": "maybe"}, "dropout: 'maybe' is not one of seed, off"),
        ({"config": {**CONFIG, "train": {"steps": 0, "eval_every": 2}}}, "config.train.steps: 0 is not"),
        ({"config": {**CONFIG, "lr": float("nan")}}, "config: not plain JSON"),
        ({"config": {"model": {}, "train": {}}}, "config: missing seed"),
        ({"model": "a model"}, "model: a str, not a torch nn.Module"),
    ],
)
def test_bad_constructor_values_are_one_line_at_construction(kwargs: dict, says: str) -> None:
    args = {"config": CONFIG, "tokens_per_step": 4, **kwargs}
    with pytest.raises(RunRecordError) as e:
        RunRecorder(**args)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert isinstance(e.value, ValueError)  # runrecord 1.2 raised ValueError: still one


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda r: r.eval(-1, 1.0), "runrecord: eval: step: -1 is not an integer >= 0"),
        (lambda r: r.eval(3, 1.0), "eval: step: 3, after 0 recorded steps"),
        (lambda r: r.samples([1, -2]), "samples: indices: -2 is not a dataset index"),
        (lambda r: r.samples("0,1"), "samples: indices: a str is not a list"),
        (lambda r: r.step(1.0, 1.0, 0.1), "step: : step 0 has no samples"),
        (lambda r: (r.samples([0]), r.step(1.0, -1.0, 0.1)), "step: grad_norm: -1.0 is below 0"),
        (lambda r: (r.samples([0]), r.step(1.0, 1.0, float("inf"))), "step: lr: inf is not finite"),
        (lambda r: (r.samples([0]), r.step("1.0", 1.0, 0.1)), "step: loss: '1.0' is not a number"),
        (lambda r: r.eval_due(-3), "eval_due: done: -3 is not an integer >= 0"),
    ],
)
def test_bad_values_are_refused_at_the_call_that_receives_them(call, says: str) -> None:
    rec = RunRecorder(CONFIG, tokens_per_step=4)
    with pytest.raises(RunRecordError) as e:
        call(rec)
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_nan_loss_is_recorded_for_the_gates_to_judge() -> None:
    rec = RunRecorder(CONFIG, tokens_per_step=4)
    rec.samples([0])
    rec.step(float("nan"), float("nan"), 0.1)  # a diverged run is a verdict (finite), not bad input
    assert len(rec.train_loss) == 1


def test_a_step_past_the_run_and_an_incomplete_run_are_refused(tmp_path: Path) -> None:
    model = tiny()
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model)
    rec.eval(0, 1.0)
    with pytest.raises(RunRecordError, match=r"finish: : 0 steps recorded, train\.steps 4"):
        rec.finish(model, tmp_path / "run")
    train(RunRecorder(CONFIG, tokens_per_step=4, model=tiny(), run_dir=tmp_path / "a"), tiny())
    full = RunRecorder(CONFIG, tokens_per_step=4)
    for _ in range(4):
        full.samples([0])
        full.step(1.0, 1.0, 0.1)
    with pytest.raises(RunRecordError, match="samples: indices: after the last step"):
        full.samples([1])
    record = full.finish(model, tmp_path / "b")  # no eval: the loop's own choice, not refused (issue #54)
    assert record is not None and record["eval"] == [] and (tmp_path / "b" / "metrics.json").is_file()


# ---- the run folder: guarded, staged (issue #36 items 2, 4, 5) ---------------------------------------


def foreign_folders(root: Path) -> dict[str, Path]:
    xtrain_run = root / "runs" / "single"  # our trainer's run: its marker says kind "run"
    xtrain_run.mkdir(parents=True)
    (xtrain_run / ".xtrain-output.json").write_text('{"kind": "run"}')
    (xtrain_run / "metrics.json").write_text('{"steps": 160}')
    export = root / "exports" / "fresh"
    export.mkdir(parents=True)
    (export / "model.safetensors").write_bytes(b"weights")
    manifest = {"format": "xtrain-export-manifest/1", "files": {"model.safetensors": {"md5": "x"}}}
    (export / "manifest.json").write_text(json.dumps(manifest))
    theirs = root / "theirs"
    theirs.mkdir()
    (theirs / "summary.json").write_text('{"mine": true}')
    link = root / "link"
    link.symlink_to(theirs)
    return {
        "the working directory": root,
        "runs/single": xtrain_run,
        "exports/fresh": export,
        "theirs": theirs,
        "link": link,
    }


@pytest.mark.parametrize(
    "target", ["the working directory", "runs/single", "exports/fresh", "theirs", "link"]
)
@pytest.mark.parametrize("when", ["construction", "finish"])
def test_a_folder_runrecord_did_not_make_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, when: str
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = foreign_folders(tmp_path)[target]
    path = "." if target == "the working directory" else folder
    before = tree_md5(tmp_path)
    model = tiny()
    with pytest.raises(OutputRefused) as e:
        if when == "construction":
            RunRecorder(CONFIG, tokens_per_step=4, model=model, run_dir=path)
        else:
            rec = RunRecorder(CONFIG, tokens_per_step=4, model=model)
            train(rec, model)
            rec.finish(model, path)
    assert "refusing to write the run record here" in str(e.value) and "\n" not in str(e.value)
    assert tree_md5(tmp_path) == before  # nothing written, nothing left behind
    assert sorted(os.listdir(tmp_path)) == sorted(["runs", "exports", "theirs", "link"])


def test_an_earlier_record_of_its_own_is_replaced_whole(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "proc"
    for seed in (7, 8):  # the second run replaces the first
        model = tiny()
        rec = RunRecorder({**CONFIG, "seed": seed}, tokens_per_step=4, model=model, run_dir=run)
        train(rec, model)
        rec.finish()
    m = json.loads((run / "metrics.json").read_text())
    assert m["config"]["seed"] == 8 and (run / "checkpoints" / "latest").read_text() == "step_000004\n"
    assert json.loads((run / ".xtrain-output.json").read_text()) == {"kind": "run record"}
    assert [p.name for p in tmp_path.joinpath("runs").iterdir()] == ["proc"]  # no staging left


def test_a_failed_write_leaves_the_previous_record_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    model = tiny()
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model, run_dir=run)
    train(rec, model)
    rec.finish()
    before = tree_md5(run)

    def full_disk(*_a, **_k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("runrecord.record_folder.write_final_checkpoint", full_disk)
    model = tiny()
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model, run_dir=run)
    train(rec, model)
    with pytest.raises(FileWriteError, match="run: cannot write: No space left on device"):
        rec.finish()
    assert tree_md5(run) == before and sorted(os.listdir(tmp_path)) == ["run"]


# ---- train mode and dropout (issue #34 items 1 and 2) -------------------------------------------------


def test_train_mode_is_recorded_per_step(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    records = {}
    for bug in (False, True):
        model = tiny()
        rec = RunRecorder(CONFIG, tokens_per_step=4, model=model, run_dir=tmp_path / str(bug))
        train(rec, model, eval_mode_after_eval=bug)
        records[bug] = rec.finish()
    assert records[False]["eval_mode_steps"] == [] and records[True]["eval_mode_steps"] == [0, 1, 2, 3]
    warned = [x for x in capfd.readouterr().err.splitlines() if "model in eval mode at training step 0" in x]
    assert len(warned) == 1  # once per run and rank
    # a frozen module may stay in eval mode: named in `frozen`, it is not a T21 step
    for frozen, want in (((), [0, 1, 2, 3]), (("0",), [])):
        model = FrozenEmbedding(nn.Embedding(20, 8), nn.Dropout(0.1), nn.Linear(8, 20))
        rec = RunRecorder(
            CONFIG, tokens_per_step=4, model=model, frozen=frozen, run_dir=tmp_path / f"f{frozen}"
        )
        train(rec, model)
        assert rec.finish()["eval_mode_steps"] == want


class FrozenEmbedding(nn.Sequential):
    """A model whose embedding stays in eval mode on purpose (a frozen encoder, frozen batch norm)."""

    def train(self, mode: bool = True) -> FrozenEmbedding:
        super().train(mode)
        self[0].eval()
        return self


def test_without_the_model_train_mode_and_masks_are_not_recorded(tmp_path: Path) -> None:
    model = tiny()
    rec = RunRecorder(CONFIG, tokens_per_step=4, run_dir=tmp_path / "r")
    train(rec, model)
    m = rec.finish(model)
    assert "eval_mode_steps" not in m and "dropout" not in m  # absent: not recorded, never "none"


def masks(rows: list[int], batches: list[list[int]]) -> tuple[torch.Tensor, int]:
    """The dropout output for `rows` when fed as `batches` (a rank's shard or micro-batches), and the
    fingerprint of the masks drawn, summed."""
    model = nn.Sequential(nn.Identity(), nn.Dropout(0.5))
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model)
    out, drawn = {}, 0
    for batch in batches:
        rec.samples(batch)
        y = model(torch.ones(len(batch), 6))
        out.update({row: y[i] for i, row in enumerate(batch)})
        drawn += rec._masks.take()  # type: ignore[union-attr]
    return torch.stack([out[r] for r in rows]), drawn


def test_a_sample_draws_the_same_mask_whichever_batch_holds_it() -> None:
    rows = [5, 9, 2, 7]
    whole, drawn = masks(rows, [rows])
    for split in ([rows[0::2], rows[1::2]], [[5], [9], [2], [7]], [rows[2:], rows[:2]]):
        got, got_drawn = masks(rows, split)
        assert torch.equal(got, whole) and got_drawn == drawn
    assert 0 < (whole == 0).sum() < whole.numel()  # p = 0.5: some dropped, some kept


def test_a_sample_held_twice_counts_twice_and_a_replay_once() -> None:
    model = nn.Sequential(nn.Dropout(0.5))
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model)
    rec.samples([3, 3])
    y = model(torch.ones(2, 4))
    assert torch.equal(y[0], y[1])  # one sample, one mask
    twice = rec._masks.drawn  # type: ignore[union-attr]
    model(torch.ones(2, 4))  # activation recompute replays the forward: the same masks, not counted again
    assert rec._masks.drawn == twice  # type: ignore[union-attr]
    rec.samples([3])
    model(torch.ones(1, 4))
    assert rec._masks.drawn == twice + twice // 2  # type: ignore[union-attr]


def test_masks_change_with_the_step_the_seed_and_the_site() -> None:
    from runrecord.dropout import mask_seed

    seeds = {mask_seed(s, t, r, k) for s in (1, 2) for t in (0, 1) for r in (0, 1) for k in (0, 1)}
    assert len(seeds) == 16


def test_dropout_it_cannot_seed_is_refused_naming_it_and_off_switches_it() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
    with pytest.raises(RunRecordError) as e:
        RunRecorder(CONFIG, tokens_per_step=4, model=layer)
    assert "self_attn.dropout (MultiheadAttention) is dropout 0.1 drawn inside torch's kernels" in str(
        e.value
    )
    assert "dropout='off'" in str(e.value)
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=layer, dropout="off")
    assert rec._dropout == {"masks": "off", "modules": 4, "p": [0.1]}
    assert layer.self_attn.dropout == 0.0 and all(
        m.p == 0.0 for m in layer.modules() if isinstance(m, nn.Dropout)
    )
    for other in (nn.Dropout2d(0.2), nn.AlphaDropout(0.2)):
        with pytest.raises(RunRecordError, match="drawn inside torch's kernels"):
            RunRecorder(CONFIG, tokens_per_step=4, model=nn.Sequential(other))


def test_seeded_dropout_replaces_nn_dropout_and_keeps_its_p() -> None:
    model = tiny(0.25)
    shared = nn.Dropout(0.3)
    model.append(shared)
    model.append(nn.Sequential(shared))  # one module in two places keeps one site
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model)
    seeded = [m for m in model.modules() if isinstance(m, SeededDropout)]
    assert rec._dropout == {"masks": "seeded", "modules": 2, "p": [0.25, 0.3]}
    assert model[3] is model[4][0] and {m.site for m in seeded} == {0, 1}
    assert all(isinstance(m, nn.Dropout) for m in seeded)  # isinstance checks of the user's code still hold
    no_dropout = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.0))
    assert RunRecorder(CONFIG, tokens_per_step=4, model=no_dropout)._dropout["masks"] == "none"


def test_a_forward_without_its_samples_is_one_line() -> None:
    model = nn.Sequential(nn.Dropout(0.5))
    RunRecorder(CONFIG, tokens_per_step=4, model=model)
    with pytest.raises(RunRecordError, match="a batch of 3 rows, but samples\\(\\) named 0 for this forward"):
        model(torch.ones(3, 2))


def test_a_record_contradicting_what_it_says_it_saw_is_refused(tmp_path: Path) -> None:
    from gates.reading import expect

    model = tiny()
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model, run_dir=tmp_path / "r")
    train(rec, model)
    m = rec.finish()
    assert expect.run_problems(None, "single", m) == []  # the control
    late = {**m, "eval_mode_steps": [1, 9]}
    assert expect.run_problems(None, "single", late) == [
        "runs/single/metrics.json: eval_mode_steps [9] past the run's 4 steps"
    ]
    none = {**m, "dropout": {"masks": "none", "modules": 0, "p": []}}
    assert expect.run_problems(None, "single", none) == [
        "runs/single/metrics.json: dropout.masks is 'none' but masks were drawn at step 0"
    ]


# ---- one writer per run folder, and a folder it can write (issue #51 item 4) ---------------------------


def test_a_second_recorder_into_the_same_folder_is_refused_at_construction(tmp_path: Path) -> None:
    """Two recorders finishing into one folder both said "finished"; only the last record survived."""
    run = tmp_path / "runs" / "proc"
    model = tiny()
    first = RunRecorder(CONFIG, tokens_per_step=4, model=model, run_dir=run)
    lock = tmp_path / "runs" / ".proc.lock"
    assert lock.read_text() == f"{os.getpid()} runrecord\n"
    with pytest.raises(Busy) as e:
        RunRecorder(CONFIG, tokens_per_step=4, model=tiny(), run_dir=run)
    assert str(e.value).startswith(f"{run}: being written by pid {os.getpid()} (runrecord) (lock ")
    assert "\n" not in str(e.value) and e.value.exit_code == 2
    train(first, model)
    first.finish()
    assert not lock.exists() and (run / "metrics.json").exists()
    second = RunRecorder({**CONFIG, "seed": 8}, tokens_per_step=4, model=tiny(), run_dir=run)  # free again
    del second
    assert not lock.exists()  # a recorder dropped without finish() lets go of its folder


def test_a_folder_named_only_at_finish_is_locked_for_the_write(tmp_path: Path) -> None:
    run = tmp_path / "run"
    model = tiny()
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model)
    train(rec, model)
    other = RunRecorder(CONFIG, tokens_per_step=4, model=tiny(), run_dir=run)
    with pytest.raises(Busy, match="being written by pid"):
        rec.finish(model, run)
    del other
    rec.finish(model, run)
    assert json.loads((run / "metrics.json").read_text())["config"] == CONFIG
    assert sorted(os.listdir(tmp_path)) == ["run"]


HOLDER = """
import sys, time
import torch
from runrecord import RunRecorder
rec = RunRecorder({"seed": 7, "model": {}, "train": {"steps": 4, "eval_every": 2}}, tokens_per_step=4,
                  model=torch.nn.Linear(2, 2), run_dir=sys.argv[1])
print("recording", flush=True)
time.sleep(600)
"""


def test_another_process_recording_into_the_folder_is_named(tmp_path: Path) -> None:
    from conftest import REPO, code_first

    run = tmp_path / "runs" / "single"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run)], cwd=REPO, env=code_first(REPO), stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "recording\n"
        with pytest.raises(Busy) as e:
            RunRecorder(CONFIG, tokens_per_step=4, model=tiny(), run_dir=run)
        assert str(e.value).startswith(f"{run}: being written by pid {child.pid} (runrecord)")
    finally:
        child.kill()
        child.wait(30)
    RunRecorder(CONFIG, tokens_per_step=4, model=tiny(), run_dir=run)  # its death freed the folder


@pytest.fixture()
def immutable(tmp_path: Path):
    """A folder nobody, root included, can write into (chattr +i: permission bits do not stop root)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


@pytest.mark.parametrize("where", ["parent", "run folder"])
def test_an_unwritable_place_is_one_line_at_construction(immutable: Path, where: str) -> None:
    """main: construction passed, the whole loop ran, and finish() lost the record."""
    if where == "parent":
        run, named = immutable / "run", immutable / ".run.lock"
    else:
        run, named = immutable, immutable
        immutable.parent.joinpath("ro.ok").write_text("")  # the parent is writable: the folder is not
    with pytest.raises(RunRecordError) as e:
        RunRecorder(CONFIG, tokens_per_step=4, model=tiny(), run_dir=run)
    assert str(e.value) == (
        f"runrecord: RunRecorder: run_dir: {named}: cannot write: Operation not permitted (rule: a folder "
        f"this process can write ({run}): checked before training, not at finish())"
    )
    assert sorted(os.listdir(immutable)) == [] and not (immutable.parent / ".ro.lock").exists()


def test_negative_control_without_the_check_the_record_is_lost_at_finish(
    immutable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main's recorder (no lock, no probe): the loop runs to the end and finish() fails."""
    monkeypatch.setattr("runrecord.recorder.hold", lambda run_dir: WriteLock(run_dir, "never taken"))
    model = tiny()
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=model, run_dir=immutable / "run")
    train(rec, model)
    with pytest.raises(FileWriteError, match="Operation not permitted"):
        rec.finish()


def test_our_launcher_and_a_recorder_share_the_run_folders_lock(tmp_path: Path) -> None:
    from xtrain.core import rundir

    run = tmp_path / "runs" / "proc"
    with rundir.locked(run), pytest.raises(Busy, match=r"\(python -m pipeline\.train\)"):
        RunRecorder(CONFIG, tokens_per_step=4, model=tiny(), run_dir=run)
    rec = RunRecorder(CONFIG, tokens_per_step=4, model=tiny(), run_dir=run)
    with pytest.raises(Busy, match=r"\(runrecord\)"), rundir.locked(run):
        pass
    del rec
    assert os.listdir(tmp_path / "runs") == []
