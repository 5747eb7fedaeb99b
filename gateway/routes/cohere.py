"""Cohere's rerank API: POST /v2/rerank (ClientV2, LangChain and LlamaIndex CohereRerank) and POST /v1/rerank
(Client), which is also the path vLLM and Jina clients use, so its defaults are theirs where Cohere's would break
them (documents returned unless `return_documents: false`; `top_n: 0` means all)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from ..schemas import ErrorBody, RerankRequest, RerankResponse
from ..service import Reranker
from . import reranker
from .compatible import Dialect, answer

ERROR_RESPONSES = {
    400: {"model": ErrorBody, "description": "Bad input; the message names the field (and the limit)."},
    401: {"model": ErrorBody, "description": "An API key is set and the call did not carry it as a Bearer token."},
    404: {"model": ErrorBody, "description": "The `model` is not served here."},
    408: {"model": ErrorBody, "description": "The body did not arrive within GATEWAY_BODY_TIMEOUT_S."},
    413: {"model": ErrorBody, "description": "The body is larger than GATEWAY_MAX_BODY_BYTES."},
    502: {"model": ErrorBody, "description": "Triton failed the request."},
    503: {"model": ErrorBody, "description": "Triton is unavailable or too busy for the request; retry after Retry-After."},
    504: {"model": ErrorBody, "description": "Triton did not answer in time."},
}
V1 = Dialect(api_version="1", return_documents=True, zero_means_unset=True)
V2 = Dialect(api_version="2", return_documents=False, zero_means_unset=False)

router = APIRouter(tags=["cohere"])


@router.post(
    "/v2/rerank",
    response_model=RerankResponse,
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
    summary="Cohere v2 rerank",
)
async def rerank_v2(body: RerankRequest, service: Reranker = Depends(reranker)) -> RerankResponse:
    return await answer(body, service, V2)


@router.post(
    "/v1/rerank",
    response_model=RerankResponse,
    response_model_exclude_none=True,
    responses=ERROR_RESPONSES,
    summary="Cohere v1 rerank; also vLLM's and Jina's /v1/rerank",
)
async def rerank_v1(body: RerankRequest, service: Reranker = Depends(reranker)) -> RerankResponse:
    return await answer(body, service, V1)
