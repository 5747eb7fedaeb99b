"""Answering engine requests through Triton response senders, from a thread of their own.

`execute` returns before vLLM has scored anything, so each request is answered later with exactly one final
response. Sending is a blocking IPC call to the Triton server; it runs here, not on vLLM's event loop, which
would otherwise stall every request in flight while one response is written (vllm_backend does the same).
Each request handed to vLLM is timed from hand-over to its answer, and what vLLM holds is reported (`EngineMetrics`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from typing import Any

import numpy as np

from ..triton_io import error_response
from .metrics import EngineMetrics
from .deadline import ClientGone, DeadlineExceeded
from .stopping import ServerStopping

REPORT_S = 1.0  # how often an idle reply thread reports what vLLM holds
IDLE = object()


def engine_error(pb_utils: Any, exc: BaseException) -> Any:
    """The response for a failed request; a future cancelled by the engine step is a cancelled request."""
    return error_response(pb_utils, ClientGone("request cancelled") if isinstance(exc, CancelledError) else exc)


def outcome(exc: BaseException | None) -> str:
    """The `outcome` label of a request answered after its hand-over to vLLM (EngineMetrics.OUTCOMES)."""
    if exc is None:
        return "ok"
    return exc.reason if isinstance(exc, (DeadlineExceeded, ClientGone, ServerStopping)) else "error"


class ReplyThread:
    """Sends the final response of each finished request; `close` returns once every queued reply is sent."""

    def __init__(self, pb_utils: Any, outputs: Callable[[np.ndarray], dict[str, np.ndarray]], metrics: EngineMetrics,
                 held: Callable[[], int]) -> None:
        """`outputs(scores)`: the output tensors of one answered request, by name. `held()`: the sequences vLLM holds
        now, reported after each answer and every REPORT_S when idle."""
        self._pb = pb_utils
        self._outputs = outputs
        self._metrics = metrics
        self._held = held
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="rerank-engine-replies", daemon=True)
        self._thread.start()

    def send_error(self, sender: Any, exc: BaseException) -> None:
        """A request refused before vLLM saw it (not timed)."""
        self._queue.put((sender, exc, None))

    def send_when_done(self, sender: Any, future: Future) -> None:
        handed_over = time.monotonic()
        future.add_done_callback(lambda done: self._queue.put((sender, done, time.monotonic() - handed_over)))

    def _run(self) -> None:
        while (item := self._next()) is not None:
            self._metrics.held(self._held())
            if item is IDLE:
                continue
            sender, result, seconds = item
            failure = result if isinstance(result, BaseException) else _failure(result)
            if failure is None:
                scores: np.ndarray = result.result()
                response = self._pb.InferenceResponse(output_tensors=[
                    self._pb.Tensor(name, array) for name, array in self._outputs(scores).items()])
            else:
                response = engine_error(self._pb, failure)
            if seconds is not None:  # counted before it is answered: a client holding its answer finds it counted
                self._metrics.record(outcome(failure), seconds)
            sender.send(response, flags=self._pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _next(self) -> Any:
        try:
            return self._queue.get(timeout=REPORT_S)
        except queue.Empty:
            return IDLE

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)


def _failure(done: Future) -> BaseException | None:
    try:
        return done.exception()
    except CancelledError as exc:  # the future itself was cancelled
        return exc
