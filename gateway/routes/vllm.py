"""POST /rerank: vLLM's and Jina's body `{model, query, documents, top_n, return_documents}` (documents returned
by default, `top_n: 0` means all), or TEI's `{query, texts, ...}`, told apart by the `texts` field."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from pydantic import Discriminator, Tag

from ..errors import is_tei_body
from ..schemas import ErrorBody, RerankRequest, RerankResponse, TeiErrorBody, TeiRank, TeiRerankRequest
from ..service import Reranker
from . import reranker, tei
from .cohere import ERROR_RESPONSES, V1
from .compatible import answer


def _body_kind(body: Any) -> str:
    """The union's tag, for a raw body (validation) or a model (serialization)."""
    return "tei" if isinstance(body, TeiRerankRequest) or is_tei_body(body) else "rerank"


AnyRerankRequest = Annotated[
    Annotated[TeiRerankRequest, Tag("tei")] | Annotated[RerankRequest, Tag("rerank")], Discriminator(_body_kind)
]

router = APIRouter(tags=["vllm", "jina", "tei"])


@router.post(
    "/rerank",
    response_model=RerankResponse | list[TeiRank],
    response_model_exclude_none=True,
    responses={
        **ERROR_RESPONSES,
        400: {"model": ErrorBody | TeiErrorBody, "description": "Bad input (TEI body: no texts, TEI's Empty)."},
        503: {"model": ErrorBody | TeiErrorBody, "description": "Triton unavailable (TEI body: TEI's Unhealthy)."},
        422: {"model": TeiErrorBody, "description": "TEI body: bad input (TEI's Validation error)."},
        424: {"model": TeiErrorBody, "description": "TEI body: Triton failed the request."},
        429: {"model": TeiErrorBody, "description": "TEI body: Triton's queue is full."},
    },
    summary="vLLM / Jina rerank, or TEI rerank (a body with `texts`)",
)
async def rerank(body: Annotated[AnyRerankRequest, Body()], service: Reranker = Depends(reranker)) -> Any:
    if isinstance(body, TeiRerankRequest):
        return await tei.rerank(body, service)
    return await answer(body, service, V1)
