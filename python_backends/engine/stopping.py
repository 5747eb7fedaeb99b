"""A stop that ends within Triton's exit timeout: the engine step drains when its server is told to stop.

On SIGTERM Triton stops taking requests and waits `--exit-timeout-secs` for the ones in flight; past it, it exits
with them unanswered (on Triton 2.51, sometimes by aborting inside `malloc` and hanging). The engine step holds the
slow part of that work: requests in vLLM, and requests waiting for in-flight room, which on a busy CPU server can be
minutes of it. So once the stop is signalled the step refuses every request that has not reached vLLM (UNAVAILABLE,
`ServerStopping`: another replica can take it), gives those in vLLM `drain_timeout_seconds` (set below the exit
timeout) and then gives them up with the same answer. Triton then finds nothing in flight and unloads the models.

Triton's Python stub ignores SIGTERM (its handler does nothing): Triton alone decides when the models stop, and it
tells a Python model nothing until `finalize`, after the in-flight requests. So a stop sends SIGTERM to the stubs as
well as to tritonserver (`scripts/stop_server.sh`, the tests, the Helm chart's preStop hook), but not to vLLM's
processes, whose engine core would abort what it holds; a SIGTERM to tritonserver alone leaves the step as before,
bounded by the exit timeout only.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..contract import ErrorKind
from ..errors import StepError

log = logging.getLogger(__name__)


class ServerStopping(StepError, RuntimeError):
    """The server is stopping: the request was refused before vLLM saw it, or its work in vLLM given up at the end
    of the drain (UNAVAILABLE: another replica can answer it)."""

    kind = ErrorKind.UNAVAILABLE
    reason = "stopping"  # its label in reranker_rejected_requests_total and reranker_engine_requests_total


class Drain:
    """When the stop was signalled, and what that means for a request: `refuse_new` raises for one that has not
    reached vLLM, `check_in_flight` for one in vLLM once `timeout_s` has passed since."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.since: float | None = None

    def begin(self) -> None:
        if self.since is None:
            self.since = time.monotonic()
            log.warning("stopping: requests not yet in vLLM are refused, those in it have %.0f s", self.timeout_s)

    def refuse_new(self) -> None:
        if self.since is not None:
            raise ServerStopping("the server is stopping: retry on another replica")

    def check_in_flight(self) -> None:
        if self.since is not None and time.monotonic() - self.since > self.timeout_s:
            raise ServerStopping(f"the server is stopping and this request was not scored within its drain "
                                 f"({self.timeout_s:.0f} s): retry on another replica")


class StopSignal:
    """Calls `on_stop` on `loop` when this process receives SIGTERM. Python runs a signal's handler only once the
    main thread runs Python code, which a stub's main thread does only inside a Triton call; the signal's number,
    written at once to a wakeup socket by Python's C-level handler, is what wakes the engine's loop. Set up from the
    main thread (Triton calls `initialize` there); elsewhere `watching` is False and a stop is bounded by Triton's
    exit timeout alone."""

    def __init__(self, loop: Any, on_stop: Callable[[], None]) -> None:
        self.watching = threading.current_thread() is threading.main_thread()
        if not self.watching:
            log.warning("SIGTERM not watched (not on the main thread): a stop does not drain the engine step")
            return
        self._receive, self._send = socket.socketpair()
        for end in (self._receive, self._send):
            end.setblocking(False)
        signal.signal(signal.SIGTERM, _keep_running)
        signal.set_wakeup_fd(self._send.fileno(), warn_on_full_buffer=False)
        self._on_stop = on_stop
        loop.call_soon_threadsafe(loop.add_reader, self._receive.fileno(), self._readable)

    def _readable(self) -> None:
        if signal.SIGTERM in self._receive.recv(64):  # the numbers of the signals Python's handlers took
            self._on_stop()


def _keep_running(signum: int, frame: Any) -> None:
    """Python's handler for SIGTERM, in place of the stub's own, which ignores it too: Triton stops the model."""
