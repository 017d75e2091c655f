"""The tests' bugs come from outside the stack under test (issue #35 item 2).

Every logic bug that xtrain/core/faults.py used to switch on inside the trainer is now a mutant of
the catalogue (gates/campaigns/mutants.yaml) and, in its fast form, a patch of the test layer
(tests/bug_layer/xtrain_bugs.py) that at least one negative control injects. xtrain keeps failpoints
for process faults only (xtrain/core/failpoints.py) and knows nothing of the layer. Each checker has
a negative control.
"""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bug_layer import xtrain_bugs as bugs
from conftest import REPO
from gates.campaigns import mutants
from xtrain.core import failpoints
from xtrain.core.train import Trainer, train_step

# The logic bugs of xtrain/core/faults.py before issue #35 (DDP_BUG_KINDS + FEATURE_BUG_KINDS).
FORMER_FAULT_BUGS = (
    "grad_sum",
    "same_shard",
    "dropout_unsync",
    "ddp_eval",
    "ddp_no_dropout",
    "ddp_stays_eval",
    "recompute_drift",
    "accum_undivided",
    "resume_drop_v",
    "bf16_no_master",
    "fused_lr_frozen",
)


def unmapped(names: tuple[str, ...], layer: dict[str, str], catalogue: set[str]) -> list[str]:
    """`name: why` for every bug name without a patch in the layer or a mutant in the catalogue."""
    problems = [f"{n}: no patch in tests/bug_layer/xtrain_bugs.py" for n in names if n not in layer]
    return problems + [
        f"{n}: mutant {layer[n]!r} is not in gates/campaigns/mutants.yaml"
        for n in names
        if n in layer and layer[n] not in catalogue
    ]


