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

from reranker_client import AsyncRerankClient

from .errors import ApiError, handle_api_error, handle_http_error, handle_schema_error
from .routes import cohere, health, vllm
from .service import Reranker
from .settings import Settings


def _client(settings: Settings) -> AsyncRerankClient:
    return AsyncRerankClient(
        settings.triton_grpc_url,
        protocol="grpc",
        model_name=settings.triton_model,
        max_concurrency=settings.max_concurrency,
        max_retries=settings.max_retries,
        backoff_s=settings.backoff_s,
        timeout_s=settings.timeout_s,
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
        description="Cohere (v1, v2), vLLM, Jina and TEI rerank APIs in front of the Triton `reranker` ensemble "
        "(vLLM, calibrated scores). Scores are calibrated relevance probabilities: a threshold keeps its meaning "
        "across models.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    for router in (cohere.router, vllm.router, health.router):
        app.include_router(router)
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
            for path in ("/v1/rerank", "/v2/rerank"):
                del spec["paths"][path]["post"]["responses"]["422"]
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
