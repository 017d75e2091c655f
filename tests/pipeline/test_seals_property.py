"""Property (issue #27): a random tamper of any file under any DVC out or the registry folders dvc.lock
seals, with dvc.lock untouched, never exits 0.

Hypothesis draws the file (or, to add one, the folder), the kind of tamper (flip some bits of a
byte, truncate, delete, add a file) and where; each case runs on a fresh copy of the real, sealed
artifact tree of tests/gate_tree.py (~6 MB with its DVC cache: a copy costs milliseconds).
HYPOTHESIS_PROFILE=nightly draws 60 (each case is a gates check in the serial tree group).
Counts of the last run: printed at the end of the module (pytest -s).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gate_tree import check, copy_tree
from hypothesis_profiles import examples

pytestmark = [pytest.mark.tree, pytest.mark.xdist_group("tree")]

TRIED: Counter[str] = Counter()
CAUGHT: Counter[str] = Counter()


def tamper_targets(root: Path) -> tuple[list[str], list[str]]:
    """(every file under a dvc.lock out or a registry folder dvc.lock seals, every folder a file can be
    added to). registry/models and registry/pinned are deps of the export and registry_check stages;
    registry/goldens and registry/baselines are no stage's dep: their files carry content seals, and a
    file added there is issue #27 item 6's (the registry's own index), not dvc.lock's."""
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    bodies = lock["stages"].values()
    outs = [o["path"] for body in bodies for o in body["outs"]]
    deps = [d["path"] for body in bodies for d in body.get("deps", []) if d["path"].startswith("registry/")]
    tops = [root / p for p in sorted({*outs, *deps})]
    files, folders = set(), set()
    for top in tops:
        if top.is_file():
            files.add(top)
        for p in top.rglob("*") if top.is_dir() else []:
            (files if p.is_file() else folders).add(p)
        if top.is_dir():
            folders.add(top)
    rel = lambda ps: sorted(p.relative_to(root).as_posix() for p in ps)  # noqa: E731
    return rel(files), rel(folders)


@pytest.fixture(scope="module")
def targets(gate_tree: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    yield (gate_tree, *tamper_targets(gate_tree))
    print(f"\nrandom tampers: tried {sum(TRIED.values())} ({dict(TRIED)}), caught {sum(CAUGHT.values())}")


def flip(path: Path, where: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    data[where % len(data)] ^= mask
    path.write_bytes(bytes(data))


def apply(root: Path, kind: str, rel: str, draw: st.DataObject) -> None:
    path = root / rel
    if kind == "add":
        name = draw.draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=12))
        target = path / name
        if target.exists() or name in (".", ".."):
            name = "added-" + name.replace(".", "_")
            target = path / name
        target.write_bytes(draw.draw(st.binary(max_size=64)))
    elif kind == "delete":
        path.unlink()
    elif kind == "truncate":
        path.write_bytes(path.read_bytes()[: draw.draw(st.integers(0, path.stat().st_size - 1))])
    else:
        flip(path, draw.draw(st.integers(0, 1 << 30)), draw.draw(st.integers(1, 255)))


@examples(ci=25, nightly=60)
@given(data=st.data())
def test_a_random_tamper_never_exits_0(
    targets: tuple[Path, list[str], list[str]], data: st.DataObject
) -> None:
    tree, files, folders = targets
    kind = data.draw(st.sampled_from(["flip", "truncate", "delete", "add"]), label="kind")
    rel = data.draw(st.sampled_from(folders if kind == "add" else files), label="path")
    with tempfile.TemporaryDirectory(prefix="tamper-") as tmp:
        root = copy_tree(tree, Path(tmp) / "tree")
        if kind in ("flip", "truncate") and (root / rel).stat().st_size == 0:
            kind = "delete"  # nothing to flip or cut
        apply(root, kind, rel, data)
        TRIED[kind] += 1
        code, report = check(root, sealed=False)  # dvc.lock untouched
        passing = [g["id"] for g in report["gates"] if g["status"] == "pass"]
        assert code != 0, f"{kind} {rel}: exit 0 (passing: {passing})"
        CAUGHT[kind] += 1
