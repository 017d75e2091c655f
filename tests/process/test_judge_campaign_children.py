"""gates/campaigns/children.py under mutation (docs/judge-mutation.md), in-process with real processes.

A campaign's children (`gates mutate`, `gates bisect`) run in process groups of their own; a signal
to the campaign is passed to them all, a process in another session and one started while dying
included, and whatever is left after the grace period is killed; the campaign then raises
Interrupted (one line, exit 128+signal). tests/process/test_writers.py sends a real SIGINT to the real
commands; here each part is held exactly.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from contracts.errors import report
from gates.campaigns import children
from gates.campaigns.children import Done, Interrupted

PR_GET_CHILD_SUBREAPER = 37


def zombie_children() -> list[int]:
    return [c.pid for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE]


@pytest.fixture(autouse=True)
def clean_state():
    """Each test leaves no state, no live registration and no unreaped child of this process (the
    mutation runner reaps every child it has with os.wait: one it never started broke it)."""
    children._signal.clear()
    zombies = zombie_children()
    yield
    children._signal.clear()
    children._adopt_orphans(False)
    assert children._live == {} and children._state == {"adopting": False}
    assert wait_for(lambda: zombie_children() == zombies, 5), (zombie_children(), zombies)


def marked(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or []):
            found.append(p)
    return found


def wait_for(predicate, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def subreaper() -> int:
    value = ctypes.c_int(-1)
    ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0)
    return value.value


# ---- Interrupted, check, interrupted ---------------------------------------------------------------


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_interrupted_is_one_line_and_exits_128_plus_the_signal(capsys, sig: int, code: int) -> None:
    e = Interrupted("gates mutate", sig, 4)
    assert isinstance(e, BaseException) and not isinstance(e, Exception)  # no `except Exception` eats it
    assert e.exit_code == code and report(e) == code
    name = signal.Signals(sig).name
    assert capsys.readouterr().err == (
        f"error: gates mutate: interrupted by {name}: 4 running processes ended, none left behind; what "
        "finished before is kept\n"
    )


def test_check_raises_once_a_signal_has_arrived() -> None:
    assert children.check("x") is None and children.interrupted() is None
    children._signal.append(signal.SIGTERM)
    assert children.interrupted() == signal.SIGTERM
    with pytest.raises(Interrupted) as e:
        children.check("gates bisect")
    assert (
        str(e.value).startswith("gates bisect: interrupted by SIGTERM: 0 running")
        and e.value.exit_code == 143
    )
    with pytest.raises(Interrupted, match=r"^campaign: interrupted"):
        children.check()


# ---- run --------------------------------------------------------------------------------------------


def test_run_captures_both_streams_in_the_folder_and_environment(tmp_path: Path) -> None:
    code = "import os,sys; print(os.getcwd(), os.environ['X_CHILD'], os.getpgid(0) == os.getpid()); sys.stderr.write('e'); sys.exit(3)"
    env = {**os.environ, "X_CHILD": "given"}
    assert children.run([sys.executable, "-c", code], tmp_path, env) == Done(
        3, f"{tmp_path} given True\n", "e", False
    )
    merged = children.run([sys.executable, "-c", code], tmp_path, env, merge=True)
    assert merged == Done(3, f"{tmp_path} given True\ne", "", False)


def test_run_kills_the_group_on_timeout(tmp_path: Path) -> None:
    marker = f"xtrain-timeout-{os.getpid()}-{tmp_path.name}"
    cmd = ["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(300)' {marker} & echo started; wait"]
    done = children.run(cmd, tmp_path, timeout=1.0)
    assert (done.code, done.out, done.timed_out) == (-signal.SIGKILL, "started\n", True)
    assert wait_for(lambda: not marked(marker), 10)


def test_run_starts_nothing_after_a_signal(tmp_path: Path) -> None:
    children._signal.append(signal.SIGINT)
    with pytest.raises(Interrupted):
        children.run(["touch", str(tmp_path / "ran")], tmp_path)
    assert not (tmp_path / "ran").exists() and children._live == {}


def test_run_of_a_child_a_signal_cut_short_raises_not_returns(tmp_path: Path) -> None:
    """Its output is the interruption's: a mutant must not be classified on it."""
    seen = []

    def signal_when_running() -> None:
        assert wait_for(lambda: bool(children._live), 30)
        seen.append(dict(children._live))
        children._signal.append(signal.SIGINT)
        for p in list(children._live.values()):
            p.kill()

    threading.Thread(target=signal_when_running).start()
    with pytest.raises(Interrupted):
        children.run([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path)
    assert len(seen) == 1 and len(seen[0]) == 1 and children._live == {}


# ---- end_all --------------------------------------------------------------------------------------

STUBBORN = """
import os, signal, subprocess, sys, time
marker = sys.argv[1]
def on_signal(*_):  # a process that starts one more (deaf to SIGINT) on its way out, and leaves
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                      "time.sleep(300)", marker + "-late"], start_new_session=True)
    os._exit(0)
signal.signal(signal.SIGINT, on_signal)
# in a session of its own: its group's signal does not reach it (torchrun's agent); started once the
# handler is in place (the test signals once it sees this one)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", marker + "-far"], start_new_session=True)
while True:
    time.sleep(0.05)
"""


def start_in_thread(tmp_path: Path, marker: str) -> tuple[threading.Thread, list]:
    caught: list = []

    def body() -> None:
        try:
            children.run([sys.executable, "-c", STUBBORN, marker], tmp_path)
        except BaseException as e:  # the thread's outcome, for the test to read
            caught.append(e)

    t = threading.Thread(target=body)
    t.start()
    assert wait_for(lambda: len(marked(marker)) == 2, 60), [p.cmdline() for p in marked(marker)]
    return t, caught


def test_end_all_ends_every_process_in_any_session_even_one_started_on_the_way_out(tmp_path: Path) -> None:
    marker = f"xtrain-end-{os.getpid()}-{tmp_path.name}"
    children._adopt_orphans(True)  # as the command does: an orphan comes back to this process
    t, caught = start_in_thread(tmp_path, marker)
    t0 = time.monotonic()
    ended = children.end_all(signal.SIGINT, grace_s=1.0)
    waited = time.monotonic() - t0
    assert not marked(marker), [p.cmdline() for p in marked(marker)]
    assert ended == 3 and waited >= 1.0  # the child and the far one; the late one found on the next pass
    t.join(30)
    assert caught == [] and children._live == {}


def test_without_adopting_a_late_orphan_escapes(tmp_path: Path) -> None:
    """Negative control: the late process, orphaned to init, is out of reach without the subreaper."""
    marker = f"xtrain-end-{os.getpid()}-{tmp_path.name}"
    t, _ = start_in_thread(tmp_path, marker)
    try:
        children.end_all(signal.SIGINT, grace_s=1.0)
        assert [p.cmdline()[-1] for p in marked(marker)] == [f"{marker}-late"]
    finally:
        for p in marked(marker):
            p.kill()
        t.join(30)


def test_end_all_of_nothing_is_nothing() -> None:
    assert children.end_all(signal.SIGTERM, grace_s=0.1) == 0


def test_lives() -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    q = psutil.Process(p.pid)
    assert wait_for(lambda: q.status() == psutil.STATUS_ZOMBIE, 30)
    assert children._lives(q) is False  # a zombie has ended
    p.wait()
    assert children._lives(q) is False  # gone
    assert children._lives(psutil.Process()) is True


def test_family_of_a_gone_pid_is_empty_and_this_process_only_when_adopting() -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    assert children._family([int(gone.stdout)]) == []
    leaf = "import time; time.sleep(60)"
    code = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {leaf!r}]); time.sleep(60)"
    sleeper = subprocess.Popen([sys.executable, "-c", code])  # an adopted one with a child of its own
    try:
        assert wait_for(lambda: len(psutil.Process(sleeper.pid).children()) == 1, 30)
        below = psutil.Process(sleeper.pid).children()[0].pid
        assert children._family([]) == []
        children._adopt_orphans(True)
        pids = [q.pid for q in children._family([])]
        assert sleeper.pid in pids and below in pids and os.getpid() not in pids  # not itself
    finally:
        kids = psutil.Process(sleeper.pid).children()
        sleeper.kill()
        sleeper.wait()
        for q in kids:  # adopted by this process now: killed and reaped here
            q.kill()
        psutil.wait_procs(kids, timeout=10)


