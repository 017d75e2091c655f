"""Every writer safe under concurrency and bad input (issue #51 item 4), through the real commands.

Real processes at once, real signals, real files: `python -m pipeline.config set` twice at once
keeps both values; the negative controls re-plant the old behaviour (no lock) in the same harness
and see the value lost. The in-process tests of the same code are the judge's unit tests
(tests/process/test_judge_contracts_lockfile.py, test_judge_params_config_writers.py, ...).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_judge_registry_main import checkpoint

from conftest import PARAMS, REPO, code_first
from judge_trees import make_registry

# `config set` with a pause between reading the file and writing it (so two writers overlap for
# certain); NO_LOCK re-plants main's writer (no lock) for the negative control.
SLOW_SET = """
import sys, time
import params.config as c
check = c._check_edit_takes_effect
def slow(*a, **k):
    check(*a, **k)
    time.sleep(0.5)
c._check_edit_takes_effect = slow
if sys.argv[1] == "no-lock":
    import contextlib
    c.lockfile.held = lambda *a, **k: contextlib.nullcontext()
from pipeline.config import main
sys.exit(main(sys.argv[2:]))
"""

KEYS = ("seed=11", "train.eval_batches=3", "train.log_every=7", "export.dtype=bf16")


def start_setters(params: Path, mode: str) -> list[subprocess.Popen]:
    if mode == "real":
        head = [sys.executable, "-m", "pipeline.config"]
    else:
        head = [sys.executable, "-c", SLOW_SET, mode]
    return [
        subprocess.Popen(
            [*head, "--params", str(params), "set", kv],
            cwd=REPO,
            env=code_first(REPO),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kv in KEYS
    ]


def values(params: Path) -> tuple:
    raw = yaml.safe_load(params.read_text())
    return raw["seed"], raw["train"]["eval_batches"], raw["train"]["log_every"], raw["export"]["dtype"]


@pytest.mark.parametrize("mode", ["real", "slow"])
def test_config_set_at_once_keeps_every_value(tmp_path: Path, mode: str) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS.read_text())
    procs = start_setters(params, mode)
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(KEYS), outs
    assert values(params) == (11, 3, 7, "bf16")  # main: 1 to 3 of the 4 values lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # no lock file left


def test_negative_control_without_the_lock_a_value_is_lost(tmp_path: Path) -> None:
    """The same overlapping writers with main's writer (no lock): each says "set", exits 0, and all
    but one value are lost: what the test above would see without contracts/lockfile.py."""
    params = tmp_path / "params.yaml"
    params.write_text(PARAMS.read_text())
    procs = start_setters(params, "no-lock")
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(KEYS)
    assert all(": set " in out for out, _ in outs)
    assert values(params) != (11, 3, 7, "bf16")


# -- two `registry pin` at once --------------------------------------------------------------------

# `registry pin` with a pause while its staged folder is half-written (so two pins overlap for
# certain); NO_LOCK re-plants main's registry writer (no lock) for the negative control.
SLOW_PIN = """
import sys, time
import registry.__main__ as cli
provenance = cli.provenance
def slow(*a, **k):
    print("staging", flush=True)
    time.sleep(1.5)
    return provenance(*a, **k)
cli.provenance = slow
if sys.argv[1] == "no-lock":
    import contextlib
    cli.lockfile.held = lambda *a, **k: contextlib.nullcontext()
