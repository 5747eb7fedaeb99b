"""A server killed with requests in flight leaves nothing behind: every process it started ends (the engine stub,
which waits on its dead server's shared memory deaf to SIGTERM, by the engine step's guard), no /dev/shm file of it
stays, and its ports are free for the next start (tests/deploy/test_quickstart.py starts servers on given ports)."""

from __future__ import annotations

import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from python_backends.engine.orphan_guard import GRACE_S, STUB_GRACE_S, alive, children, start_time
from tests.support.in_flight import in_flight_outcome
from tests.support.shared_memory import LEDGER
from tests.support.triton_server import group_pids, start_server
from tests.support.waiting import wait_until

IN_FLIGHT = 6  # half over HTTP, half over gRPC
CLIENT_DEADLINE_S = 5.0  # a request of the killed server fails at once; the deadline only bounds the test


def _bindable(port: int) -> bool:
    """As a server binds it (SO_REUSEADDR, as Triton's HTTP and gRPC servers set): refused only while a process listens
    on it, not for the closed connections' TIME_WAIT."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_server_killed_with_requests_in_flight_leaves_nothing_and_its_ports_free(tmp_path):
    server = start_server(tmp_path / "server.log")
    group = server.process.pid
    with ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
        futures = [pool.submit(in_flight_outcome, server, ("http", "grpc")[i % 2], CLIENT_DEADLINE_S)
                   for i in range(IN_FLIGHT)]
        time.sleep(1.0)
        LEDGER.sample()
        members = {pid: start_time(pid) for pid in group_pids(group) if pid != server.pid}
        os.kill(server.pid, signal.SIGKILL)
        server.process.wait()  # reaped, as its supervisor (a shell, systemd) reaps it
        killed = time.monotonic()
        outcomes = [f.result(timeout=CLIENT_DEADLINE_S + 30) for f in futures]
    assert len(members) >= 5, members  # three stubs, the engine core, the guard (and multiprocessing's tracker)
    assert wait_until(lambda: not any(alive(pid, started) for pid, started in members.items()),
                      timeout_s=STUB_GRACE_S + GRACE_S + 10), {pid: children(pid) for pid in members}
    print(f"every process of the killed server ended {time.monotonic() - killed:.1f} s after it;",
          "requests in flight:", [kind for kind, _ in outcomes])
    assert LEDGER.left_behind(group=group) == []
    # what held a port (a stub keeps the server's sockets it inherited) is gone: a server may bind them again
    assert [name for name, port in server.ports().items() if not _bindable(port)] == []
