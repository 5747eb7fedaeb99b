"""The errors a step answers a request with: each carries its kind (contract.ErrorKind), which
`triton_io.error_response` turns into a Triton status and the tag that opens the message."""

from __future__ import annotations

from typing import ClassVar

from .contract import ErrorKind, ServerError


class StepError(Exception):
    """A request's failure as a step reports it; `reason` is its label in reranker_rejected_requests_total
    (python_backends/prometheus.py)."""

    kind: ClassVar[ErrorKind]
    reason: ClassVar[str]

    def server_error(self) -> ServerError:
        return ServerError(self.kind, str(self))


class InvalidRequest(StepError, ValueError):
    """The request breaks the tensor contract or a configured limit: the client's to fix (INVALID_ARG). `field` is
    the input it is about, as the message names it at its start (`DOCUMENTS[3]`, `QUERY`)."""

    kind = ErrorKind.INVALID
    reason = "invalid"

    def __init__(self, message: str, field: str | None = None) -> None:
        if field is not None and not message.startswith(field):
            raise ValueError(f"an input error's message starts with the input's name {field!r}: {message!r}")
        super().__init__(message)
        self.field = field

    def server_error(self) -> ServerError:
        if self.field is None:
            return ServerError(self.kind, str(self))
        name, _, index = self.field.partition("[")
        return ServerError(self.kind, str(self), name, int(index.rstrip("]")) if index else None)


class Overloaded(StepError, RuntimeError):
    """The request is valid but the step's work budget is spent: the client should retry later (UNAVAILABLE)."""

    kind = ErrorKind.OVERLOADED
    reason = "work_budget"
