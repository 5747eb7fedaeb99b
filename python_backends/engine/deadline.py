"""When a request's answer stops being wanted: its timeout passed, or its client is gone.

Triton's schedule-policy `timeout` (microseconds, the request parameter `tritonclient`'s `infer(timeout=...)` sets;
the gateway sets it from its own) reaches every step of the ensemble, but Triton applies it only in a queue whose
policy allows it, and the steps' queues have none (docs/OPERATIONS.md). A running step is the model's to stop
("Triton will take a model-specific action such as terminating the request"): the engine step counts it from when it
receives the request and aborts the request's work in vLLM once it passes. Triton's ensemble does not pass a client's
cancellation to a running step, so `is_cancelled` answers only for requests sent to `rerank_engine` directly; through
the ensemble the timeout is what ends abandoned work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..contract import ErrorKind
from ..errors import StepError


class DeadlineExceeded(StepError, RuntimeError):
    """The request's timeout passed before it was answered; its work in vLLM was aborted (UNAVAILABLE, as Triton
    answers a request whose timeout passes in its queue)."""

    kind = ErrorKind.DEADLINE
    reason = "deadline"  # its label in reranker_rejected_requests_total and reranker_engine_requests_total


class ClientGone(StepError, RuntimeError):
    """Triton reports the request cancelled: its client left (CANCELLED)."""

    kind = ErrorKind.CANCELLED
    reason = "cancelled"


@dataclass(frozen=True)
class Deadline:
    timeout_s: float | None = None  # None: the request set no timeout
    is_cancelled: Callable[[], bool] = lambda: False
    received: float = field(default_factory=time.monotonic)

    @classmethod
    def from_request(cls, timeout_us: int, is_cancelled: Callable[[], bool]) -> Deadline:
        """From Triton's request timeout (0: none) and the response sender's `is_cancelled`."""
        return cls(timeout_us / 1e6 if timeout_us > 0 else None, is_cancelled)

    def check(self) -> None:
        """Raise `DeadlineExceeded` or `ClientGone` once the answer is no longer wanted."""
        if self.timeout_s is not None and time.monotonic() - self.received >= self.timeout_s:
            raise DeadlineExceeded(f"the request's timeout passed in rerank_engine ({self.timeout_s * 1000:.0f} ms); its work "
                                   "was aborted")
        if self.is_cancelled():
            raise ClientGone("request cancelled: its client left")
