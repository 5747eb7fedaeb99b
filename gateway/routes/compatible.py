"""The rerank answer Cohere, vLLM and Jina share: their request and response shapes agree field by field, and
differ only in defaults (`return_documents`, what `top_n: 0` means) and in Cohere's `meta.api_version`."""

from __future__ import annotations

import asyncio
import math
import uuid
from dataclasses import dataclass

from ..documents import document_texts, returned_document
from ..errors import ApiError, ApiErrorKind
from ..schemas import ApiVersion, BilledUnits, Meta, RerankRequest, RerankResponse, RerankResult
from ..service import Reranker, RerankCall, per_document_cap

DOCUMENTS_PER_SEARCH_UNIT = 100  # Cohere bills one search unit per query of up to 100 documents


@dataclass(frozen=True)
class Dialect:
    api_version: str  # meta.api_version.version
    return_documents: bool  # the default when the body leaves it out
    zero_means_unset: bool  # vLLM: top_n 0 means every document, max_tokens_per_doc 0 no cap; Cohere: errors


def _top_n(body: RerankRequest, dialect: Dialect) -> int | None:
    if body.top_n is None or (body.top_n == 0 and dialect.zero_means_unset):
        return None
    if body.top_n < 1:
        raise ApiError(ApiErrorKind.INVALID, f"top_n must be at least 1, got {body.top_n}", param="top_n")
    return body.top_n


async def answer(body: RerankRequest, reranker: Reranker, dialect: Dialect) -> RerankResponse:
    model = reranker.model_name(body.model)
    documents = body.document_list()
    top_n = _top_n(body, dialect)
    cap = per_document_cap(
        None if body.max_tokens_per_doc == 0 and dialect.zero_means_unset else body.max_tokens_per_doc,
        body.truncate_prompt_tokens,
    )
    # Off the event loop: a body of many objects is work that /health/live must not wait for.
    texts = await asyncio.to_thread(document_texts, documents, body.rank_fields)
    call = RerankCall(
        query=body.query_text(),
        texts=texts,
        top_n=top_n,
        instruction=body.instruction,
        max_tokens_per_doc=cap,
        model=model,
    )
    return_documents = dialect.return_documents if body.return_documents is None else body.return_documents
    response = await reranker.rerank(call)
    return RerankResponse(
        id=str(uuid.uuid4()),
        model=model,
        results=[
            RerankResult(
                index=r.index,
                relevance_score=r.relevance_score,
                document=returned_document(documents[r.index]) if return_documents else None,
            )
            for r in response.results
        ],
        meta=Meta(
            api_version=ApiVersion(version=dialect.api_version),
            billed_units=BilledUnits(search_units=math.ceil(len(documents) / DOCUMENTS_PER_SEARCH_UNIT)),
            calibration=response.calibration,
            truncated=response.truncated,
            raw_scores=[float(s) for s in response.raw_scores] if body.return_raw_scores else None,
        ),
    )
