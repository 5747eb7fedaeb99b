"""A stand-in for the gateway's Triton client in the unit-level gateway tests: it records what the gateway sends
and answers with scores that rank the later documents first, or raises the error it was given."""

from __future__ import annotations

import asyncio

import numpy as np
from fastapi.testclient import TestClient

from gateway import Settings, create_app
from python_backends.contract import RequestLimits
from reranker_client import RerankResponse, RerankResult

LIMITS = RequestLimits(max_documents=1024, max_document_bytes=65536, max_query_bytes=4096, max_model_len=256)


class StubClient:
    """`error` is raised by every call, or by the first `failures` calls only; `is_ready` takes `ready_delay_s`, each
    rerank `rerank_delay_s`."""

    def __init__(self, error: BaseException | None = None, ready: bool = True, failures: int | None = None,
                 ready_delay_s: float = 0.0, rerank_delay_s: float = 0.0) -> None:
        self.error, self.ready, self.calls, self.truncated = error, ready, [], 0
        self.failures, self.ready_delay_s, self.rerank_delay_s = failures, ready_delay_s, rerank_delay_s

    async def rerank(self, query, documents, top_n=None, instruction=None, return_documents=False,
                     max_tokens_per_doc=None):
        self.calls.append((query, list(documents), top_n, instruction, max_tokens_per_doc))
        await asyncio.sleep(self.rerank_delay_s)
        if self.error is not None and (self.failures is None or len(self.calls) <= self.failures):
            raise self.error
        raw = np.arange(len(documents), dtype=np.float32)
        order = list(np.argsort(-raw, kind="stable")[: top_n or len(documents)])
        results = [
            RerankResult(
                int(i), float(raw[i]) / len(documents), float(raw[i]), documents[i] if return_documents else None
            )
            for i in order
        ]
        return RerankResponse(results, raw / len(documents), raw, self.truncated, "stub@1")

    async def limits(self) -> RequestLimits:
        return LIMITS

    async def is_ready(self) -> bool:
        await asyncio.sleep(self.ready_delay_s)
        return self.ready


async def until_cancelled(cancelled: list[bool]) -> None:
    """Work that never ends by itself (a minute): records in `cancelled` that it was cancelled."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        cancelled.append(True)
        raise


def post(stub: StubClient, path: str = "/v1/rerank", settings: Settings | None = None, **body):
    body = {"query": "q", "documents": ["a", "b"], **body}
    with TestClient(create_app(settings or Settings(), client=stub)) as client:
        return client.post(path, json=body)