def strings_by_test(source: str) -> dict[str, set[str]]:
    """Per test function: the string constants in it, its decorators and the module-level names it uses."""
    tree = ast.parse(source)
    module_strings: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found = {
                c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
            module_strings.update({t.id: found for t in targets if isinstance(t, ast.Name)})
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            found = set()
            for sub in ast.walk(node):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    found.add(sub.value)
                elif isinstance(sub, ast.Name):
                    found |= module_strings.get(sub.id, set())
            out[node.name] = found
    return out


def strings_of_tests(sources: dict[str, str]) -> dict[str, set[str]]:
    """`file::test` -> the strings it uses, over every test module (each parsed once)."""
    return {
        f"{rel}::{test}": found
        for rel, src in sources.items()
        for test, found in strings_by_test(src).items()
    }


def users(name: str, tests: dict[str, set[str]]) -> list[str]:
    """The tests that inject the bug `name` (a string `name@RANK:STEP` in them)."""
    return sorted(test for test, found in tests.items() if any(s.startswith(f"{name}@") for s in found))


def sources_of_tests() -> dict[str, str]:
    """The test modules, this one excepted (it parses bug names; it injects none)."""
    paths = sorted(p for p in (REPO / "tests").glob("*/test_*.py") if p.name != Path(__file__).name)
    return {p.relative_to(REPO).as_posix(): p.read_text() for p in paths}


def test_every_former_fault_bug_is_a_mutant_and_a_patch_some_test_injects() -> None:
    layer = {name: bug.mutant for name, bug in bugs.BUGS.items()}
    catalogue = {m.id for m in mutants.load().mutants}
    assert not unmapped(FORMER_FAULT_BUGS, layer, catalogue)
    assert set(layer) == set(FORMER_FAULT_BUGS)  # no patch without a former control or a mutant
    tests = strings_of_tests(sources_of_tests())
    table = {name: users(name, tests) for name in FORMER_FAULT_BUGS}
    for name, tests in table.items():
        print(f"{name} -> {layer[name]} -> {', '.join(tests) or 'NO TEST'}")
    assert all(table.values()), {n: t for n, t in table.items() if not t}


def test_the_mapping_check_catches_a_bug_without_a_mutant_or_a_test() -> None:
    """Negative controls: a bug with no patch, one whose mutant is not catalogued, one no test injects."""
    catalogue = {"summed-gradients"}
    problems = unmapped(("grad_sum", "same_shard"), {"grad_sum": "no-such-mutant"}, catalogue)
    assert problems == [
        "same_shard: no patch in tests/bug_layer/xtrain_bugs.py",
        "grad_sum: mutant 'no-such-mutant' is not in gates/campaigns/mutants.yaml",
    ]
    fake = {
        "tests/unit/test_x.py": 'BUGS = [("grad_sum@*:0", "first step")]\n\n'
        "@pytest.mark.parametrize('bug', BUGS)\ndef test_a(bug): ...\n\n"
        "def test_b():\n    run('same_shard@3:7')\n\ndef helper():\n    run('ddp_eval@*:0')\n"
    }
    tests = strings_of_tests(fake)
    assert users("grad_sum", tests) == ["tests/unit/test_x.py::test_a"]
    assert users("same_shard", tests) == ["tests/unit/test_x.py::test_b"]
    assert users("ddp_eval", tests) == []  # a helper that no test calls is not a negative control


def mentions(source: str, words: tuple[str, ...]) -> list[str]:
    """`line: word` wherever a word of `words` occurs in `source`."""
    return [f"{i}: {w}" for i, line in enumerate(source.splitlines(), 1) for w in words if w in line]


LAYER_WORDS = (bugs.ENV, "bug_layer", "xtrain_bugs", *FORMER_FAULT_BUGS)


def test_nothing_in_the_product_knows_the_bugs() -> None:
    """xtrain and the stages name no bug and no patch layer; train.py consults no fault module."""
    files = sorted(p for pkg in ("xtrain", "pipeline") for p in (REPO / pkg).rglob("*.py"))
    found = {str(p.relative_to(REPO)): hit for p in files if (hit := mentions(p.read_text(), LAYER_WORDS))}
    assert not found, found
    assert not mentions((REPO / "xtrain/core/train.py").read_text(), ("faults",))
    assert mentions("fault = faults.grad_scale(rank, step, world)  # grad_sum", LAYER_WORDS) == [
        "1: grad_sum"
    ]


def test_the_step_takes_no_injection_parameter() -> None:
    """train_step's and Trainer.step's parameters are the step's own (grad_scale, loss_divisor are gone)."""
    assert list(inspect.signature(train_step).parameters) == [
        "module", "model", "opt", "micro", "comm", "grads", "t", "dropout_seeds", "dropout_rows", "params",
    ]  # fmt: skip
    assert list(inspect.signature(Trainer.step).parameters) == ["self", "step"]


def test_failpoints_are_process_faults_only() -> None:
    assert failpoints.KINDS == ("raise", "hang", "nan", "slow_thread", "slow_proc")
    for name in FORMER_FAULT_BUGS:
        with pytest.raises(ValueError, match="kind must be one of raise, hang, nan"):
            failpoints.parse(f"{name}@*:0")
    assert failpoints.parse("raise@1:3") == failpoints.Fault("raise", 1, 3)


def test_an_unarmed_step_pays_one_none_check(monkeypatch) -> None:
    """Nothing armed: no failpoint callable at all; armed elsewhere (another rank, another run's
    folder): none either; armed here: it acts at its step only."""
    monkeypatch.setattr(failpoints, "_FAULT", None)
    assert failpoints.step_failpoint(0, "runs/single") is None
    monkeypatch.setattr(failpoints, "_FAULT", failpoints.Fault("nan", 1, 4))
    monkeypatch.setattr(failpoints, "_SCOPE", "dropout")
    assert failpoints.step_failpoint(0, "runs/pilot/dropout/thread") is None  # rank 0
    assert failpoints.step_failpoint(1, "runs/pilot/base/thread") is None  # another cell
    poison = failpoints.step_failpoint(1, "runs/pilot/dropout/thread")
    assert poison is not None and [poison(s) for s in range(6)] == [False] * 4 + [True, False]


def test_a_bug_acts_on_its_rank_from_its_step_on() -> None:
    late = bugs.parse("same_shard@3:7")
    assert not late.on(3, 6) and late.on(3, 7) and late.on(3, 11) and not late.on(2, 9)
    every = bugs.parse("grad_sum@*:0")
    assert all(every.on(r, s) for r in range(4) for s in range(3))
    for bad in ("grad_sum", "grad_sum@x:0", "no_such_bug@*:0"):
        with pytest.raises(ValueError, match=rf"{bugs.ENV}="):
            bugs.parse(bad)


def test_a_bad_patch_request_stops_the_subprocess_at_once() -> None:
    """The layer's sitecustomize refuses a typo before anything runs: exit 2, one line; unset, inert."""
    env = {**os.environ, bugs.ENV: "grad_summ@*:0", "PYTHONPATH": str(bugs.LAYER)}
    proc = subprocess.run([sys.executable, "-c", "print('trained')"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.startswith(
        f"error: {bugs.ENV}='grad_summ@*:0': the bug must be one of accum_undivided"
    )
    assert len(proc.stderr.splitlines()) == 1
    env.pop(bugs.ENV)
    proc = subprocess.run([sys.executable, "-c", "print('trained')"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "trained\n", proc
    assert bugs.bug_env("grad_sum@*:0", {"PYTHONPATH": "/x"})["PYTHONPATH"] == f"{bugs.LAYER}{os.pathsep}/x"


def test_the_layer_folder_holds_only_the_layer() -> None:
    """On a subprocess's PYTHONPATH the folder must shadow nothing: its two modules and no package."""
    assert sorted(p.name for p in Path(bugs.LAYER).glob("*.py")) == ["sitecustomize.py", "xtrain_bugs.py"]
