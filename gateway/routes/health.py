"""GET /health (readiness: Triton ready, the model loaded and its ensemble answering a probe pair, with a deadline;
the calls of one second share one check, `Reranker.is_ready`) and GET /health/live (the process answers; it touches nothing else, so it stays instant while Triton
is down)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from ..schemas import Health
from ..service import Reranker
from ..tracing import untraced
from . import reranker

router = APIRouter(tags=["health"])


@router.get(
    "/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "Triton or the model is not ready, or the ensemble answers "
                                                      "with an error (a dead engine stub)."}},
    summary="Readiness: Triton is ready, the model is loaded and answers",
)
async def health(request: Request, service: Reranker = Depends(reranker)) -> JSONResponse:
    with untraced(request.app.state.tracing):
        ready = await service.is_ready()
    body = Health(status="ready" if ready else "unavailable", models=list(service.settings.models))
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get("/health/live", summary="Liveness: the gateway process answers")
async def live() -> dict[str, str]:
    return {"status": "live"}
