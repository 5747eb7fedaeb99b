"""The FastAPI app: `POST /v1/rerank`, `GET /health`, `GET /health/live`, and the OpenAPI spec at `/openapi.json`.

It is a Triton client only: every call goes to the `reranker` ensemble over gRPC through `AsyncRerankClient`
(splitting long lists, merging, retrying UNAVAILABLE). Errors: the server's INVALID_ARGUMENT -> 400 with its
message, UNAVAILABLE (queue full, server stopping, unreachable) -> 503 with Retry-After, an unknown `model`
-> 404, a body that does not match the schema -> 422.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from tritonclient.utils import InferenceServerException

from reranker_client import AsyncRerankClient, CalibrationChangedError, is_retryable

from . import schemas
from .settings import Settings

log = logging.getLogger("gateway")

ERROR_RESPONSES = {
    400: {"model": schemas.ErrorBody, "description": "Bad input (the message names the field and the limit)."},
    404: {"model": schemas.ErrorBody, "description": "The `model` is not served here."},
    502: {"model": schemas.ErrorBody, "description": "Triton failed the request."},
    503: {"model": schemas.ErrorBody, "description": "Triton is unavailable or its queue is full; retry later."},
    504: {"model": schemas.ErrorBody, "description": "Triton did not answer in time."},
}


class GatewayError(Exception):
    def __init__(self, status_code: int, detail: str, retry_after_s: int | None = None) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail
        self.retry_after_s = retry_after_s


def triton_error(error: Exception) -> GatewayError:
    """The HTTP answer to an exception raised by the client while talking to Triton."""
    if isinstance(error, InferenceServerException):
        status, message = str(error.status()), error.message() or str(error)
        if status in ("StatusCode.INVALID_ARGUMENT", "400"):
            return GatewayError(400, message)
        if status in ("StatusCode.DEADLINE_EXCEEDED", "504"):
            return GatewayError(504, message)
        if is_retryable(error) or status in ("StatusCode.NOT_FOUND", "StatusCode.CANCELLED"):
            # NOT_FOUND: the model is not loaded (yet, or any more)
            return GatewayError(503, message, retry_after_s=1)
        return GatewayError(502, message)
    if isinstance(error, CalibrationChangedError) or is_retryable(error):
        return GatewayError(503, str(error), retry_after_s=1)
    if isinstance(error, (ValueError, TypeError)):  # the client's own checks (top_n, text encoding)
        return GatewayError(400, str(error))
    log.exception("unexpected error while calling Triton")
    return GatewayError(502, f"{type(error).__name__}: {error}")


def create_app(settings: Settings | None = None, client: AsyncRerankClient | None = None) -> FastAPI:
    """The app; `client` replaces the one made from `settings` at start-up (tests)."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = client is None
        app.state.client = client or AsyncRerankClient(
            settings.triton_grpc_url,
            protocol="grpc",
            model_name=settings.triton_model,
            max_documents_per_request=settings.max_documents_per_request,
            max_concurrency=settings.max_concurrency,
            max_retries=settings.max_retries,
            backoff_s=settings.backoff_s,
            timeout_s=settings.timeout_s,
        )
        try:
            yield
        finally:
            if own:
                await app.state.client.close()

    app = FastAPI(
        title="reranker gateway",
        version="0.1.0",
        description="Cohere/Jina-style rerank API in front of the Triton `reranker` ensemble (vLLM, calibrated "
        "scores). Scores are calibrated relevance probabilities: a threshold keeps its meaning across models.",
        lifespan=lifespan,
    )
    app.state.settings = settings

    def openapi() -> dict:
        """FastAPI's spec, with the served model names as the enum of the request's `model`."""
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            spec["components"]["schemas"]["RerankRequest"]["properties"]["model"]["enum"] = list(settings.models)
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(GatewayError)
    async def gateway_error(request: Request, error: GatewayError) -> JSONResponse:
        headers = {"Retry-After": str(error.retry_after_s)} if error.retry_after_s is not None else None
        return JSONResponse({"detail": error.detail}, status_code=error.status_code, headers=headers)

    @app.post(
        "/v1/rerank",
        response_model=schemas.RerankResponse,
        response_model_exclude_none=True,
        responses=ERROR_RESPONSES,
        summary="Rerank documents by relevance to a query",
    )
    async def rerank(body: schemas.RerankRequest, request: Request) -> schemas.RerankResponse:
        if body.model not in settings.models:
            raise GatewayError(404, f"model {body.model!r} is not served here; served: {', '.join(settings.models)}")
        documents = body.texts()
        if not documents:
            raise GatewayError(400, "documents is empty: send at least one document")
        if len(documents) > settings.max_documents:
            raise GatewayError(
                400, f"documents holds {len(documents)} documents, more than the limit of {settings.max_documents}"
            )
        # Like Cohere and Jina: a top_n above the number of documents returns all of them.
        top_n = body.top_n if body.top_n is None or body.top_n <= len(documents) else len(documents)
        try:
            response = await request.app.state.client.rerank(
                body.query, documents, top_n=top_n, instruction=body.instruction, return_documents=body.return_documents
            )
        except Exception as error:
            raise triton_error(error) from error
        return schemas.RerankResponse(
            id=str(uuid.uuid4()),
            results=[
                schemas.RerankResult(
                    index=r.index,
                    relevance_score=r.relevance_score,
                    document=None if r.document is None else schemas.Document(text=r.document),
                )
                for r in response.results
            ],
            meta=schemas.Meta(
                calibration=response.calibration,
                truncated=response.truncated,
                raw_scores=[float(s) for s in response.raw_scores] if body.return_raw_scores else None,
            ),
        )

    @app.get(
        "/health",
        response_model=schemas.Health,
        responses={503: {"model": schemas.Health, "description": "Triton or the model is not ready."}},
        summary="Readiness: Triton is ready and the model is loaded",
    )
    async def health(request: Request) -> JSONResponse:
        ready = await request.app.state.client.is_ready()
        body = schemas.Health(
            status="ready" if ready else "unavailable", triton=settings.triton_grpc_url, models=list(settings.models)
        )
        return JSONResponse(body.model_dump(), status_code=200 if ready else 503)

    @app.get("/health/live", summary="Liveness: the gateway process answers")
    async def live() -> dict[str, str]:
        return {"status": "live"}

    return app
