"""What the sync and async clients share: where to send, how to split, how to retry, and the server's limits."""

from __future__ import annotations

from typing import Any

from python_backends.contract import LIMITS_MODEL_NAME, MODEL_NAME, RequestLimits

from .retry import RetryPolicy
from .wire import protocol_module

__all__ = ["MODEL_NAME", "ClientOptions"]


class ClientOptions:
    """`max_documents_per_request=None` (the default) splits at the server's own `max_documents`, learned from
    its model configuration on the first call (`limits`), so the client holds no copy of a server limit."""

    def __init__(
        self,
        url: str,
        protocol: str,
        model_name: str,
        *,
        max_documents_per_request: int | None,
        max_concurrency: int,
        max_retries: int,
        backoff_s: float,
        max_backoff_s: float,
        timeout_s: float | None,
        asynchronous: bool,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if max_documents_per_request is not None and max_documents_per_request < 1:
            raise ValueError(f"max_documents_per_request must be >= 1, got {max_documents_per_request}")
        self.url = url
        self.protocol = protocol
        self.module = protocol_module(protocol, asynchronous=asynchronous)
        self.model_name = model_name
        self.max_documents_per_request = max_documents_per_request
        self.max_concurrency = max_concurrency
        self.retry = RetryPolicy(max_retries, backoff_s, max_backoff_s)
        self.timeout_s = timeout_s
        self._limits: RequestLimits | None = None

    def _config_kwargs(self) -> dict[str, Any]:
        """Arguments of `get_model_config` for the limits model: gRPC answers a protobuf unless asked for JSON."""
        return {"model_name": LIMITS_MODEL_NAME, **({"as_json": True} if self.protocol == "grpc" else {})}

    def _remember(self, config: dict[str, Any]) -> RequestLimits:
        self._limits = RequestLimits.from_model_config(config)
        return self._limits

    def _split_at(self, limits: RequestLimits) -> int:
        if self.max_documents_per_request is None:
            return limits.max_documents
        return min(self.max_documents_per_request, limits.max_documents)

