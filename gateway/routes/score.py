"""vLLM's POST /score and /v1/score: `text_1` against `text_2`, each a string or a list, paired 1:1, 1:N or N:N
as vLLM pairs them, answered in vLLM's score shape (`data[i].score`, pair order).

The ensemble takes one query per request, so the pairs are grouped by their query: one rerank call per distinct
text_1, at most max_concurrency of them at a time, all of them within GATEWAY_TIMEOUT_S (many distinct queries are
many requests: past the deadline the calls still running are cancelled and the answer is 504). Scores are the
calibrated ones, as on /rerank.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence

from fastapi import APIRouter, Depends

from ..errors import FIXED_MESSAGES, ApiError, ApiErrorKind
from ..limits import Fields
from ..schemas import ScoreData, ScoreRequest, ScoreResponse, ScoreUsage
from ..service import Reranker, RerankCall, per_document_cap
from . import reranker
from .cohere import ERROR_RESPONSES

router = APIRouter(tags=["vllm"])


def _pairs(queries: list[str], documents: list[str]) -> list[str]:
    """The query of each pair, with vLLM's rules and words (entrypoints/pooling/scoring/utils.py)."""
    if not queries:
        raise ApiError(ApiErrorKind.EMPTY, "text_1 is empty: at least one text element must be given", param="text_1")
    if not documents:
        raise ApiError(ApiErrorKind.EMPTY,
                       "text_2 is empty: at least one text_pair element must be given", param="text_2")
    if len(queries) == 1:
        return queries * len(documents)
    if len(queries) != len(documents):
        raise ApiError(ApiErrorKind.INVALID,
                       f"text_1 holds {len(queries)} texts and text_2 {len(documents)}: input lengths "
                       "must be either 1:1, 1:N or N:N", param="text_2")
    return queries


def _groups(pair_queries: Sequence[str]) -> dict[str, list[int]]:
    """The positions of the pairs of each distinct query, in the order the queries first appear."""
    groups: dict[str, list[int]] = {}
    for position, query in enumerate(pair_queries):
        groups.setdefault(query, []).append(position)
    return groups


async def _scores(body: ScoreRequest, service: Reranker, model: str) -> list[float]:
    cap = per_document_cap(None, body.truncate_prompt_tokens)
    queries, documents = body.pairs()
    pair_queries = _pairs(queries, documents)
    if len(documents) > service.settings.max_documents:
        raise ApiError(ApiErrorKind.INVALID, f"text_2 holds {len(documents)} documents, more than the limit of "
                       f"{service.settings.max_documents}", param="text_2")
    calls = []
    for query, positions in _groups(pair_queries).items():
        query_name = "text_1" if len(queries) == 1 else f"text_1[{positions[0]}]"
        call = RerankCall(query=query, texts=[documents[p] for p in positions], max_tokens_per_doc=cap, model=model,
                          names=Fields(query=query_name, documents="text_2", positions=positions))
        await service.check(call)  # every call before the first is sent
        calls.append(call)
    limit = asyncio.Semaphore(service.settings.max_concurrency)
    scores = [0.0] * len(documents)

    async def score(call: RerankCall) -> None:
        async with limit:
            response = await service.send(call)
        for position, value in zip(call.names.positions, response.scores):
            scores[position] = float(value)

    try:
        outcomes = await asyncio.wait_for(asyncio.gather(*(score(call) for call in calls), return_exceptions=True),
                                          service.settings.timeout_s)
    except TimeoutError:
        raise ApiError(ApiErrorKind.TIMEOUT, f"{FIXED_MESSAGES[ApiErrorKind.TIMEOUT]}: {len(calls)} queries, "
                       f"{service.settings.timeout_s:g} s for all of them") from None
    for outcome in outcomes:  # the first failed call's error, in the order of the queries
        if isinstance(outcome, BaseException):
            raise outcome
    return scores


async def _answer(body: ScoreRequest, service: Reranker) -> ScoreResponse:
    model = service.model_name(body.model)
    scores = await _scores(body, service, model)
    return ScoreResponse(
        id=f"score-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=model,
        data=[ScoreData(index=i, score=s) for i, s in enumerate(scores)],
        usage=ScoreUsage(),
    )


@router.post("/score", response_model=ScoreResponse, responses=ERROR_RESPONSES, summary="vLLM score")
async def score(body: ScoreRequest, service: Reranker = Depends(reranker)) -> ScoreResponse:
    return await _answer(body, service)


@router.post("/v1/score", response_model=ScoreResponse, responses=ERROR_RESPONSES, summary="vLLM score (old path)")
async def score_v1(body: ScoreRequest, service: Reranker = Depends(reranker)) -> ScoreResponse:
    return await _answer(body, service)
