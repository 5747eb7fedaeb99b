"""The FastAPI app: the routers of gateway.routes, the error handlers of gateway.errors, and the OpenAPI spec at
`/openapi.json`.

It is a Triton client only: every call goes to the `reranker` ensemble over gRPC through `AsyncRerankClient`
(splitting lists longer than the server's own limit, merging, retrying UNAVAILABLE).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException as StarletteHTTPException

from tritonclient.grpc import KeepAliveOptions
from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE

from reranker_client import AsyncRerankClient

from .errors import ApiError, handle_api_error, handle_http_error, handle_schema_error
from .guard import Guard
from .routes import cohere, health, score, vllm
from .service import Reranker
from .settings import Settings


# gRPC waits up to 120 s (1 s growing by 1.6x) between attempts to reconnect a channel whose server went away, so
# a gateway stayed 503 for 15-20 s after Triton came back; an attempt at least every second ends that within ~1 s.
RECONNECT_BACKOFF_MS = 1000


def channel_args() -> list[tuple[str, object]]:
    """tritonclient's own channel options (message sizes, keepalive) with a short reconnect backoff."""
    keepalive = KeepAliveOptions()
    return [
        ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
        ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
        ("grpc.keepalive_time_ms", keepalive.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keepalive.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", keepalive.keepalive_permit_without_calls),
        ("grpc.http2.max_pings_without_data", keepalive.http2_max_pings_without_data),
        ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
        ("grpc.min_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
        ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
    ]


def _client(settings: Settings) -> AsyncRerankClient:
    return AsyncRerankClient(
        settings.triton_grpc_url,
        protocol="grpc",
        model_name=settings.triton_model,
        max_concurrency=settings.max_concurrency,
        max_retries=settings.max_retries,
        backoff_s=settings.backoff_s,
        timeout_s=settings.timeout_s,
        channel_args=channel_args(),
    )


def create_app(settings: Settings | None = None, client: AsyncRerankClient | None = None) -> FastAPI:
    """The app; `client` replaces the one made from `settings` at start-up (tests)."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.reranker = Reranker(settings, client or _client(settings))
        try:
            yield
        finally:
            if client is None:
                await app.state.reranker.client.close()

    app = FastAPI(
        title="reranker gateway",
        version="0.2.0",
        description="Cohere (v1, v2), vLLM (rerank and score), Jina and TEI rerank APIs in front of the Triton "
        "`reranker` ensemble (vLLM, calibrated scores). Scores are calibrated relevance probabilities: a threshold keeps its meaning "
        "across models.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    for router in (cohere.router, vllm.router, score.router, health.router):
        app.include_router(router)
    app.add_middleware(Guard, settings=settings)
    app.add_exception_handler(ApiError, handle_api_error)
    app.add_exception_handler(RequestValidationError, handle_schema_error)
    app.add_exception_handler(StarletteHTTPException, handle_http_error)

    def openapi() -> dict:
        """FastAPI's spec, with the served model names as the enum of the request's `model` and the schema-error
        status these APIs use (400, not FastAPI's 422)."""
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            model = spec["components"]["schemas"]["RerankRequest"]["properties"]["model"]
            model["anyOf"] = [{"type": "string", "enum": list(settings.models)}, {"type": "null"}]
            for path in ("/v1/rerank", "/v2/rerank", "/score", "/v1/score"):
                del spec["paths"][path]["post"]["responses"]["422"]
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
