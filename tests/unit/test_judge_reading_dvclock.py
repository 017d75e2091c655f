"""gates/reading/dvclock.py under mutation (docs/judge-mutation.md): what tests/process/test_judge_dvclock.py
leaves open. An out whose path ends in a letter DVC strips nothing from still holds its files, and
DVC's cached `.dir` listing is read up to LISTING_BYTES: one byte more and the folder is named instead of
its files (a hostile cache cannot make the check read without bound).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.reading import dvclock
from gates.reading.dvclock import DvcLock, dir_listing, dir_md5

A_MD5, B_MD5 = "60b725f10c9c85c70d97880dfe8191b3", "3b5d5c3712955042212316173ccf37be"  # b"a\n", b"b\n"


def test_an_out_is_matched_by_its_exact_path_then_as_a_folder() -> None:
    lock = DvcLock(Path("."), {"s": {"outs": [{"path": "outX", "md5": "m1"}, {"path": "d//", "md5": "m2"}]}})
    assert lock.out("outX/f.txt") == ("outX", "m1") and lock.out("outX") == ("outX", "m1")
    assert lock.out("out/f.txt") is None and lock.out("outXf") is None
    assert lock.out("d/a") == ("d//", "m2") and lock.out("d") is None


@pytest.mark.parametrize("spare", [0, -1])
def test_a_cached_listing_over_the_limit_names_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spare: int
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("b\n")
    recorded = "ab" + "0" * 30 + ".dir"
    obj = tmp_path / ".dvc" / "cache" / "files" / "md5" / "ab" / recorded[2:]
    obj.parent.mkdir(parents=True)
    obj.write_text(json.dumps([{"md5": A_MD5, "relpath": "a.txt"}]))
    monkeypatch.setattr(dvclock, "LISTING_BYTES", obj.stat().st_size + spare)  # 64 MiB, scaled down
    lock = DvcLock(tmp_path, {"s": {"outs": [{"path": "d", "md5": recorded}]}})
    now = dir_md5(dir_listing(tmp_path / "d"))
    assert lock.folder_changes("d", recorded) == (
        [f"d/a.txt: md5 {B_MD5}, dvc.lock recorded {A_MD5}"]
        if spare == 0
        else [f"d: folder hash {now}, dvc.lock recorded {recorded}"]
    )