sys.exit(cli.main(sys.argv[2:]))
"""


def pin(root: Path, ckpt: Path, model: str, mode: str) -> subprocess.Popen:
    argv = ["--root", str(root), "pin", str(ckpt), "--model", model, "--reason", "a second reference"]
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_PIN, mode, *argv], cwd=REPO, env=code_first(REPO),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.fixture()
def registry_and_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    return make_registry(tmp_path / "registry").root, checkpoint(tmp_path / "ckpt")


def test_two_pins_at_once_both_land_the_second_waiting(registry_and_checkpoint) -> None:
    root, ckpt = registry_and_checkpoint
    first = pin(root, ckpt, "first", "lock")
    assert first.stdout is not None and first.stdout.readline() == "staging\n"  # it holds the lock
    second = pin(root, ckpt, "second", "lock")
    outs = [p.communicate(timeout=120) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert outs[1][0].startswith(f"staging\npinned {ckpt} as {root / 'pinned' / 'second'}")
    listed = subprocess.run(
        [sys.executable, "-m", "registry", "--root", str(root), "validate"], cwd=REPO, env=code_first(REPO),
        capture_output=True, text=True,
    )  # fmt: skip
    assert listed.stdout == "registry: 12 files valid, 12 indexed\n", listed.stderr
    assert not (root.parent / ".registry.lock").exists()


def test_negative_control_two_pins_without_the_lock_blame_a_past_crash(registry_and_checkpoint) -> None:
    """main's writer: the second pin, reading the registry while the first stages its files, blames
    "a leftover temporary file of an interrupted registry write" that the first still holds."""
    root, ckpt = registry_and_checkpoint
    first = pin(root, ckpt, "first", "no-lock")
    assert first.stdout is not None and first.stdout.readline() == "staging\n"
    second = pin(root, ckpt, "second", "no-lock")
    _, err = second.communicate(timeout=120)
    first.communicate(timeout=120)
    assert second.returncode == 2 and "a leftover temporary file of an interrupted registry write" in err


def test_a_reader_during_a_pin_names_the_writer(registry_and_checkpoint) -> None:
    root, ckpt = registry_and_checkpoint
    first = pin(root, ckpt, "first", "lock")
    try:
        assert first.stdout is not None and first.stdout.readline() == "staging\n"
        listed = subprocess.run(
            [sys.executable, "-m", "registry", "--root", str(root), "list"], cwd=REPO, env=code_first(REPO),
            capture_output=True, text=True,
        )  # fmt: skip
    finally:
        first.communicate(timeout=120)
    assert listed.returncode == 2
    assert listed.stderr.endswith(
        f"not yet in registry/index.json: pid {first.pid} (python -m registry pin) is writing the registry "
        "now; next: let it finish, then re-run\n"
    ), listed.stderr
    assert listed.stderr.count("\n") == 1


# -- a signal to `gates mutate` / `gates bisect` ends their children ---------------------------------

SLOW_STAGE = """
import subprocess, sys, time
# a grandchild in a session of its own, as torchrun's agent is: out of reach of its group's signal
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[1]], start_new_session=True)
print("started", flush=True)
time.sleep(600)
"""

CATALOGUE = """
campaign: {skip_stages: [], skip_gates: [], timeout_s: 900}
profiles: {default: []}
mutants:
  - {id: m1, area: control, what: "a mutant of a fake project", expect: [],
     edits: [{file: pkg/target.py, old: "x = 1", new: "x = 2"}]}
"""


def slow_project(root: Path, marker: str) -> Path:
    """A git + DVC project whose one stage runs until killed, with a child in another session."""
    root.mkdir()
    (root / "slow.py").write_text(SLOW_STAGE)
    (root / "pkg").mkdir()
    (root / "pkg" / "target.py").write_text("x = 1\n")
    (root / "params.yaml").write_text("knob: 1\n")
    (root / "dvc.yaml").write_text(
        f"stages:\n  slow:\n    cmd: python3 slow.py {marker}\n    deps: [slow.py]\n"
    )
    env = {**code_first(REPO), "DVC_NO_ANALYTICS": "1"}
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"]):  # fmt: skip
        subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    return root


def processes(marker: str) -> list:
    from proctree_cases import tree

    return tree(marker)


HARNESS = """
import contextlib, sys
from gates.campaigns import children
if sys.argv[1] == "no-handler":  # main: no signal handling in the campaigns
    children.ending_on_signal = lambda command: contextlib.nullcontext()
