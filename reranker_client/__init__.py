"""Python clients of the `reranker` Triton ensemble (HTTP or gRPC, via tritonclient): `RerankClient` (sync)
and `AsyncRerankClient` (asyncio). Both split candidate lists longer than the server's limit into concurrent
requests, merge them, and retry UNAVAILABLE answers with backoff.

Modules, one job each: `wire` (one request's tensors and its parsed answer), `planning` (one request or
balanced chunks), `merging` (the caller's response from the chunks'), `retry` (which errors, how long to
wait), `results` (what a call returns), `options` (shared settings and the server's limits), `client` and
`aio` (the sync and asyncio I/O), `healthcheck` (a deep probe)."""

from .aio import AsyncRerankClient
from .client import RerankClient
from .merging import CalibrationChangedError
from .results import RerankResponse, RerankResult
from .retry import RetryPolicy, is_retryable
from .wire import build_inputs, protocol_module

__all__ = [
    "AsyncRerankClient",
    "CalibrationChangedError",
    "RerankClient",
    "RerankResponse",
    "RerankResult",
    "RetryPolicy",
    "build_inputs",
    "is_retryable",
    "protocol_module",
]
