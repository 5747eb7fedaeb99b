"""The engine step's orphan guard: the processes a stub started end when the stub is killed, and nothing else does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from python_backends.engine.orphan_guard import OrphanGuard, alive, children, end, start_time
from tests.support.waiting import wait_until

# Stands in for a stub: starts a long child (the engine core) and the guard for it, prints both pids, then waits.
STUB = textwrap.dedent("""
    import subprocess, sys, time
    from python_backends.engine.orphan_guard import OrphanGuard, children
    core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    guard = OrphanGuard(children(__import__("os").getpid()))
    print(core.pid, guard.process.pid, flush=True)
    time.sleep(300)
""")
IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(300)"


def test_children_of_a_killed_stub_are_ended_and_the_guard_exits():
    stub = subprocess.Popen([sys.executable, "-c", STUB], stdout=subprocess.PIPE, text=True)
    core, guard = map(int, stub.stdout.readline().split())
    core_started = start_time(core)
    assert set(children(stub.pid)) == {core, guard}
    stub.kill()
    stub.wait()
    assert wait_until(lambda: not alive(core, core_started), timeout_s=5), "the orphaned child still runs"
    assert wait_until(lambda: not _running(guard), timeout_s=5), "the guard did not exit"


def _running(pid: int) -> bool:
    started = start_time(pid)
    return started is not None and alive(pid, started)


def _ignores_sigterm(pid: int) -> bool:
    status = open(f"/proc/{pid}/status").read()
    ignored = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
    return bool(ignored & (1 << (signal.SIGTERM - 1)))


def test_a_target_that_ignores_sigterm_is_killed_after_the_grace():
    target = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE, text=True)
    assert target.stdout.readline() == "ready\n"
    started = time.monotonic()
    end({target.pid: start_time(target.pid)}, grace_s=0.5)
    assert target.wait(timeout=5) == -signal.SIGKILL
    assert time.monotonic() - started >= 0.5


def test_a_pid_with_another_start_time_is_left_alone():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        end({other.pid: start_time(other.pid) - 1}, grace_s=0.2)
        assert other.poll() is None
        assert alive(other.pid, start_time(other.pid))
    finally:
        other.kill()
        other.wait()


def test_clean_close_ends_the_guard_at_once_and_nothing_else():
    survivor = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE, text=True)
    try:
        guard = OrphanGuard({survivor.pid: start_time(survivor.pid)})
        started = time.monotonic()
        guard.close()
        assert guard.process.returncode == 0
        assert time.monotonic() - started < 2
        assert survivor.poll() is None
    finally:
        survivor.kill()
        survivor.wait()


def test_close_after_the_guard_was_killed_returns():
    guard = OrphanGuard({})
    guard.process.kill()
    guard.process.wait()
    guard.close()
    assert guard.process.returncode == -signal.SIGKILL


def test_the_guard_outlives_sigterm_to_its_group_until_its_pipe_closes():
    core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    guard = OrphanGuard({core.pid: start_time(core.pid)})
    assert wait_until(lambda: _ignores_sigterm(guard.process.pid), timeout_s=30)
    os.kill(guard.process.pid, signal.SIGTERM)
    time.sleep(0.2)
    assert guard.process.poll() is None
    assert core.poll() is None
    guard.process.stdin.close()  # as when the stub dies
    assert core.wait(timeout=5) == -signal.SIGTERM


@pytest.mark.parametrize("pid", [0, 2**22 + 1])
def test_no_such_process_has_no_start_time(pid):
    assert start_time(pid) is None
