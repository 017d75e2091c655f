"""gates/reading/dvclock.py under mutation (docs/judge-mutation.md): dvc.lock and dvc.yaml as the gates read them.

Which stages ran, which the pipeline defines, which git HEAD had, the md5 of every out (a folder's as
DVC's `.dir` hash) and why a file differs from what was recorded: every artifact check rests on
these, so each is pinned here in-process, torch- and DVC-free.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from contracts.validate import ValidationError
from contracts.yamlfile import load_pipeline_text
from gates.reading.dvclock import (
    CHUNK,
    DvcLock,
    LockError,
    _committed_stages,
    _stages_of,
    cache_dir,
    dir_listing,
    dir_md5,
    istext,
    md5_dos2unix,
)
from gates.reading.dvcyaml import DvcYamlError, pipeline_stages

A_MD5, B_MD5 = "60b725f10c9c85c70d97880dfe8191b3", "3b5d5c3712955042212316173ccf37be"  # b"a\n", b"b\n"
# dvc_data's Tree over the two files below: Tree.add(...); Tree.digest(); its hash_info.value
DIR_MD5 = "849835d274483dc683eb416d6e4f887d.dir"


def folder(root: Path) -> Path:
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "a.txt").write_text("a\n")
    (root / "d" / "sub" / "b.txt").write_text("b\n")
    return root / "d"


def test_the_dir_hash_is_dvcs() -> None:
    listing = [{"md5": A_MD5, "relpath": "a.txt"}, {"md5": B_MD5, "relpath": "sub/b.txt"}]
    assert dir_md5(listing) == DIR_MD5


def test_dir_listing_lists_every_file_posix_and_sorted(tmp_path: Path) -> None:
    d = folder(tmp_path)
    (tmp_path / "d" / "0.txt").write_text("a\n")
    assert dir_listing(d) == [
        {"md5": A_MD5, "relpath": "0.txt"},
        {"md5": A_MD5, "relpath": "a.txt"},
        {"md5": B_MD5, "relpath": "sub/b.txt"},
    ]


def test_dir_listing_through_a_lock_hashes_each_file_once(tmp_path: Path) -> None:
    d = folder(tmp_path)
    lock = DvcLock(tmp_path, {})
    assert dir_listing(d, lock) == dir_listing(d)
    assert lock._md5 == {"d/a.txt": A_MD5, "d/sub/b.txt": B_MD5}
    lock._md5["d/a.txt"] = "cached"
    assert lock.md5("d/a.txt") == "cached" and dir_listing(d, lock)[0]["md5"] == "cached"


RULE = "(rule: DVC's schema of this file; dvc status refuses it too)"


def test_stages_of_reads_a_lock_file_and_refuses_anything_else() -> None:
    """DVC's lock file schema (gates/reading/dvcschema.py), one line naming DVC's reason: issue #51's
    `probes: deps: x` gave an AttributeError traceback and exit 1."""
    text = "schema: '2.0'\nstages:\n  a: {cmd: x}\n"
    assert _stages_of(load_pipeline_text(text, "f"), "f") == {"a": {"cmd": "x"}}
    assert _stages_of({"schema": "2.0"}) == {} and _stages_of({"schema": "2.0", "stages": {}}) == {}
    for data, reason in (
        (None, "required key not provided, in schema"),  # an empty file
        ({"stages": {"a": {"cmd": "x"}}}, "required key not provided, in schema"),
        ([1], "expected a dictionary"),
        ("x", "expected a dictionary"),
        ({"schema": "1.0"}, "invalid schema version, in schema"),
        ({"schema": 2.0}, "invalid schema version, in schema"),
        ({"schema": "2.0", "other": 1}, "extra keys not allowed, in other"),
        ({"schema": "2.0", "stages": None}, "expected a dictionary, in stages"),
        ({"schema": "2.0", "stages": [1]}, "expected a dictionary, in stages"),
        ({"schema": "2.0", "stages": {"a": None}}, "expected a dictionary, in stages -> a"),
        ({"schema": "2.0", "stages": {"a": {"cmd": "x"}, "b": 3}}, "expected a dictionary, in stages -> b"),
        ({"schema": "2.0", "stages": {"a": {}}}, "required key not provided, in stages -> a -> cmd"),
        ({"schema": "2.0", "stages": {"probes": {"cmd": "x", "deps": "x"}}}, "expected a list, in stages -> probes -> deps"),
        ({"schema": "2.0", "stages": {"a": {"cmd": "x", "outs": [{"md5": "mm1"}]}}},
         "required key not provided, in stages -> a -> outs -> 0 -> path"),
    ):  # fmt: skip
        with pytest.raises(LockError) as e:
            _stages_of(data, "where/dvc.lock")
        assert str(e.value) == f"where/dvc.lock: {reason} {RULE}"
    with pytest.raises(LockError, match=r"^dvc.lock: expected a dictionary, in stages "):
        _stages_of({"schema": "2.0", "stages": 3})


DVC_YAML = """
stages:
  train:
    cmd: x
    outs: [runs/single, {runs/extra.json: {cache: false}}]
    metrics: [{runs/metrics.json: {cache: false}}]
    plots: [runs/loss.csv]
  world:
    foreach: [thread, proc]
    do:
      cmd: y
      outs:
        - runs/${item}
  keyed:
    foreach: {a: one, b: two}
    do:
      cmd: z
      outs:
        - out/${key}/${item}.txt
  bare: {cmd: w}
