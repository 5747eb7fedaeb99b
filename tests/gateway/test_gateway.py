"""`python -m gateway` against the real tritonserver: raw Cohere, vLLM, Jina and TEI payloads, health, errors.
The official SDKs are in test_sdk_clients.py."""

from __future__ import annotations

import re

import pytest
import requests

QUERY = "What is the capital of France?"
RELEVANT = "Paris is the capital and largest city of France."
IRRELEVANT = "Bananas are a good source of potassium."
LONG = "paris " * 600  # far over the model's 256 tokens


def post(gateway, path="/v1/rerank", **body):
    return requests.post(f"{gateway.url}{path}", json=body, timeout=60)


def test_cohere_v1_the_relevant_document_ranks_first(gateway):
    response = post(gateway, model="reranker", query=QUERY, documents=[IRRELEVANT, RELEVANT], return_documents=False)
    assert response.status_code == 200, response.text
    body = response.json()
    assert [r["index"] for r in body["results"]] == [1, 0]
    assert 0 <= body["results"][1]["relevance_score"] < body["results"][0]["relevance_score"] <= 1
    assert all("document" not in r for r in body["results"])
    assert re.fullmatch(r"[^@]+@[^@]+", body["meta"]["calibration"])
    assert body["meta"]["api_version"] == {"version": "1"}
    assert body["meta"]["billed_units"] == {"search_units": 1}
    assert body["meta"]["truncated"] == 0
    assert "raw_scores" not in body["meta"]
    assert body["id"] and body["model"] == "reranker"


def test_vllm_payload_on_rerank(gateway):
    """What vLLM's /rerank clients send (top_n, truncate_prompt_tokens, no model) and read."""
    body = post(gateway, "/rerank", query=QUERY, documents=[IRRELEVANT, RELEVANT, "Berlin is in Germany."],
                top_n=2, truncate_prompt_tokens=-1).json()
    assert set(body) >= {"id", "model", "results"}
    assert body["model"] == "reranker"
    assert len(body["results"]) == 2
    assert body["results"][0] == {
        "index": 1, "document": {"text": RELEVANT}, "relevance_score": body["results"][0]["relevance_score"]
    }


def test_jina_payload_on_v1_rerank(gateway):
    body = post(gateway, model="rerank-default", query={"text": QUERY}, documents=[{"text": IRRELEVANT}, RELEVANT],
                top_n=5, return_documents=True).json()
    assert body["model"] == "rerank-default"
    assert [(r["index"], r["document"]) for r in body["results"]] == [(1, {"text": RELEVANT}), (0, {"text": IRRELEVANT})]
    bare = post(gateway, query=QUERY, documents=[IRRELEVANT, RELEVANT], return_documents=False).json()
    assert [sorted(r) for r in bare["results"]] == [["index", "relevance_score"]] * 2


def test_tei_payload_on_rerank(gateway):
    scored = post(gateway, "/rerank", query=QUERY, texts=[IRRELEVANT, RELEVANT], return_text=True).json()
    assert [sorted(r) for r in scored] == [["index", "score", "text"]] * 2
    assert [(r["index"], r["text"]) for r in scored] == [(1, RELEVANT), (0, IRRELEVANT)]
    raw = post(gateway, "/rerank", query=QUERY, texts=[IRRELEVANT, RELEVANT], raw_scores=True).json()
    cohere = post(gateway, query=QUERY, documents=[IRRELEVANT, RELEVANT], return_raw_scores=True).json()
    assert [r["index"] for r in raw] == [1, 0]
    assert [r["score"] for r in raw] == pytest.approx([cohere["meta"]["raw_scores"][1], cohere["meta"]["raw_scores"][0]])
    assert [r["score"] for r in scored] == pytest.approx([r["relevance_score"] for r in cohere["results"]])


def test_tei_truncate_false_refuses_a_text_that_does_not_fit(gateway):
    response = post(gateway, "/rerank", query=QUERY, texts=[LONG, RELEVANT], truncate=False)
    assert response.status_code == 422
    assert response.json() == {
        "error": "texts: 1 of the texts do not fit the model's 256 tokens with the query; send truncate: true to cut them",
        "error_type": "Validation",
    }
    assert post(gateway, "/rerank", query=QUERY, texts=[LONG, RELEVANT]).status_code == 200  # TEI's default: cut
    assert post(gateway, "/rerank", query=QUERY, texts=[]).json() == {"error": "`texts` cannot be empty",
                                                                      "error_type": "Empty"}


def test_top_n_above_the_number_of_documents_returns_them_all(gateway):
    body = post(gateway, "/v2/rerank", query=QUERY, documents=[IRRELEVANT, RELEVANT], top_n=10).json()
    assert [r["index"] for r in body["results"]] == [1, 0]


def test_raw_scores_on_request_and_truncation_counted(gateway):
    body = post(gateway, query=QUERY, documents=[LONG, RELEVANT], return_raw_scores=True).json()
    assert len(body["meta"]["raw_scores"]) == 2
    assert body["meta"]["truncated"] == 1


def test_an_unknown_model_is_404(gateway):
    response = post(gateway, "/v2/rerank", model="rerank-english-v3.0", query=QUERY, documents=[RELEVANT])
    assert response.status_code == 404
    assert response.json()["message"] == (
        "model 'rerank-english-v3.0' is not served here; served: reranker, rerank-default (GET /health lists them)"
    )


