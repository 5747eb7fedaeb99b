"""Answering engine requests through Triton response senders, from a thread of their own.

`execute` returns before vLLM has scored anything, so each request is answered later with exactly one final
response. Sending is a blocking IPC call to the Triton server; it runs here, not on vLLM's event loop, which
would otherwise stall every request in flight while one response is written (vllm_backend does the same).
Each request handed to vLLM is timed from hand-over to its answer (`EngineMetrics`).
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import CancelledError, Future
from typing import Any

import numpy as np

from ..triton_io import error_response
from .answer_metrics import EngineMetrics
from .runtime import EngineDead


def engine_error(pb_utils: Any, exc: BaseException) -> Any:
    """The response for a failed request: one Triton status per kind of failure."""
    errors = pb_utils.TritonError
    if isinstance(exc, CancelledError):
        return pb_utils.InferenceResponse(error=errors("request cancelled", getattr(errors, "CANCELLED", errors.UNAVAILABLE)))
    if isinstance(exc, EngineDead):
        return pb_utils.InferenceResponse(error=errors(str(exc), errors.UNAVAILABLE))
    return error_response(pb_utils, exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))


class ReplyThread:
    """Sends the final response of each finished request; `close` returns once every queued reply is sent."""

    def __init__(self, pb_utils: Any, output_name: str, metrics: EngineMetrics) -> None:
        self._pb = pb_utils
        self._output = output_name
        self._metrics = metrics
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
        while (item := self._queue.get()) is not None:
            sender, outcome, seconds = item
            response = self._response(outcome)
            sender.send(response, flags=self._pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            if seconds is not None:
                self._metrics.record(not response.has_error(), seconds)

    def _response(self, outcome: Future | BaseException) -> Any:
        if isinstance(outcome, BaseException):
            return engine_error(self._pb, outcome)
        try:
            scores: np.ndarray = outcome.result()
        except BaseException as exc:  # noqa: BLE001 - every failure is this request's answer
            return engine_error(self._pb, exc)
        return self._pb.InferenceResponse(output_tensors=[self._pb.Tensor(self._output, scores[None, :].astype(np.float32))])

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)