# ---- ending_on_signal --------------------------------------------------------------------------------


def test_a_signal_in_the_block_ends_the_children_and_raises(tmp_path: Path) -> None:
    marker = f"xtrain-block-{os.getpid()}-{tmp_path.name}"
    before = {sig: signal.getsignal(sig) for sig in children.CAUGHT}
    children._signal.append(signal.SIGHUP)  # a previous campaign's: forgotten by the next one
    with pytest.raises(Interrupted) as e, children.ending_on_signal("gates mutate"):
        assert children._signal == [] and subreaper() == 1
        assert all(signal.getsignal(sig) not in (before[sig], signal.SIG_IGN) for sig in children.CAUGHT)
        t, _ = start_in_thread(tmp_path, marker)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        except Interrupted:
            assert all(signal.getsignal(sig) == signal.SIG_IGN for sig in children.CAUGHT)  # no second one
            raise
        finally:
            t.join(60)
    assert str(e.value) == (
        "gates mutate: interrupted by SIGTERM: 2 running processes ended, none left behind; what finished "
        "before is kept"
    )
    assert e.value.exit_code == 143 and not marked(marker) and children.interrupted() is None  # forgotten
    assert {sig: signal.getsignal(sig) for sig in children.CAUGHT} == before and subreaper() == 0


