"""What the sync and async clients share: where to send, how to split, how to retry, and the server's limits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tritonclient.utils import InferenceServerException

from python_backends.contract import LIMITS_MODEL_NAME, MODEL_NAME, RequestLimits

from .merging import rebase_error
from .planning import Chunk, RerankPlan
from .retry import RetryPolicy
from .wire import protocol_module, requested_outputs

__all__ = ["MODEL_NAME", "ClientOptions"]


class ClientOptions:
    """`max_documents_per_request=None` (the default) splits at the server's own `max_documents`, learned from
    its model configuration on the first call (`limits`), so the client holds no copy of a server limit.

    The sync and async clients take these same arguments; each says which tritonclient flavour it drives."""

    asynchronous: bool

    def __init__(
        self,
        url: str,
        protocol: str = "grpc",
        model_name: str = MODEL_NAME,
        *,
        max_documents_per_request: int | None = None,
        max_concurrency: int = 4,
        max_retries: int = 3,
        backoff_s: float = 0.1,
        max_backoff_s: float = 2.0,
        timeout_s: float | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if max_documents_per_request is not None and max_documents_per_request < 1:
            raise ValueError(f"max_documents_per_request must be >= 1, got {max_documents_per_request}")
        self.url = url
        self.protocol = protocol
        self.module = protocol_module(protocol, asynchronous=self.asynchronous)
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


    def _request(self, plan: RerankPlan, chunk: Chunk) -> tuple[list[Any], list[Any], dict[str, Any]]:
        """One chunk's infer arguments: its input tensors, the outputs to ask for, and gRPC's per-call timeout."""
        inputs = plan.inputs(self.module, chunk)
        outputs = requested_outputs(self.module, plan.split)
        kwargs = {"client_timeout": self.timeout_s} if self.protocol == "grpc" and self.timeout_s else {}
        return inputs, outputs, kwargs


@contextmanager
def chunk_errors(plan: RerankPlan, chunk: Chunk) -> Iterator[None]:
    """A split call's server error names documents by their index in the whole call, not in the chunk."""
    try:
        yield
    except InferenceServerException as error:
        if plan.split:
            raise rebase_error(error, chunk.offset) from error
        raise