@pytest.mark.parametrize(
    "body,message,param",
    [
        ({"query": "   ", "documents": [RELEVANT]}, "query is empty", "query"),
        ({"query": QUERY, "documents": [RELEVANT, ""]}, "documents[1] is empty", "documents[1]"),
        ({"query": QUERY, "documents": [RELEVANT, "x" * 70000]},
         "documents[1] is 70000 bytes, more than the limit of 65536", "documents[1]"),
        ({"query": QUERY, "documents": [RELEVANT], "instruction": "be strict"},
         "instruction is not supported by this model", "instruction"),
        ({"query": QUERY, "documents": []}, "documents is empty: send at least one document", "documents"),
        ({"documents": [RELEVANT]}, "query: Field required", "query"),
        ({"query": QUERY, "documents": [{"txt": RELEVANT}]}, "documents[0].text is missing", "documents[0].text"),
    ],
    ids=["empty query", "empty document", "huge document", "instruction", "no documents", "no query", "no text"],
)
def test_bad_input_is_400_with_a_message_naming_the_callers_field(gateway, body, message, param):
    response = post(gateway, **body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["message"].startswith(message), error["message"]
    assert error["detail"] == error["message"] == error["error"]["message"]
    assert error["error"]["param"] == param


TEN_MB = "x" * 10 * 1024 * 1024


@pytest.mark.parametrize(
    "path,body,expected",
    [
        ("/v2/rerank", {"query": QUERY, "documents": [RELEVANT, TEN_MB]},
         ("documents[1] is 10485760 bytes, more than the limit of 65536", "documents[1]")),
        ("/score", {"text_1": QUERY, "text_2": [RELEVANT, TEN_MB]},
         ("text_2[1] is 10485760 bytes, more than the limit of 65536", "text_2[1]")),
        ("/rerank", {"query": QUERY, "texts": [RELEVANT, TEN_MB]},
         {"error": "texts[1] is 10485760 bytes, more than the limit of 65536", "error_type": "Validation"}),
        ("/rerank", {"query": QUERY, "texts": [RELEVANT, " \u200b "]},
         {"error": "texts[1] is empty: it has no characters or tokens to score (only whitespace, control, invisible "
          "or special characters)", "error_type": "Validation"}),
    ],
    ids=["cohere", "score", "tei", "tei blank (the server's check)"],
)
def test_errors_speak_each_apis_field_names(gateway, path, body, expected):
    response = post(gateway, path, **body)
    if isinstance(expected, dict):  # TEI
        assert (response.status_code, response.json()) == (422, expected)
    else:
        assert response.status_code == 400
        assert (response.json()["message"], response.json()["error"]["param"]) == expected


def test_vllm_score(gateway):
    """vLLM's /score body and response shape; 1:N and N:N pairs score each pair as /rerank does."""
    one_to_n = post(gateway, "/score", model="reranker", text_1=QUERY, text_2=[IRRELEVANT, RELEVANT]).json()
    assert set(one_to_n) == {"id", "object", "created", "model", "data", "usage"}
    assert (one_to_n["object"], one_to_n["model"]) == ("list", "reranker")
    assert [(d["index"], d["object"]) for d in one_to_n["data"]] == [(0, "score"), (1, "score")]
    irrelevant, relevant = (d["score"] for d in one_to_n["data"])
    assert 0 <= irrelevant < relevant <= 1
    cohere = post(gateway, query=QUERY, documents=[IRRELEVANT, RELEVANT]).json()
    assert [relevant, irrelevant] == pytest.approx([r["relevance_score"] for r in cohere["results"]])
    other = "Where do bananas grow?"
    n_to_n = requests.post(f"{gateway.url}/v1/score", timeout=60,
                           json={"text_1": [QUERY, other], "text_2": [RELEVANT, IRRELEVANT]}).json()
    assert n_to_n["data"][0]["score"] == pytest.approx(relevant)
    assert post(gateway, "/score", text_1=["a", "b"], text_2=["c"]).status_code == 400


def test_litellm_tei_provider_payload(gateway):
    """The body LiteLLM's huggingface (TEI) rerank provider sends (llms/huggingface/rerank/transformation.py):
    TEI's fields plus `top_n`, which is honoured."""
    body = {"raw_scores": False, "truncate": False, "truncation_direction": "Right", "query": QUERY,
            "texts": [IRRELEVANT, RELEVANT, "Berlin is in Germany."], "top_n": 2, "return_text": True}
    ranks = requests.post(f"{gateway.url}/rerank", json=body, timeout=60).json()
    assert [(r["index"], r["text"]) for r in ranks] == [(1, RELEVANT), (2, "Berlin is in Germany.")]


def test_litellm_hosted_vllm_provider_payload(gateway):
    """The body LiteLLM's hosted_vllm rerank provider sends to /rerank (llms/hosted_vllm/rerank/transformation.py,
    None fields left out) and the fields it reads back."""
    body = {"model": "reranker", "query": QUERY, "documents": [IRRELEVANT, RELEVANT], "top_n": 1,
            "return_documents": True}
    results = requests.post(f"{gateway.url}/rerank", json=body, timeout=60).json()["results"]
    assert [(r["index"], r["document"]["text"]) for r in results] == [(1, RELEVANT)]
    assert 0 <= results[0]["relevance_score"] <= 1


def test_health_and_openapi(gateway, server):
    health = requests.get(f"{gateway.url}/health", timeout=10)
    assert health.status_code == 200
    assert health.json() == {"status": "ready", "models": ["reranker", "rerank-default"]}  # no internal address
    assert requests.get(f"{gateway.url}/health/live", timeout=10).json() == {"status": "live"}
    spec = requests.get(f"{gateway.url}/openapi.json", timeout=10).json()
    assert {"/v1/rerank", "/v2/rerank", "/rerank", "/score", "/v1/score", "/health"} <= set(spec["paths"])
    assert {"200", "400", "404", "503"} <= set(spec["paths"]["/v2/rerank"]["post"]["responses"])
