"""Synchronous client of the tensor contract (python_backends.contract; HTTP or gRPC, via tritonclient).

`RerankClient("localhost:8001", protocol="grpc").rerank(query, documents, top_n=10)` returns results
best first with index, relevance_score (calibrated), raw_score and, on request, the document.
A candidate list longer than the server's `max_documents` is sent as several concurrent requests and merged;
UNAVAILABLE answers (a full queue, a server going away) are retried with backoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from python_backends.contract import RequestLimits, limit_models

from .merging import merge
from .options import MODEL_NAME, RerankClientBase, chunk_errors
from .planning import Chunk, RerankPlan
from .results import RerankResponse
from .retry import call_with_retry
from .wire import ParsedResponse, parse_result


class RerankClient(RerankClientBase[RerankResponse]):
    """Synchronous client: one call = one query and all its documents, split into requests of at most
    `max_documents_per_request` (default: the server's limit) that run `max_concurrency` at a time.

    gRPC shares one thread-safe tritonclient; HTTP's tritonclient is not thread-safe, so each worker
    thread gets its own.
    """

    asynchronous = False

    def __init__(self, url: str, protocol: str = "grpc", model_name: str = MODEL_NAME, **options: Any) -> None:
        """`options`: RerankClientBase's keyword arguments."""
        super().__init__(url, protocol, model_name, **options)
        self._sleep: Callable[[float], None] = time.sleep
        self._lock = threading.Lock()
        self._thread_clients = threading.local()
        self._extra_clients: list[Any] = []
        self._pool: ThreadPoolExecutor | None = None
        self.client = self._new_client()

    def _new_client(self) -> Any:
        if self.protocol == "http" and self.timeout_s is not None:
            return self.module.InferenceServerClient(
                self.url, connection_timeout=self.timeout_s, network_timeout=self.timeout_s
            )
        return self.module.InferenceServerClient(self.url)

    def _client_for(self, pooled: bool) -> Any:
        """The shared client, or for HTTP in a worker thread that thread's own."""
        if self.protocol == "grpc" or not pooled:
            return self.client
        client = getattr(self._thread_clients, "client", None)
        if client is None:
            client = self._thread_clients.client = self._new_client()
            with self._lock:
                self._extra_clients.append(client)
        return client

    def limits(self) -> RequestLimits:
        """The server's request limits, read from the configs of the ensemble's preprocess step and engine once and
        remembered."""
        if self._limits is None:
            preprocess, engine = limit_models(self._config(self.model_name))
            self._limits = RequestLimits.from_model_configs(self._config(preprocess), self._config(engine))
        return self._limits

    def _config(self, model_name: str) -> dict[str, Any]:
        return call_with_retry(lambda: self.client.get_model_config(**self._config_kwargs(model_name)), self.retry,
                               self._sleep)

    def _infer(self, plan: RerankPlan, chunk: Chunk, pooled: bool = False) -> ParsedResponse:
        inputs, outputs, kwargs = self._request(plan, chunk)

        def once() -> Any:
            return self._client_for(pooled).infer(self.model_name, inputs, outputs=outputs, **kwargs)

        with chunk_errors(plan, chunk):
            return parse_result(call_with_retry(once, self.retry, self._sleep), plan.split)

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="rerank")
            return self._pool

    def _rerank(self, plan_for: Callable[[int], RerankPlan], return_documents: bool) -> RerankResponse:
        plan = plan_for(self._split_at(self.limits()))
        if not plan.split:
            return merge(plan, [self._infer(plan, plan.chunks[0])], return_documents)
        futures = [self._executor().submit(self._infer, plan, chunk, True) for chunk in plan.chunks]
        parsed = [future.result() for future in futures]  # the first failed chunk's error, in chunk order
        return merge(plan, parsed, return_documents)

    def is_ready(self) -> bool:
        """Server ready and the model loaded."""
        try:
            return bool(self.client.is_server_ready() and self.client.is_model_ready(self.model_name))
        except Exception:
            return False

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            extra, self._extra_clients = self._extra_clients, []
        if pool is not None:
            pool.shutdown(wait=True)
        for client in [self.client, *extra]:
            client.close()

    def __enter__(self) -> RerankClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
