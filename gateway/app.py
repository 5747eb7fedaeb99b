"""The FastAPI app: the routers of gateway.routes, the error handlers of gateway.errors, and the OpenAPI spec at
`/openapi.json`.

It is a Triton client only: every call goes over gRPC through `AsyncRerankClient` (splitting lists longer than the
server's own limit, merging, retrying UNAVAILABLE) to the ensemble the body's `model` names: RERANK_MODEL (and its
aliases) or one of GATEWAY_MODELS. With GATEWAY_SHADOW_MODEL, a candidate gets a share of the default model's calls
off the request path (gateway.shadow), and GET /metrics exports the comparison.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from prometheus_client import CollectorRegistry
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException as StarletteHTTPException

from tritonclient.grpc import KeepAliveOptions
from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE
from tritonclient.utils import InferenceServerException

from python_backends.contract import ErrorKind
from reranker_client import AsyncRerankClient
from reranker_client.server_errors import read_error

from .calls import CallCounter, calls_counter
from .errors import ApiError, handle_api_error, handle_http_error, handle_schema_error
from .guard import Guard
from .models import TritonModels
from .routes import cohere, health, metrics, score, vllm
from .service import Reranker
from .settings import Settings
from .shadow import Shadow, ShadowMetrics
from .tracing import instrument
from .upstream import UpstreamLatency


# gRPC waits up to 120 s (1 s growing by 1.6x) between attempts to reconnect a channel whose server went away, so
# a gateway stayed 503 for 15-20 s after Triton came back; an attempt at least every second ends that within ~1 s.
RECONNECT_BACKOFF_MS = 1000
log = logging.getLogger(__name__)


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


def _client(settings: Settings, model: str, url: str | None = None) -> AsyncRerankClient:
    return AsyncRerankClient(
        url or settings.triton_grpc_url,
        protocol="grpc",
        model_name=model,
        max_concurrency=settings.max_concurrency,
        max_retries=settings.max_retries,
        backoff_s=settings.backoff_s,
        timeout_s=settings.timeout_s,
        channel_args=channel_args(),
    )




async def check_candidate(models: TritonModels, candidate: str) -> None:
    """A shadow candidate that its Triton does not serve is a start-up error (a typo would otherwise count every call
    as failed); a Triton that does not answer yet is not: the calls count as failed until it does."""
    try:
        await models.client(candidate)
    except Exception as error:  # noqa: BLE001 - only "no such model" stops the start
        if isinstance(error, InferenceServerException) and read_error(error).kind is ErrorKind.NOT_LOADED:
            raise RuntimeError(f"GATEWAY_SHADOW_MODEL '{candidate}': {error.message()}") from None
        log.warning("shadow candidate %s not checked at start-up: %s", candidate, error)


def create_app(settings: Settings | None = None, client: AsyncRerankClient | None = None,
               clients: dict[str, AsyncRerankClient] | None = None) -> FastAPI:
    """The app; `client` replaces the default model's client made from `settings` at start-up, `clients` those of
    other ensembles and of the shadow candidate, by name (tests)."""
    settings = settings or Settings.from_env()
    given = {**({settings.triton_model: client} if client is not None else {}), **(clients or {})}
    registry = CollectorRegistry()
    latency = UpstreamLatency(registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        models = TritonModels(lambda model: _client(settings, model), given)
        shadow, candidate_models = None, models
        if settings.shadow is not None:
            url = settings.shadow.triton_grpc_url
            if url is not None:  # the candidate on a server of its own
                candidate_models = TritonModels(lambda model: _client(settings, model, url), given)
            await check_candidate(candidate_models, settings.shadow.model)
            metrics = ShadowMetrics(registry, settings.triton_model, settings.shadow.model)
            shadow = Shadow(settings.shadow, candidate_models, metrics, latency)
            shadow.start()
        app.state.reranker = Reranker(settings, models, latency, shadow)
        try:
            yield
        finally:
            if shadow is not None:
                await shadow.stop()
            for held in {id(m): m for m in (models, candidate_models)}.values():
                await held.close()
            if app.state.tracing is not None:
                app.state.tracing.shutdown()  # exports the spans still batched

    app = FastAPI(
        title="reranker gateway",
        version="0.2.0",
        description="Cohere (v1, v2), vLLM (rerank and score), Jina and TEI rerank APIs in front of the Triton "
        "`reranker` ensemble (vLLM, calibrated scores). Scores are calibrated relevance probabilities: a threshold keeps its meaning "
        "across models.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.registry = registry
    app.state.calls = calls_counter(registry)  # the head's refusals are counted in it too (gateway.head)
    for router in (cohere.router, vllm.router, score.router, health.router, metrics.router):
        app.include_router(router)
    app.add_middleware(Guard, settings=settings)
    # last added, so outermost: it sees the Guard's answers too
    app.add_middleware(CallCounter, calls=app.state.calls, paths=[route.path for route in app.routes])
    app.add_exception_handler(ApiError, handle_api_error)
    app.add_exception_handler(RequestValidationError, handle_schema_error)
    app.add_exception_handler(StarletteHTTPException, handle_http_error)
    app.state.tracing = instrument(app, settings.traces_endpoint)

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
