"""asyncio client of the `reranker` ensemble: `tritonclient.grpc.aio` or `tritonclient.http.aio`.

    async with AsyncRerankClient("localhost:8001", protocol="grpc") as client:
        response = await client.rerank(query, documents, top_n=10)

Same arguments, splitting, merging and retries as `RerankClient`; the pure parts live in
`reranker_client.core`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from tritonclient.utils import InferenceServerException

from .core import (
    DEFAULT_MAX_DOCUMENTS_PER_REQUEST,
    MODEL_NAME,
    Chunk,
    ClientOptions,
    ParsedResponse,
    RerankPlan,
    RerankResponse,
    RetryPolicy,
    merge,
    parse_result,
    plan_rerank,
    protocol_module,
    rebase_error,
    requested_outputs,
)

T = TypeVar("T")


async def call_with_retry_async(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    delays = policy.delays()
    while True:
        try:
            return await call()
        except Exception as error:
            delay = policy.next_delay(delays, error)
            if delay is None:
                raise
        await sleep(delay)


class AsyncRerankClient(ClientOptions):
    """One aio tritonclient per instance (gRPC multiplexes its channel; HTTP keeps a connection pool); the
    requests of a split call run concurrently, at most `max_concurrency` at a time."""

    def __init__(
        self,
        url: str,
        protocol: str = "grpc",
        model_name: str = MODEL_NAME,
        *,
        max_documents_per_request: int = DEFAULT_MAX_DOCUMENTS_PER_REQUEST,
        max_concurrency: int = 4,
        max_retries: int = 3,
        backoff_s: float = 0.1,
        max_backoff_s: float = 2.0,
        timeout_s: float | None = None,
    ) -> None:
        super().__init__(
            url, protocol, model_name, max_documents_per_request=max_documents_per_request,
            max_concurrency=max_concurrency, max_retries=max_retries, backoff_s=backoff_s,
            max_backoff_s=max_backoff_s, timeout_s=timeout_s, asynchronous=True,
        )
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        if protocol == "http" and timeout_s is not None:
            self.client = self.module.InferenceServerClient(url, conn_timeout=timeout_s)
        else:
            self.client = self.module.InferenceServerClient(url)

    async def _infer(self, plan: RerankPlan, chunk: Chunk, limit: asyncio.Semaphore) -> ParsedResponse:
        inputs = plan.inputs(self.module, chunk)
        outputs = requested_outputs(self.module)
        kwargs = {"client_timeout": self.timeout_s} if self.protocol == "grpc" and self.timeout_s else {}

        async def once() -> Any:
            async with limit:
                return await self.client.infer(self.model_name, inputs, outputs=outputs, **kwargs)

        try:
            return parse_result(await call_with_retry_async(once, self.retry, self._sleep))
        except InferenceServerException as error:
            if plan.split:
                raise rebase_error(error, chunk.offset) from error
            raise

    async def rerank(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
        instruction: str | None = None,
        return_documents: bool = False,
    ) -> RerankResponse:
        plan = plan_rerank(query, documents, top_n, instruction, self.max_documents_per_request)
        limit = asyncio.Semaphore(self.max_concurrency)
        outcomes = await asyncio.gather(
            *(self._infer(plan, chunk, limit) for chunk in plan.chunks), return_exceptions=True
        )
        for outcome in outcomes:  # the first failed chunk's error, in chunk order
            if isinstance(outcome, BaseException):
                raise outcome
        return merge(plan, outcomes, return_documents)

    async def is_ready(self) -> bool:
        """Server ready and the model loaded."""
        try:
            return bool(await self.client.is_server_ready() and await self.client.is_model_ready(self.model_name))
        except Exception:
            return False

    async def close(self) -> None:
        await self.client.close()

    async def __aenter__(self) -> AsyncRerankClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