from gates.__main__ import main
sys.exit(main(sys.argv[2:]))
"""


def start_campaign(tmp_path: Path, mode: str, *argv: str) -> subprocess.Popen:
    env = {**code_first(REPO), "DVC_NO_ANALYTICS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", HARNESS, mode, *argv], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def interrupt_once_running(campaign: subprocess.Popen, marker: str) -> tuple[str, str]:
    from proctree_cases import wait_for

    def grandchild() -> bool:  # the stage's child in a session of its own is running
        return any("time.sleep(600)" in " ".join(p.cmdline()) for p in processes(marker))

    assert wait_for(lambda: grandchild() or campaign.poll() is not None, 300, 0.1)
    assert campaign.poll() is None, campaign.communicate()
    campaign.send_signal(signal.SIGINT)  # to the campaign's pid alone, as `kill -INT` does
    return campaign.communicate(timeout=120)


def mutate_argv(tmp_path: Path, root: Path) -> list[str]:
    (tmp_path / "cat.yaml").write_text(CATALOGUE)
    return ["--root", str(root), "mutate", "--catalogue", str(tmp_path / "cat.yaml"), "--work",
            str(tmp_path / "work"), "--jobs", "1"]  # fmt: skip


def test_sigint_to_gates_mutate_in_its_baseline_ends_every_child(tmp_path: Path) -> None:
    """main: a 33-line traceback, and `dvc repro` with its stage's processes lived on."""
    from proctree_cases import kill_all, wait_for

    marker = f"xtrain-sigint-{tmp_path.name}"
    root = slow_project(tmp_path / "project", marker)
    campaign = start_campaign(tmp_path, "handler", *mutate_argv(tmp_path, root))
    try:
        _, err = interrupt_once_running(campaign, marker)
        assert campaign.returncode == 130, err
        assert err.endswith("running processes ended, none left behind; what finished before is kept\n"), err
        assert err.startswith("error: gates mutate: interrupted by SIGINT: ") and err.count("\n") == 1, err
        assert wait_for(lambda: not processes(marker), 5), [p.cmdline() for p in processes(marker)]
    finally:
        kill_all(marker)


@pytest.mark.xfail(
    strict=False,
    reason="2026-12-05: inside the whole suite the handler-less campaign does not exit within 120 s of "
    "SIGINT (three runs); alone, and with its file, it passes in 4 s. Cause not found yet",
)
def test_negative_control_without_the_handler_children_outlive_the_campaign(tmp_path: Path) -> None:
    """The same SIGINT with main's campaign (no handler): a traceback, and the stage lives on."""
    from proctree_cases import kill_all

    marker = f"xtrain-sigint-{tmp_path.name}"
    root = slow_project(tmp_path / "project", marker)
    campaign = start_campaign(tmp_path, "no-handler", *mutate_argv(tmp_path, root))
    try:
        _, err = interrupt_once_running(campaign, marker)
        assert campaign.returncode != 130 and "Traceback (most recent call last)" in err
        assert processes(marker), "the stage died with the campaign: the test above proves nothing"
    finally:
        kill_all(marker)


def test_sigint_to_gates_bisect_ends_every_child_and_its_worktree(tmp_path: Path) -> None:
    from proctree_cases import kill_all, wait_for

    marker = f"xtrain-sigint-{tmp_path.name}"
    root = slow_project(tmp_path / "project", marker)
    (root / "pkg" / "target.py").write_text("x = 2\n")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two"], cwd=root,
                   check=True)  # fmt: skip
    campaign = start_campaign(tmp_path, "handler", "--root", str(root), "bisect", "HEAD~1", "HEAD")
    try:
        out, err = interrupt_once_running(campaign, marker)
        assert campaign.returncode == 130, (out, err)
        assert err.startswith("error: gates bisect: interrupted by SIGINT: ") and err.count("\n") == 1, err
        assert wait_for(lambda: not processes(marker), 5), [p.cmdline() for p in processes(marker)]
        listed = subprocess.run(["git", "worktree", "list"], cwd=root, capture_output=True, text=True).stdout
        assert listed.count("\n") == 1, listed  # the scratch worktree was removed on the way out
    finally:
        kill_all(marker)
