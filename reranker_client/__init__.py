"""Python clients of the `reranker` Triton ensemble (HTTP or gRPC, via tritonclient): `RerankClient` (sync)
and `AsyncRerankClient` (asyncio). Both split long candidate lists into concurrent requests, merge them,
and retry UNAVAILABLE answers with backoff."""

from .aio import AsyncRerankClient
from .client import RerankClient
from .core import (
    DEFAULT_MAX_DOCUMENTS_PER_REQUEST,
    CalibrationChangedError,
    RerankResponse,
    RerankResult,
    RetryPolicy,
    build_inputs,
    is_retryable,
    parse_response,
)

__all__ = [
    "DEFAULT_MAX_DOCUMENTS_PER_REQUEST",
    "AsyncRerankClient",
    "CalibrationChangedError",
    "RerankClient",
    "RerankResponse",
    "RerankResult",
    "RetryPolicy",
    "build_inputs",
    "is_retryable",
    "parse_response",
]
