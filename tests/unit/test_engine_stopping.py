"""The engine step's drain on a stop (python_backends/engine/stopping.py): what it refuses when, and the SIGTERM
watch that starts it, in a process of its own (a SIGTERM handler in the test process would outlive the test)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from python_backends.contract import ErrorKind
from python_backends.engine.stopping import Drain, ServerStopping
from tests.support.triton_server import ROOT


def test_a_drain_refuses_new_work_from_its_start_and_work_in_flight_once_its_time_is_out():
    drain = Drain(timeout_s=0.2)
    drain.refuse_new()
    drain.check_in_flight()  # nothing before the stop
    drain.begin()
    with pytest.raises(ServerStopping) as refused:
        drain.refuse_new()
    assert str(refused.value) == "the server is stopping: retry on another replica"
    assert (refused.value.kind, refused.value.reason) == (ErrorKind.UNAVAILABLE, "stopping")
    drain.check_in_flight()  # within the drain
    time.sleep(0.25)
    with pytest.raises(ServerStopping) as given_up:
        drain.check_in_flight()
    assert str(given_up.value) == ("the server is stopping and this request was not scored within its drain (0 s): "
                                   "retry on another replica")


def test_a_second_signal_does_not_restart_the_drain():
    drain = Drain(timeout_s=5)
    drain.begin()
    first = drain.since
    drain.begin()
    assert drain.since == first


# The engine's loop in a thread of its own, the watch set up from the main thread as Triton's `initialize` runs, a
# SIGTERM to the process itself: the callback runs on the loop while the main thread sleeps in C (as a stub's main
# thread waits for Triton's next message), and the process lives on. Then the same from another thread: not watched.
WATCHED = r"""
import asyncio, os, signal, threading, time
from python_backends.engine.stopping import StopSignal
loop = asyncio.new_event_loop()
threading.Thread(target=loop.run_forever, daemon=True).start()
stopped = threading.Event()
watch = StopSignal(loop, lambda: stopped.set() if threading.current_thread() is not threading.main_thread() else None)
time.sleep(0.2)
sent = time.monotonic()
os.kill(os.getpid(), signal.SIGTERM)
print("watching", watch.watching, "stopped", stopped.wait(5), "within", time.monotonic() - sent < 1)
elsewhere = []
worker = threading.Thread(target=lambda: elsewhere.append(StopSignal(loop, lambda: None).watching))
worker.start()
worker.join()
print("from another thread", elsewhere)
"""


def test_sigterm_reaches_the_engines_loop_and_the_process_lives_on():
    run = subprocess.run([sys.executable, "-c", WATCHED], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["watching True stopped True within True", "from another thread [False]"]
