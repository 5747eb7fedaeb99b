"""`python -m gateway` against the real tritonserver: the Cohere/Jina-style POST /v1/rerank, health, errors."""

from __future__ import annotations

import re

import pytest
import requests

QUERY = "What is the capital of France?"
RELEVANT = "Paris is the capital and largest city of France."
IRRELEVANT = "Bananas are a good source of potassium."


def rerank(gateway, **body):
    body.setdefault("model", "reranker")
    return requests.post(f"{gateway.url}/v1/rerank", json=body, timeout=60)


def test_the_relevant_document_ranks_first(gateway):
    response = rerank(gateway, query=QUERY, documents=[IRRELEVANT, RELEVANT])
    assert response.status_code == 200, response.text
    body = response.json()
    assert [r["index"] for r in body["results"]] == [1, 0]
    assert 0 <= body["results"][1]["relevance_score"] < body["results"][0]["relevance_score"] <= 1
    assert all("document" not in r for r in body["results"])
    assert re.fullmatch(r"[^@]+@[^@]+", body["meta"]["calibration"])
    assert body["meta"]["truncated"] == 0
    assert "raw_scores" not in body["meta"]
    assert body["id"]


def test_top_n_and_return_documents(gateway):
    documents = [IRRELEVANT, {"text": RELEVANT}, "Berlin is the capital of Germany."]
    body = rerank(gateway, query=QUERY, documents=documents, top_n=2, return_documents=True).json()
    assert len(body["results"]) == 2
    assert body["results"][0] == {
        "index": 1, "relevance_score": body["results"][0]["relevance_score"], "document": {"text": RELEVANT}
    }
    assert body["results"][1]["document"]["text"] == documents[body["results"][1]["index"]]


def test_top_n_above_the_number_of_documents_returns_them_all(gateway):
    body = rerank(gateway, query=QUERY, documents=[IRRELEVANT, RELEVANT], top_n=10).json()
    assert [r["index"] for r in body["results"]] == [1, 0]


def test_raw_scores_on_request_and_truncation_counted(gateway):
    body = rerank(gateway, query=QUERY, documents=["paris " * 600, RELEVANT], return_raw_scores=True).json()
    assert len(body["meta"]["raw_scores"]) == 2
    assert body["meta"]["truncated"] == 1


def test_a_model_alias_is_served_and_an_unknown_model_is_404(gateway):
    assert rerank(gateway, model="rerank-default", query=QUERY, documents=[RELEVANT]).status_code == 200
    response = rerank(gateway, model="rerank-english-v3.0", query=QUERY, documents=[RELEVANT])
    assert response.status_code == 404
    assert "served: reranker, rerank-default" in response.json()["detail"]


@pytest.mark.parametrize(
    "body,message",
    [
        ({"query": "   ", "documents": [RELEVANT]}, "QUERY is empty"),
        ({"query": QUERY, "documents": [RELEVANT, ""]}, "DOCUMENTS[1] is empty"),
        ({"query": QUERY, "documents": ["x" * 70000]}, "DOCUMENTS[0] is 70000 bytes, more than the limit of 65536"),
        (
            {"query": QUERY, "documents": [RELEVANT], "top_n": 0},
            "TOP_N must be between 1 and the number of documents (1), got 0",
        ),
        (
            {"query": QUERY, "documents": [RELEVANT], "instruction": "be strict"},
            "INSTRUCTION is not supported by this model",
        ),
        ({"query": QUERY, "documents": []}, "documents is empty: send at least one document"),
    ],
    ids=["empty query", "empty document", "huge document", "top_n zero", "instruction", "no documents"],
)
def test_bad_input_is_400_with_the_servers_message(gateway, body, message):
    response = rerank(gateway, **body)
    assert response.status_code == 400, response.text
    assert message in response.json()["detail"]


def test_a_body_off_the_schema_is_422(gateway):
    assert rerank(gateway, documents=[RELEVANT]).status_code == 422  # no query
    assert rerank(gateway, query=QUERY, documents=[{"txt": RELEVANT}]).status_code == 422


def test_health_and_openapi(gateway, server):
    health = requests.get(f"{gateway.url}/health", timeout=10)
    assert health.status_code == 200
    assert health.json() == {"status": "ready", "triton": server.grpc_url, "models": ["reranker", "rerank-default"]}
    assert requests.get(f"{gateway.url}/health/live", timeout=10).json() == {"status": "live"}
    spec = requests.get(f"{gateway.url}/openapi.json", timeout=10).json()
    assert {"/v1/rerank", "/health"} <= set(spec["paths"])
    assert {"200", "400", "404", "422", "503"} <= set(spec["paths"]["/v1/rerank"]["post"]["responses"])
