"""What the seals gate costs on a tree the size of the pipeline's (docs/verdicts.md, "Cost").

    python3 tests/seals_cost.py [ROOT]

Builds, under ROOT (a temporary folder by default), every out dvc.lock records at its recorded size
and file count (random bytes: hashing cost depends on bytes, not content) with the repository's
registry, seals it the way `dvc commit` does (tests/gate_tree.py: seal), and times the seals gate in
a fresh process: reading dvc.lock and dvc.yaml, then hashing, on one thread and on two.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from conftest import code_first

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

TIME = """
import sys, time
t0 = time.perf_counter()
from pathlib import Path
from gates.judges import seals
from gates.reading import seal_records
from gates.reading.artifacts import Artifacts
from gates.reading.dvclock import DvcLock
root = Path(sys.argv[1])
t1 = time.perf_counter()
a = Artifacts(root, DvcLock.read(root))
t2 = time.perf_counter()
if sys.argv[2] == "1":
    seal_records.prefetch = lambda lock, paths: None  # one thread: the gate's own loop hashes each file
o = seals.seals(seal_records.seal_records(a))
t3 = time.perf_counter()
print(f"threads {sys.argv[2]}: {o.status} {o.measured} files; import {t1 - t0:.2f} s, "
      f"dvc.lock+dvc.yaml {t2 - t1:.3f} s, hashing {t3 - t2:.3f} s")
"""


def build(root: Path) -> int:
    root.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", "dvc.lock", "params.yaml"):
        shutil.copyfile(REPO / name, root / name)
    shutil.copytree(REPO / "registry", root / "registry", dirs_exist_ok=True)
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    for body in lock["stages"].values():
        for out in body["outs"]:
            path, n = root / out["path"], out.get("nfiles")
            if n:
                path.mkdir(parents=True, exist_ok=True)
                for i in range(n):
                    (path / f"f{i}.bin").write_bytes(os.urandom(out["size"] // n))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(os.urandom(out["size"]))
    from gate_tree import seal

    seal(root)
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="seals-cost-"))
    print(f"tree {build(root) / 1e6:.1f} MB at {root}")
    env = code_first(REPO)
    for threads in ("1", "2", "1", "2", "1", "2"):
        subprocess.run([sys.executable, "-c", TIME, str(root), threads], env=env, check=True)


if __name__ == "__main__":
    main()