"""


def outs_of(root: Path) -> dict[str, list[str]]:
    return {name: d.out_paths for name, d in pipeline_stages(root).items()}


def test_pipeline_stages_expands_foreach_and_lists_every_out(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    assert outs_of(tmp_path) == {
        "train": ["runs/single", "runs/extra.json", "runs/metrics.json", "runs/loss.csv"],
        "world@thread": ["runs/thread"],
        "world@proc": ["runs/proc"],
        "keyed@a": ["out/a/one.txt"],
        "keyed@b": ["out/b/two.txt"],
        "bare": [],
    }
    (tmp_path / "dvc.yaml").write_text(DVC_YAML + "  odd: 3\n")
    with pytest.raises(DvcYamlError) as e:
        pipeline_stages(tmp_path)
    assert str(e.value) == f"{tmp_path / 'dvc.yaml'}: expected a dictionary, in stages -> odd {RULE}"


def test_pipeline_stages_needs_a_readable_dvc_yaml(tmp_path: Path) -> None:
    path = tmp_path / "dvc.yaml"
    with pytest.raises(DvcYamlError) as e:
        pipeline_stages(tmp_path)
    assert str(e.value) == f"{path}: missing: the gates cannot tell which stages the pipeline has"
    path.write_text("stages: [\n")
    with pytest.raises(DvcYamlError, match=rf"^{path}: line 2: not valid YAML: "):
        pipeline_stages(tmp_path)
    path.write_text("")
    assert pipeline_stages(tmp_path) == {}
    path.write_text("- a\n")  # a list is no pipeline: DVC's schema refuses it
    with pytest.raises(DvcYamlError) as e:
        pipeline_stages(tmp_path)
    assert str(e.value) == f"{path}: expected a dictionary {RULE}"
    path.write_text("stages: {}\n")  # DvcLock.read turns each into a LockError (exit 2)
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    assert DvcLock.read(tmp_path).pipeline == {}
    path.write_text("- a\n")
    with pytest.raises(LockError, match=rf"^{path}: expected a dictionary"):
        DvcLock.read(tmp_path)


def test_cache_dir_follows_dvc_config_and_config_local(tmp_path: Path) -> None:
    assert cache_dir(tmp_path) == tmp_path / ".dvc" / "cache"
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text("[cache]\n    dir = ../elsewhere\n")
    assert cache_dir(tmp_path) == tmp_path / ".dvc" / "../elsewhere"
    (tmp_path / ".dvc" / "config.local").write_text("[cache]\n    dir = /abs/cache\n")
    assert cache_dir(tmp_path) == Path("/abs/cache")


def lock_of(root: Path, stages: dict, pipeline: dict | None = None, committed: set | None = None) -> DvcLock:
    return DvcLock(root, stages, committed or set(), pipeline or {})


def test_stage_states() -> None:
    lock = lock_of(Path("."), {"ran": {}}, {"ran": [], "defined": []}, {"ran", "gone"})
    assert lock.ran("ran") and not lock.ran("defined") and not lock.ran("gone")
    assert [s for s in ("ran", "defined", "gone", "other") if lock.in_pipeline(s)] == [
        "ran",
        "defined",
        "gone",
    ]
    assert [s for s in ("ran", "defined", "gone", "other") if lock.removed(s)] == ["gone"]
    assert [s for s in ("ran", "defined", "gone", "other") if lock.unrecorded(s)] == ["defined"]
    assert lock_of(Path("."), {"only_lock": {}}).in_pipeline("only_lock")


def test_pipeline_out_and_out_find_the_out_holding_a_path() -> None:
    lock = lock_of(
        Path("."),
        {
            "train": {"outs": [{"path": "runs/single", "md5": "m1"}, {"path": "f.json", "md5": "m2"}]},
            "e": None,
        },
        {"train": ["runs/single", "runs/x/"], "e": []},
    )
    assert lock.pipeline_out("runs/single") == ("train", "runs/single")
    assert lock.pipeline_out("runs/single/metrics.json") == ("train", "runs/single")
    assert lock.pipeline_out("runs/x/y") == ("train", "runs/x/")
    assert lock.pipeline_out("runs/single2/metrics.json") is None
    assert lock.out("runs/single/a/b") == ("runs/single", "m1")
    assert lock.out("f.json") == ("f.json", "m2")
    assert lock.out("f.jsonx") is None and lock.out("runs/singlex") is None


def test_changed_says_why_a_file_out_differs(tmp_path: Path) -> None:
    lock = lock_of(tmp_path, {"s": {"outs": [{"path": "f.txt", "hash": "md5", "md5": A_MD5}]}})
    assert lock.changed("f.txt", A_MD5) is None
    assert lock.changed("f.txt", B_MD5) == f"f.txt: md5 {B_MD5}, dvc.lock recorded {A_MD5}"
    assert lock.changed("other.txt", B_MD5) is None  # not an out: nothing recorded to differ from


def test_a_folder_out_differs_by_its_dir_hash_and_names_the_file_when_cached(tmp_path: Path) -> None:
    folder(tmp_path)
    lock = lock_of(tmp_path, {"s": {"outs": [{"path": "d", "md5": DIR_MD5}]}})
    assert lock.changed("d/a.txt", "ignored") is None and lock.folder_changes("d", DIR_MD5) == []
    (tmp_path / "d" / "a.txt").write_text("b\n")
    (tmp_path / "d" / "new.txt").write_text("a\n")
    now = dir_md5(dir_listing(tmp_path / "d"))
    stale = lock_of(tmp_path, {"s": {"outs": [{"path": "d", "md5": DIR_MD5}]}})
    assert stale.changed("d/a.txt", "x") == f"d: folder hash {now}, dvc.lock recorded {DIR_MD5}"
    obj = tmp_path / ".dvc" / "cache" / "files" / "md5" / DIR_MD5[:2] / DIR_MD5[2:]
    obj.parent.mkdir(parents=True)
    obj.write_text(json.dumps([{"md5": A_MD5, "relpath": "a.txt"}, {"md5": B_MD5, "relpath": "sub/b.txt"}]))
    assert stale.changed("d/a.txt", "x") == (
        f"d/a.txt: md5 {B_MD5}, dvc.lock recorded {A_MD5}, d/new.txt: md5 {A_MD5}, dvc.lock recorded (absent)"
    )
    (tmp_path / "d" / "sub" / "b.txt").unlink()
    gone = lock_of(tmp_path, {"s": {"outs": [{"path": "d", "md5": DIR_MD5}]}})
    assert f"d/sub/b.txt: md5 (absent), dvc.lock recorded {B_MD5}" in gone.folder_changes("d", DIR_MD5)
    obj.write_text("not json")
    assert gone.folder_changes("d", DIR_MD5) == [
        f"d: folder hash {dir_md5(dir_listing(tmp_path / 'd'))}, dvc.lock recorded {DIR_MD5}"
    ]


def test_read_needs_dvc_lock_and_reads_all_three_sources(tmp_path: Path) -> None:
    with pytest.raises(LockError, match=r"dvc.lock: missing: without it no artifact can be checked"):
        DvcLock.read(tmp_path)
    (tmp_path / "dvc.yaml").write_text(DVC_YAML)
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"train": {"cmd": "x"}}}))
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    assert DvcLock.read(tmp_path).committed == set()  # no HEAD yet
    subprocess.run([*git, "add", "dvc.lock"], check=True)
    subprocess.run([*git, "commit", "-qm", "lock"], check=True)
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    lock = DvcLock.read(tmp_path)
    assert (lock.root, lock.stages, lock.committed) == (tmp_path, {}, {"train"})
    assert lock.pipeline == outs_of(tmp_path) and lock.removed("train")
    assert lock.definitions == pipeline_stages(tmp_path) and lock.definitions["train"].cmd == "x"


def test_committed_stages_is_empty_outside_git_or_for_a_broken_head(tmp_path: Path) -> None:
    assert _committed_stages(tmp_path) == set()
    (tmp_path / "dvc.lock").write_text("stages: [\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "dvc.lock"], check=True)
    subprocess.run([*git, "commit", "-qm", "broken"], check=True)
    assert _committed_stages(tmp_path) == set()
    sub = tmp_path / "project"
    sub.mkdir()
    (sub / "dvc.lock").write_text("schema: '2.0'\nstages:\n  inner: {cmd: x}\n")
    subprocess.run([*git, "add", "project/dvc.lock"], check=True)
    subprocess.run([*git, "commit", "-qm", "sub"], check=True)
    assert _committed_stages(sub) == {"inner"}  # ./dvc.lock beside dvc.yaml, not the repository root's
    for text, what in (
        (b"schema: '2.0'\nstages:\n  a: {cmd: '\xff'}\n", "not UTF-8 (text=True raised UnicodeDecodeError)"),
        (
            b"schema: '2.0'\nstages:\n  a: &a {cmd: x}\n  b: *a\n",
            "an alias, refused as in the working dvc.lock",
        ),
        (b"- 1\n", "no lock file"),
    ):
        (sub / "dvc.lock").write_bytes(text)
        subprocess.run([*git, "commit", "-qam", what], check=True)
        assert _committed_stages(sub) == set(), what


def test_the_dir_hash_does_not_depend_on_key_order() -> None:
    listing = [{"relpath": "a.txt", "md5": A_MD5}, {"relpath": "sub/b.txt", "md5": B_MD5}]
    assert dir_md5(listing) == DIR_MD5


def test_read_names_the_missing_or_broken_lock(tmp_path: Path) -> None:
    with pytest.raises(LockError) as e:
        DvcLock.read(tmp_path)
    assert str(e.value) == (
        f"{tmp_path / 'dvc.lock'}: missing: without it no artifact can be checked against what dvc repro wrote "
        "(git checkout dvc.lock, or dvc repro)"
    )
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "dvc.lock").write_text("stages: [\n")
    with pytest.raises(LockError, match=rf"^{tmp_path / 'dvc.lock'}: line 2: not valid YAML: "):
        DvcLock.read(tmp_path)
    (tmp_path / "dvc.lock").write_text("a: &x 1\nb: *x\n")  # bounded: no aliases in a lock file
    with pytest.raises(LockError) as e:
        DvcLock.read(tmp_path)
    assert str(e.value) == f"{tmp_path / 'dvc.lock'}: line 2: alias *x refused"
    (tmp_path / "dvc.lock").write_text("- 1\n")
    with pytest.raises(LockError) as e:
        DvcLock.read(tmp_path)
    assert str(e.value) == f"{tmp_path / 'dvc.lock'}: expected a dictionary {RULE}"


def test_outs_ending_in_a_slash_or_an_x_and_entries_without_path_or_md5() -> None:
    lock = lock_of(
        Path("."),
        {
            "s": {
                "outs": [
                    {"path": "data/X", "md5": "m1"},
                    {"path": "runs/t/", "md5": "m2"},
                    {"md5": "m3"},
                    {"path": "f"},
                ]
            }
        },
        {"s": ["data/X", "runs/t/"]},
    )
    assert lock.pipeline_out("data/X/y") == ("s", "data/X") and lock.pipeline_out("data/Z") is None
    assert lock.out("data/X/y") == ("data/X", "m1") and lock.out("runs/t/a") == ("runs/t/", "m2")
    assert lock.out("XXXX/a") is None and lock.out("f") == ("f", "")


def test_a_folder_listing_hashes_through_the_locks_cache(tmp_path: Path) -> None:
    folder(tmp_path)
    lock = lock_of(tmp_path, {})
    assert lock.listing("d") == dir_listing(tmp_path / "d")
    assert lock._md5 == {"d/a.txt": A_MD5, "d/sub/b.txt": B_MD5} and lock.listing("d") is lock.listing("d")


# -- issue #51: DVC's ignore rules and DVC 2's hashes ---------------------------------------------------------

CRLF = b"a\r\nb\r\n"  # md5-dos2unix: the md5 of b"a\nb\n"
AB_MD5 = hashlib.md5(b"a\nb\n").hexdigest()


def test_istext_as_dvc_datas_istextblock() -> None:
    assert istext(b"") and istext(b"plain text\r\n") and istext(b"\xff" * 3 + b"a" * 7)
    assert not istext(b"a\x00b") and not istext(b"\xff" * 4 + b"a" * 6)
    assert istext(b"\x01" * 30 + b"a" * 70) and not istext(b"\x01" * 31 + b"a" * 69)


def test_md5_dos2unix_turns_crlf_into_lf_in_text_chunks_only(tmp_path: Path) -> None:
    (tmp_path / "t").write_bytes(CRLF)
    (tmp_path / "b").write_bytes(b"\x00" + CRLF)
    (tmp_path / "e").write_bytes(b"")
    assert md5_dos2unix(tmp_path / "t") == AB_MD5
    assert md5_dos2unix(tmp_path / "b") == hashlib.md5(b"\x00" + CRLF).hexdigest()
    assert md5_dos2unix(tmp_path / "e") == hashlib.md5(b"").hexdigest()
    big = b"a\r\n" * (CHUNK // 3) + b"x" * (CHUNK % 3) + b"\x00\r\n"  # the second chunk is binary
    (tmp_path / "big").write_bytes(big)
    first, second = big[:CHUNK], big[CHUNK:]
    want = hashlib.md5(first.replace(b"\r\n", b"\n") + second).hexdigest()
    assert md5_dos2unix(tmp_path / "big") == want


def test_a_dvc2_entry_is_hashed_as_dvc2_did(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_bytes(CRLF)
    lock = lock_of(tmp_path, {"s": {"outs": [{"path": "f.txt", "md5": AB_MD5}]}})  # no `hash: md5`
    assert lock.legacy("f.txt") and lock.md5("f.txt", legacy=True) == AB_MD5
    assert lock.md5("f.txt") == hashlib.md5(CRLF).hexdigest() and lock._legacy == {"f.txt": AB_MD5}
    assert lock.changed("f.txt", "anything") is None  # the recorded md5 is the dos2unix one
    three = lock_of(tmp_path, {"s": {"outs": [{"path": "f.txt", "hash": "md5", "md5": AB_MD5}]}})
    assert not three.legacy("f.txt") and three.changed("f.txt", three.md5("f.txt")) == (
        f"f.txt: md5 {hashlib.md5(CRLF).hexdigest()}, dvc.lock recorded {AB_MD5}"
    )
    assert not three.legacy("other.txt") and lock.out_entry("other") is None
    assert lock.out_entry("f.txt") == ("f.txt", {"path": "f.txt", "md5": AB_MD5})


def test_a_dvc2_folder_is_listed_with_dvc2_hashes(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "t").write_bytes(CRLF)
    now = dir_md5([{"md5": AB_MD5, "relpath": "t"}])
    lock = lock_of(tmp_path, {"s": {"outs": [{"path": "d", "md5": now}]}})
    assert lock.listing("d", legacy=True) == [{"md5": AB_MD5, "relpath": "t"}]
    assert lock.folder_changes("d", now) == [] and lock.changed("d/t", "x") is None
    assert lock.listing("d") == [{"md5": hashlib.md5(CRLF).hexdigest(), "relpath": "t"}]
    assert set(lock._dirs) == {("d", True), ("d", False)}


def test_a_folder_is_listed_through_dvcs_ignore_rules(tmp_path: Path) -> None:
    d = folder(tmp_path)
    (d / ".git").write_text("x\n")
    (d / "j.tmp").write_text("x\n")
    (tmp_path / ".dvcignore").write_text("*.tmp\n")
    lock = DvcLock(tmp_path, {})
    assert lock.ignore is lock.ignore and lock.ignore.root == str(tmp_path.resolve())
    assert dir_listing(d, lock) == [
        {"md5": A_MD5, "relpath": "a.txt"},
        {"md5": B_MD5, "relpath": "sub/b.txt"},
    ]
    assert len(dir_listing(d)) == 4  # without a lock: every file (a plain listing)
    (d / "sub" / ".dvcignore").write_text("b.txt\n")
    with pytest.raises(ValidationError) as e:
        DvcLock(tmp_path, {}).listing("d")
    assert str(e.value) == (
        f"d: .dvcignore file should not be in collected dir path: '{d.resolve()}/sub' (rule: DVC refuses to "
        "hash such a folder)"
    )


def test_an_out_dvcignore_hides_is_refused_as_dvc_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "dvc.yaml").write_text("stages:\n  s:\n    cmd: x\n    outs: [out/a.txt, out/b.txt]\n")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    assert DvcLock.read(tmp_path).pipeline == {"s": ["out/a.txt", "out/b.txt"]}
    (tmp_path / ".dvcignore").write_text("out/b.txt\n")
    with pytest.raises(LockError) as e:
        DvcLock.read(tmp_path)
    assert str(e.value) == (
        f"{tmp_path / 'dvc.yaml'}: stage s: out out/b.txt is ignored by .dvcignore (rule: DVC refuses an out "
        "its ignore rules hide; dvc status refuses it too)"
    )


def test_md5_dos2unix_judges_a_chunk_by_its_first_512_bytes_exactly(tmp_path: Path) -> None:
    """512 text bytes, then a NUL: the chunk is text (DVC reads 512); CRLF after the NUL converted too."""
    head = (b"a\r\n" * 171)[:512]
    data = head + b"\x00" + b"b\r\n"
    (tmp_path / "f").write_bytes(data)
    assert md5_dos2unix(tmp_path / "f") == hashlib.md5(data.replace(b"\r\n", b"\n")).hexdigest()
    assert not istext(data[:513]) and istext(data[:512])


def test_an_out_entry_found_through_its_folder_keeps_its_path(tmp_path: Path) -> None:
    lock = lock_of(tmp_path, {"s": {"outs": [{"path": "d/", "md5": "m.dir"}, {"md5": "nopath"}]}})
    assert lock.out_entry("d/x") == ("d/", {"path": "d/", "md5": "m.dir"}) and lock.out("d/x") == (
        "d/",
        "m.dir",
    )
    assert lock.out("") == ("", "nopath") and lock.legacy("") and lock.legacy("d/x")


def test_an_out_holding_a_nested_project_is_listed_empty_not_refused(tmp_path: Path) -> None:
    """As dvc status: hashed without the nested project's files (modified), never refused as ignored."""
    (tmp_path / "dvc.yaml").write_text("stages:\n  s:\n    cmd: x\n    outs: [out/p]\n")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    (tmp_path / "out" / "p" / ".dvc").mkdir(parents=True)
    (tmp_path / "out" / "p" / "g").write_text("g\n")
    lock = DvcLock.read(tmp_path)  # not refused
    assert lock.listing("out/p") == [] and lock.ignore.subrepos
