"""asyncio client of the `reranker` ensemble: `tritonclient.grpc.aio` or `tritonclient.http.aio`.

    async with AsyncRerankClient("localhost:8001", protocol="grpc") as client:
        response = await client.rerank(query, documents, top_n=10)

Same arguments, splitting, merging and retries as `RerankClient`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from python_backends.contract import RequestLimits, limit_models

from .merging import merge
from .options import MODEL_NAME, RerankClientBase, chunk_errors
from .planning import Chunk, RerankPlan
from .results import RerankResponse
from .retry import call_with_retry_async
from .wire import ParsedResponse, parse_result


class AsyncRerankClient(RerankClientBase[Awaitable[RerankResponse]]):
    """One aio tritonclient per instance (gRPC multiplexes its channel; HTTP keeps a connection pool); the
    requests of a split call run concurrently, at most `max_concurrency` at a time."""

    asynchronous = True

    def __init__(
        self,
        url: str,
        protocol: str = "grpc",
        model_name: str = MODEL_NAME,
        *,
        channel_args: list[tuple[str, object]] | None = None,
        **options: Any,
    ) -> None:
        """`options`: RerankClientBase's keyword arguments. `channel_args` (gRPC only) replace tritonclient's channel
        options as a whole (its message sizes and keepalive among them)."""
        super().__init__(url, protocol, model_name, **options)
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        if protocol == "http" and self.timeout_s is not None:
            self.client = self.module.InferenceServerClient(url, conn_timeout=self.timeout_s)
        elif protocol == "grpc" and channel_args is not None:
            self.client = self.module.InferenceServerClient(url, channel_args=channel_args)
        else:
            self.client = self.module.InferenceServerClient(url)

    async def limits(self) -> RequestLimits:
        """The server's request limits, read from the configs of the ensemble's preprocess step and engine once and
        remembered."""
        if self._limits is None:
            preprocess, engine = limit_models(await self._config(self.model_name))
            self._limits = RequestLimits.from_model_configs(await self._config(preprocess), await self._config(engine))
        return self._limits

    async def _config(self, model_name: str) -> dict[str, Any]:
        return await call_with_retry_async(lambda: self.client.get_model_config(**self._config_kwargs(model_name)),
                                           self.retry, self._sleep)

    async def _infer(self, plan: RerankPlan, chunk: Chunk, limit: asyncio.Semaphore) -> ParsedResponse:
        inputs, outputs, kwargs = self._request(plan, chunk)

        async def once() -> Any:
            async with limit:
                return await self.client.infer(self.model_name, inputs, outputs=outputs, **kwargs)

        with chunk_errors(plan, chunk):
            return parse_result(await call_with_retry_async(once, self.retry, self._sleep), plan.split)

    async def _rerank(self, plan_for: Callable[[int], RerankPlan], return_documents: bool) -> RerankResponse:
        plan = plan_for(self._split_at(await self.limits()))
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
