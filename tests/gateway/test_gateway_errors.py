"""Unit level, no server: how the gateway answers each kind of Triton failure (a stub in place of the client)."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from tritonclient.utils import InferenceServerException

from gateway import Settings, create_app
from reranker_client import RerankResponse, RerankResult


class StubClient:
    def __init__(self, error: BaseException | None = None, ready: bool = True) -> None:
        self.error, self.ready, self.calls = error, ready, []

    async def rerank(self, query, documents, top_n=None, instruction=None, return_documents=False):
        self.calls.append((query, list(documents), top_n, instruction, return_documents))
        if self.error is not None:
            raise self.error
        raw = np.arange(len(documents), dtype=np.float32)
        order = list(np.argsort(-raw, kind="stable")[: top_n or len(documents)])
        results = [
            RerankResult(
                int(i), float(raw[i]) / len(documents), float(raw[i]), documents[i] if return_documents else None
            )
            for i in order
        ]
        return RerankResponse(results, raw / len(documents), raw, 0, "stub@1")

    async def is_ready(self) -> bool:
        return self.ready


def post(stub: StubClient, **body):
    body = {"model": "reranker", "query": "q", "documents": ["a", "b"], **body}
    with TestClient(create_app(Settings(), client=stub)) as client:
        return client.post("/v1/rerank", json=body)


@pytest.mark.parametrize(
    "error,status",
    [
        (InferenceServerException(msg="Exceeds maximum queue size", status="StatusCode.UNAVAILABLE"), 503),
        (InferenceServerException(msg="Server is stopping", status="503"), 503),
        (InferenceServerException(msg="Request for unknown model", status="StatusCode.NOT_FOUND"), 503),
        (ConnectionRefusedError("connection refused"), 503),
        (InferenceServerException(msg="QUERY is empty", status="StatusCode.INVALID_ARGUMENT"), 400),
        (InferenceServerException(msg="QUERY is empty", status="400"), 400),
        (ValueError("TOP_N must be between 1 and the number of documents (2), got 5"), 400),
        (InferenceServerException(msg="deadline", status="StatusCode.DEADLINE_EXCEEDED"), 504),
        (InferenceServerException(msg="Stub process is not healthy", status="StatusCode.INTERNAL"), 502),
    ],
)
def test_triton_errors_map_to_http_statuses(error, status):
    response = post(StubClient(error))
    assert response.status_code == status
    assert response.json()["detail"] == (error.message() if isinstance(error, InferenceServerException) else str(error))
    assert ("retry-after" in response.headers) == (status == 503)


def test_top_n_is_capped_and_fields_reach_the_client():
    stub = StubClient()
    response = post(stub, documents=["a", {"text": "b"}], top_n=7, return_documents=True, rank_fields=["text"])
    assert response.status_code == 200
    assert stub.calls == [("q", ["a", "b"], 2, None, True)]
    assert [r["document"]["text"] for r in response.json()["results"]] == ["b", "a"]


def test_too_many_documents_is_400_before_triton():
    stub = StubClient()
    with TestClient(create_app(Settings(max_documents=3), client=stub)) as client:
        response = client.post("/v1/rerank", json={"model": "reranker", "query": "q", "documents": list("abcd")})
    assert response.status_code == 400
    assert response.json()["detail"] == "documents holds 4 documents, more than the limit of 3"
    assert stub.calls == []


def test_health_is_503_when_triton_is_not_ready():
    with TestClient(create_app(Settings(), client=StubClient(ready=False))) as client:
        response = client.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"


def test_settings_from_the_environment():
    settings = Settings.from_env(
        {"TRITON_GRPC_URL": "tritonserver:8001", "RERANK_MODEL": "qwen3", "GATEWAY_MODEL_ALIASES": "a, b,,qwen3",
         "GATEWAY_PORT": "9000", "GATEWAY_HOST": "0.0.0.0"}
    )
    assert (settings.triton_grpc_url, settings.models, settings.port, settings.host) == (
        "tritonserver:8001", ("qwen3", "a", "b"), 9000, "0.0.0.0"
    )
    assert Settings.from_env({}) == Settings()
    with pytest.raises(ValueError, match="GATEWAY_PORT='x'"):
        Settings.from_env({"GATEWAY_PORT": "x"})
