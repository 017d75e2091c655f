"""gates/reading/dvcstatus.py under mutation (docs/judge-mutation.md): what tests/unit/test_judge_dvcstatus.py
leaves open. A params file that is not a mapping holds no key (not even "0"); a missing params
file does not hide the next file's changes; an out's change names its stage.
"""

from __future__ import annotations

from pathlib import Path

from gates.reading.dvclock import DvcLock
from gates.reading.dvcstatus import Change, ParamsFiles, param_changes, stage_changes
from gates.reading.dvcyaml import Out, StageDef


def test_a_params_file_that_is_not_a_mapping_holds_no_key() -> None:
    assert param_changes("s", "p.yaml", ("0",), {"0": 5}, [5]) == [
        Change("s", "param", "p.yaml 0", "deleted", "p.yaml 0 is absent, dvc.lock recorded 5")
    ]
    assert param_changes("s", "p.yaml", (), {"a": 1}, None) == [
        Change("s", "param", "p.yaml a", "deleted", "p.yaml a is absent, dvc.lock recorded 1")
    ]


def test_every_params_file_and_out_is_looked_at_and_named_with_its_stage(tmp_path: Path) -> None:
    (tmp_path / "p2.yaml").write_text("lr: 2\n")
    d = StageDef(cmd="c", params=(("gone.yaml", ("lr",)), ("p2.yaml", ("lr",))), outs=(Out("o.txt"),))
    body = {"cmd": "c", "params": {"gone.yaml": {"lr": 1}, "p2.yaml": {"lr": 1}}, "outs": []}
    lock = DvcLock(tmp_path, {"train": body}, set(), {}, {"train": d})
    assert stage_changes(lock, "train", d, ParamsFiles(tmp_path)) == [
        Change("train", "param", "gone.yaml", "deleted", "gone.yaml is missing"),
        Change("train", "param", "p2.yaml lr", "modified", "p2.yaml lr is 2, dvc.lock recorded 1"),
        Change("train", "out", "o.txt", "deleted", "out o.txt md5 (missing), dvc.lock recorded None"),
    ]
