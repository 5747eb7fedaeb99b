"""The engine step's orphan guard: the processes a stub started end when the stub is killed, and nothing else does."""

from __future__ import annotations

import os
import signal
import site
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from python_backends.engine.orphan_guard import (
    SERVER_POLL_S, STUB_GRACE_S, OrphanGuard, alive, children, end, remove_unmapped, start_time,
)
from tests.support.triton_server import ROOT
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


@pytest.mark.parametrize("ending", ["close", "the stub's death"])
def test_the_sockets_directory_goes_when_the_guard_exits(tmp_path, ending):
    ipc_dir = tmp_path / "vllm-ipc"
    ipc_dir.mkdir()
    (ipc_dir / "engine-socket").touch()
    guard = OrphanGuard({}, str(ipc_dir))
    if ending == "close":
        guard.close()
    else:
        guard.process.stdin.close()  # as when the stub dies
        guard.process.wait(timeout=5)
    assert not ipc_dir.exists()


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


# Stands in for a server whose stub is stuck: it starts the stub (which ignores SIGTERM, as a stub waiting on its dead
# server's shared memory does), and the stub starts its engine core and the guard; the server prints the three pids.
SERVER = textwrap.dedent("""
    import subprocess, sys
    stub = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True)
    print(stub.pid, stub.stdout.readline().strip(), flush=True)
    stub.wait()
""")
STUCK_STUB = STUB.replace(  # deaf to SIGTERM once its engine core runs (which must not inherit that)
    "\ntime.sleep(300)\n", "\nimport signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)\n")


def test_a_stub_whose_server_died_is_killed_after_its_grace_and_its_engine_core_ended():
    server = subprocess.Popen([sys.executable, "-c", SERVER, STUCK_STUB], stdout=subprocess.PIPE, text=True)
    stub, core, guard = map(int, server.stdout.readline().split())
    started = {pid: start_time(pid) for pid in (stub, core, guard)}
    server.kill()
    server.wait()  # reaped, as a supervisor or a shell reaps it
    killed = time.monotonic()
    assert wait_until(lambda: not alive(stub, started[stub]), timeout_s=STUB_GRACE_S + 5), "the stub still runs"
    assert time.monotonic() - killed >= STUB_GRACE_S - SERVER_POLL_S  # it had its grace to exit by itself
    assert wait_until(lambda: not alive(core, started[core]), timeout_s=5), "the engine core still runs"
    assert wait_until(lambda: not alive(guard, started[guard]), timeout_s=5), "the guard did not exit"


def test_a_live_server_leaves_its_stub_and_engine_core_alone():
    server = subprocess.Popen([sys.executable, "-c", SERVER, STUCK_STUB], stdout=subprocess.PIPE, text=True)
    stub, core, guard = map(int, server.stdout.readline().split())
    try:
        time.sleep(STUB_GRACE_S + 2 * SERVER_POLL_S)
        assert all(_running(pid) for pid in (stub, core, guard))
    finally:
        for pid in (core, stub):
            os.kill(pid, signal.SIGKILL)
        server.wait()


def test_only_the_unmapped_files_of_the_prefix_are_removed(tmp_path):
    for name in ("triton_reranker_8000_a", "triton_reranker_8000_b", "triton_reranker_8001_c"):
        (tmp_path / name).write_bytes(b"\0" * 64)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'rb'); print('held', "
                               "flush=True); time.sleep(300)", str(tmp_path / "triton_reranker_8000_b")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert remove_unmapped("triton_reranker_8000_", tmp_path) == ["triton_reranker_8000_a"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["triton_reranker_8000_b", "triton_reranker_8001_c"]
    finally:
        holder.kill()
        holder.wait()


# Run by a link to Python named triton_python_backend_stub, it looks like a Python-backend stub of region argv[1] to
# the guard (its command line's first word ends in that name, its third is the region) and maps that region. The
# engine's starts its engine core and the guard and then ignores SIGTERM, as a stub of a dead server does; another
# step's exits by itself LATE_S after its server is gone, later than the guard's grace for its own stub.
FAKE_STUB = textwrap.dedent("""
    import mmap, os, signal, subprocess, sys, time
    from python_backends.engine.orphan_guard import OrphanGuard, children
    region, role = sys.argv[1], sys.argv[2]
    with open("/dev/shm/" + region, "w+b") as file:
        file.write(bytes(4096))
        file.flush()
        mapped = mmap.mmap(file.fileno(), 4096)
    if role == "engine":
        core = subprocess.Popen(["sleep", "300"])
        guard = OrphanGuard(children(os.getpid()))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(core.pid, guard.process.pid, flush=True)
        time.sleep(300)
    server = os.getppid()
    print("ready", flush=True)
    while os.getppid() == server:
        time.sleep(0.1)
    time.sleep(float(sys.argv[3]))
""")
LATE_S = STUB_GRACE_S + 2.0
TWO_STUBS = textwrap.dedent("""
    import subprocess, sys
    stub, script, prefix, late = sys.argv[1:5]
    engine = subprocess.Popen([stub, script, prefix + "engine", "engine"], stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([stub, script, prefix + "other", "other", late], stdout=subprocess.PIPE, text=True)
    print(engine.pid, engine.stdout.readline().strip(), other.pid, other.stdout.readline().strip(), flush=True)
    engine.wait()
""")


def test_a_dead_servers_regions_go_once_its_other_stubs_have_exited(tmp_path):
    """A killed server's stubs exit one by one, slowly on a busy host: the region of a step whose stub outlived the
    guard's grace for its own must go too, once that stub has exited (it stayed in /dev/shm when the guard swept
    at once: two regions of a killed server were left in a run of the test suite)."""
    script, prefix = tmp_path / "stub.py", f"triton_reranker_guardtest{os.getpid()}_"
    script.write_text(FAKE_STUB)
    stub = tmp_path / "triton_python_backend_stub"
    stub.symlink_to(sys.executable)  # run by its link, Python is outside its venv: the venv's packages by path
    packages = os.pathsep.join([str(ROOT), *site.getsitepackages()])
    server = subprocess.Popen([sys.executable, "-c", TWO_STUBS, str(stub), str(script), prefix, str(LATE_S)],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=packages))
    engine, core, guard, other, ready = server.stdout.readline().split()
    processes = {int(pid): start_time(int(pid)) for pid in (engine, core, guard, other)}
    regions = {prefix + "engine", prefix + "other"}
    try:
        assert ready == "ready" and {p.name for p in Path("/dev/shm").glob(prefix + "*")} == regions
        server.kill()
        server.wait()
        killed = time.monotonic()
        assert wait_until(lambda: not any(alive(pid, t) for pid, t in processes.items()), timeout_s=LATE_S + 15)
        assert time.monotonic() - killed >= LATE_S - SERVER_POLL_S  # the other stub did outlive the guard's grace
        assert wait_until(lambda: not list(Path("/dev/shm").glob(prefix + "*")), timeout_s=5), \
            sorted(p.name for p in Path("/dev/shm").glob(prefix + "*"))
    finally:
        for pid, started in processes.items():
            if started is not None and alive(pid, started):
                os.kill(pid, signal.SIGKILL)
        for path in Path("/dev/shm").glob(prefix + "*"):
            path.unlink()
