"""text-embeddings-inference's POST /rerank body `{query, texts, raw_scores, return_text, truncate}`, and `top_n`
(LiteLLM's TEI provider sends it; honoured here), answered in TEI's shape: a list of `{index, score, text?}` sorted
by score, and TEI's errors `{error, error_type}`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from ..errors import ApiError, ApiErrorKind, tei_response
from ..limits import TEI_FIELDS
from ..schemas import TeiRank, TeiRerankRequest
from ..service import Reranker, RerankCall


async def _ranks(body: TeiRerankRequest, service: Reranker) -> list[TeiRank]:
    if body.truncation_direction.lower() == "left":
        raise ApiError(ApiErrorKind.INVALID, "truncation_direction: only 'right' is served (the end of a text is cut)",
                       param="truncation_direction")
    if body.top_n is not None and body.top_n < 1:
        raise ApiError(ApiErrorKind.INVALID, f"top_n must be at least 1, got {body.top_n}", param="top_n")
    if not body.texts:
        raise ApiError(ApiErrorKind.EMPTY, "`texts` cannot be empty", param="texts")
    model = service.model_name(body.model)
    call = RerankCall(query=body.query, texts=list(body.texts), top_n=body.top_n, names=TEI_FIELDS, model=model)
    response = await service.rerank(call)
    if body.truncate is False and response.truncated:
        limit = (await service.limits(model)).max_model_len
        raise ApiError(ApiErrorKind.INVALID, f"texts: {response.truncated} of the texts do not fit the model's "
                       f"{limit} tokens with the query; send truncate: true to cut them", param="texts")
    scores = response.raw_scores if body.raw_scores else response.scores
    return [
        TeiRank(index=r.index, text=body.texts[r.index] if body.return_text else None, score=float(scores[r.index]))
        for r in response.results
    ]


async def rerank(body: TeiRerankRequest, service: Reranker) -> JSONResponse:
    try:
        ranks = await _ranks(body, service)
    except ApiError as error:
        return tei_response(error)
    return JSONResponse([rank.model_dump(exclude_none=True) for rank in ranks])
