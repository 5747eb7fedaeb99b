"""What the sync and async clients share: where to send, how to split, how to retry, and the server's limits."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, Generic, TypeVar

from tritonclient.utils import InferenceServerException

from python_backends.contract import MODEL_NAME, RequestLimits

from .merging import rebase_error
from .planning import Chunk, RerankPlan, plan_rerank
from .retry import RetryPolicy
from .wire import protocol_module, requested_outputs

__all__ = ["MODEL_NAME", "RerankClientBase"]

Reply = TypeVar("Reply")  # what `rerank` returns: a RerankResponse, or for the asyncio client an awaitable of one


class RerankClientBase(Generic[Reply]):
    """`max_documents_per_request=None` (the default) splits at the server's own `max_documents`, learned from
    its model configurations on the first call (`limits`: the ensemble's, then its preprocess step's and its
    engine's), so the client holds no copy of a server limit.

    The sync and async clients take these same arguments and offer the same `rerank`; each says which tritonclient
    flavour it drives and how it runs a call's requests (`_rerank`)."""

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

    def rerank(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
        instruction: str | None = None,
        return_documents: bool = False,
        max_tokens_per_doc: int | None = None,
    ) -> Reply:
        """Results for `documents`, best first (`top_n` of them when given), each with its index in `documents`,
        calibrated relevance_score and raw_score, and the document itself when `return_documents`."""
        plan_for = partial(
            plan_rerank, query, documents, top_n=top_n, instruction=instruction, max_tokens_per_doc=max_tokens_per_doc
        )
        return self._rerank(plan_for, return_documents)

    def _rerank(self, plan_for: Callable[[int], RerankPlan], return_documents: bool) -> Reply:
        """Run one call: `plan_for(max_documents_per_request)` plans it once the server's limit is known."""
        raise NotImplementedError

    def _config_kwargs(self, model_name: str) -> dict[str, Any]:
        """Arguments of `get_model_config`: gRPC answers a protobuf unless asked for JSON."""
        return {"model_name": model_name, **({"as_json": True} if self.protocol == "grpc" else {})}

    def _split_at(self, limits: RequestLimits) -> int:
        if self.max_documents_per_request is None:
            return limits.max_documents
        return min(self.max_documents_per_request, limits.max_documents)

    def _request(self, plan: RerankPlan, chunk: Chunk) -> tuple[list[Any], list[Any], dict[str, Any]]:
        """One chunk's infer arguments: its input tensors, the outputs to ask for, gRPC's per-call timeout and the
        request's Triton `timeout` (microseconds): the engine step aborts a request's work once it passes, so a call
        given up on here leaves nothing running on the server."""
        inputs = plan.inputs(self.module, chunk)
        outputs = requested_outputs(self.module, plan.split)
        kwargs: dict[str, Any] = {"timeout": int(self.timeout_s * 1e6)} if self.timeout_s else {}
        if self.protocol == "grpc" and self.timeout_s:
            kwargs["client_timeout"] = self.timeout_s
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
