"""pytest plugin for mutation runs of the judge (tests/judge_mutation.py loads it with -p).

1. Registers the Hypothesis profile `judge-mutation` before tests/hypothesis_profiles.py loads the
   one HYPOTHESIS_PROFILE names: the `ci` sample sizes, derandomized (a mutant's verdict does not
   depend on the draw, so a report and a CI run are reproducible) and without shrinking (a failing
   example kills the mutant; making it minimal only costs time, up to ~30 s per killed mutant).
2. Builds the gate tree (tests/gate_tree.py: real runs, exports, registry, ~100 CPU-seconds) once per
   campaign instead of once per mutant: mutmut runs every mutant in a fresh pytest session, so the
   session fixture would rebuild it each time. The first session without an active mutant (mutmut's
   stats run) builds it with the unmutated code and keeps a copy under $JUDGE_MUTATION_WORK; later
   sessions copy it, as each tree test already copies the session's tree before editing it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "judge-mutation",
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# what the tree is built from: the unmutated sources beside mutants/ in the work copy
TREE_INPUTS = ("xtrain", "pipeline", "runrecord", "gates", "registry", "contracts", "params")
TREE_FILES = ("tests/gate_tree.py", "tests/conftest.py", "params.yaml", "dvc.yaml")


def tree_key(work: Path) -> str:
    h = hashlib.sha256()
    files = [p for d in TREE_INPUTS for p in sorted((work / d).rglob("*.py"))]
    for p in [*files, *(work / f for f in TREE_FILES)]:
        h.update(p.relative_to(work).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def unmutated() -> bool:
    """No mutant is active: mutmut's stats and clean-test runs ('stats', ''), or no mutmut at all."""
    return os.environ.get("MUTANT_UNDER_TEST", "") in ("", "stats")


def cached(build, cache: Path):
    def build_tree(tiny_data, root: Path) -> Path:
        if cache.is_dir():
            shutil.copytree(cache, root, symlinks=True, dirs_exist_ok=True)
            return root
        build(tiny_data, root)
        if unmutated():  # never keep a tree a mutant's code built
            tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
            shutil.copytree(root, tmp, symlinks=True)
            try:
                tmp.rename(cache)
            except OSError:  # another worker kept one first
                shutil.rmtree(tmp, ignore_errors=True)
        return root

    build_tree.judge_mutation_cache = cache
    return build_tree


def pytest_sessionstart(session) -> None:
    work = os.environ.get("JUDGE_MUTATION_WORK")
    if not work:
        return
    import gate_tree  # tests/ is on sys.path once tests/conftest.py has loaded

    if hasattr(gate_tree.build_tree, "judge_mutation_cache"):
        return  # patched in an earlier session of this process (mutmut forks its workers from it)
    cache = Path(work) / ".gate-tree-cache" / tree_key(Path(work))
    cache.parent.mkdir(exist_ok=True)
    gate_tree.build_tree = cached(gate_tree.build_tree, cache)