def test_a_block_without_a_signal_restores_everything() -> None:
    before = {sig: signal.getsignal(sig) for sig in children.CAUGHT}
    with children.ending_on_signal("gates bisect"):
        pass
    assert {sig: signal.getsignal(sig) for sig in children.CAUGHT} == before and subreaper() == 0
    assert children.interrupted() is None


def test_family_is_each_child_with_everything_it_started() -> None:
    leaf = "import time; time.sleep(60)"
    mid = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {leaf!r}]); time.sleep(60)"
    top = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {mid!r}]); time.sleep(60)"
    one = subprocess.Popen([sys.executable, "-c", top])
    two = subprocess.Popen([sys.executable, "-c", leaf])
    try:
        assert wait_for(lambda: len(psutil.Process(one.pid).children(recursive=True)) == 2, 30)
        below = [q.pid for q in psutil.Process(one.pid).children(recursive=True)]  # child and grandchild
        found = sorted(q.pid for q in children._family([one.pid, two.pid]))
        assert found == sorted([one.pid, *below, two.pid])
    finally:
        for q in psutil.Process(one.pid).children(recursive=True):
            q.kill()
        for p in (one, two):
            p.kill()
            p.wait()


class Gone:
    """A process that ended between being found and being signalled (a race the tests cannot time)."""

    pid = os.getpid()

    def send_signal(self, sig: int) -> None:
        raise psutil.NoSuchProcess(self.pid)

    def kill(self) -> None:
        raise psutil.NoSuchProcess(self.pid)

    def is_running(self) -> bool:
        raise psutil.NoSuchProcess(self.pid)


def test_a_process_or_group_gone_meanwhile_is_passed_over_quietly() -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    children._signal_group(int(gone.stdout), signal.SIGTERM)  # ProcessLookupError: quiet
    children._quietly(Gone().kill)
    children._quietly(children._signal_alone, Gone(), signal.SIGTERM, set())
    assert children._lives(Gone()) is False
    with pytest.raises(psutil.NoSuchProcess):
        children._signal_alone(Gone(), signal.SIGTERM, set())  # what _quietly is for
    children._signal_alone(Gone(), signal.SIGTERM, {os.getpgid(0)})  # its group had the signal: none again
