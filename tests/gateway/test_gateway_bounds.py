"""Unit level, no server (a stub in place of the client): the gateway checks each call against the server's limits
in the caller's own field names before Triton sees it, refuses loose types, bounds its work and its echoes, and
guards its API with a key, a body size and a body deadline; vLLM's /score pairs; a split call straddling a
calibration swap is sent again."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from gateway import Settings, create_app
from gateway.documents import document_texts
from reranker_client import CalibrationChangedError

from .stub import LIMITS, StubClient, post

BIG = "x" * (LIMITS.max_document_bytes + 1)
BIG_QUERY = "q" * (LIMITS.max_query_bytes + 1)


@pytest.mark.parametrize(
    "path,body,message,param",
    [
        ("/v2/rerank", {"documents": ["a", "b", "c", BIG]}, f"documents[3] is {len(BIG)} bytes, more than the limit "
         f"of {LIMITS.max_document_bytes}", "documents[3]"),
        ("/v1/rerank", {"documents": ["a", {"text": BIG}]}, f"documents[1] is {len(BIG)} bytes, more than the limit "
         f"of {LIMITS.max_document_bytes}", "documents[1]"),
        ("/v1/rerank", {"query": BIG_QUERY, "documents": [BIG]}, f"query is {len(BIG_QUERY)} bytes, more than the "
         f"limit of {LIMITS.max_query_bytes}", "query"),
        ("/rerank", {"documents": ["a"], "instruction": BIG_QUERY}, f"instruction is {len(BIG_QUERY)} bytes, more "
         f"than the limit of {LIMITS.max_query_bytes}", "instruction"),
        ("/score", {"text_1": "q", "text_2": ["a", BIG]}, f"text_2[1] is {len(BIG)} bytes, more than the limit of "
         f"{LIMITS.max_document_bytes}", "text_2[1]"),
        ("/score", {"text_1": ["q", BIG_QUERY], "text_2": ["a", "b"]}, f"text_1[1] is {len(BIG_QUERY)} bytes, more "
         f"than the limit of {LIMITS.max_query_bytes}", "text_1[1]"),
    ],
)
def test_limits_are_checked_before_triton_in_the_callers_names(path, body, message, param):
    stub = StubClient()
    response = post(stub, path, **body)
    assert response.status_code == 400, response.text
    assert (response.json()["message"], response.json()["error"]["param"]) == (message, param)
    assert stub.calls == []


def test_tei_limits_name_texts():
    stub = StubClient()
    response = post(stub, "/rerank", documents=None, texts=["a", "b", "c", BIG])
    assert response.status_code == 422
    assert response.json() == {"error": f"texts[3] is {len(BIG)} bytes, more than the limit of "
                               f"{LIMITS.max_document_bytes}", "error_type": "Validation"}
    assert stub.calls == []


@pytest.mark.parametrize(
    "path,body,param",
    [
        ("/v1/rerank", {"top_n": True}, "top_n"),
        ("/v2/rerank", {"top_n": "1"}, "top_n"),
        ("/v2/rerank", {"top_n": 1.0}, "top_n"),
        ("/v2/rerank", {"max_tokens_per_doc": False}, "max_tokens_per_doc"),
        ("/rerank", {"return_documents": "yes"}, "return_documents"),
        ("/v1/rerank", {"return_raw_scores": 1}, "return_raw_scores"),
        ("/rerank", {"documents": None, "texts": ["a"], "top_n": True}, "top_n"),
        ("/rerank", {"documents": None, "texts": ["a"], "truncate": "false"}, "truncate"),
        ("/score", {"text_1": "q", "text_2": "a", "truncate_prompt_tokens": True}, "truncate_prompt_tokens"),
    ],
)
def test_loose_types_are_refused(path, body, param):
    stub = StubClient()
    response = post(stub, path, **body)
    assert response.status_code in (400, 422), response.text
    error = response.json()
    assert (error["error"]["param"] == param) if "message" in error else error["error"].startswith(f"{param}: ")
    assert stub.calls == []


def test_tei_top_n_is_honoured():
    stub = StubClient()
    response = post(stub, "/rerank", documents=None, texts=["a", "b", "c"], top_n=2)
    assert response.status_code == 200
    assert [r["index"] for r in response.json()] == [2, 1]
    assert stub.calls[0][2] == 2
    assert post(stub, "/rerank", documents=None, texts=["a", "b"], top_n=5).status_code == 200
    assert stub.calls[1][2] == 2  # above the count: all of them
    assert post(stub, "/rerank", documents=None, texts=["a"], top_n=0).json() == {
        "error": "top_n must be at least 1, got 0", "error_type": "Validation"}


def test_a_long_model_name_is_not_echoed_whole():
    response = post(StubClient(), model="m" * 1_000_000)
    assert response.status_code == 404
    assert response.json()["message"] == (
        f"model {'m' * 64!r}... (1000000 characters) is not served here; served: reranker (GET /health lists them)")
    assert len(response.content) < 1000


def test_rank_fields_work_is_linear_and_their_echo_bounded():
    documents, fields = [{"text": "a"}] * 10_000, [f"f{i}" for i in range(200_000)]
    start = time.perf_counter()
    texts = document_texts(documents, ["text", *fields])
    assert time.perf_counter() - start < 1.0  # was ~110 s: every document walked every rank field
    assert texts == ["a"] * 10_000
    response = post(StubClient(), documents=[{"title": "t"}], rank_fields=fields)
    assert response.status_code == 400
    assert response.json()["message"] == (
        "documents[0] is missing: a document object needs one of the rank fields "
        "['f0', 'f1', 'f2', 'f3', 'f4'] and 199995 more")


def test_a_split_call_straddling_a_calibration_swap_is_sent_again_once():
    stub = StubClient(CalibrationChangedError("calibrated by different profiles"), failures=1)
    response = post(stub)
    assert response.status_code == 200, response.text
    assert len(stub.calls) == 2


def test_health_is_503_when_triton_does_not_answer_in_time():
    settings = Settings(health_timeout_s=0.2)
    with TestClient(create_app(settings, client=StubClient(ready_delay_s=30))) as client:
        start = time.perf_counter()
        response = client.get("/health")
        assert time.perf_counter() - start < 2
        assert client.get("/health/live").json() == {"status": "live"}
    assert (response.status_code, response.json()) == (503, {"status": "unavailable", "models": ["reranker"]})


def test_api_key_guards_the_api_but_not_the_probes(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("s3cret\n")
    settings = Settings.from_env({"GATEWAY_API_KEY_FILE": str(key_file), "GATEWAY_API_KEY": "ignored"})
    assert settings.api_key == "s3cret" and "s3cret" not in repr(settings)
    assert Settings.from_env({"GATEWAY_API_KEY": "k"}).api_key == "k"
    body = {"query": "q", "documents": ["a"]}
    with TestClient(create_app(settings, client=StubClient())) as client:
        missing = client.post("/v2/rerank", json=body)
        wrong = client.post("/rerank", json=body, headers={"Authorization": "Bearer s3cre"})
        right = client.post("/v2/rerank", json=body, headers={"Authorization": "Bearer s3cret"})
        score = client.post("/score", json={"text_1": "q", "text_2": "a"}, headers={"Authorization": "Bearer x"})
        probes = [client.get(path).status_code for path in ("/health", "/health/live", "/openapi.json")]
    assert (missing.status_code, wrong.status_code, right.status_code, score.status_code) == (401, 401, 200, 401)
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["message"] == "a valid API key is required: send `Authorization: Bearer <key>`"
    assert probes == [200, 200, 200]


def test_a_body_over_the_limit_is_413_declared_or_streamed():
    stub = StubClient()
    payload = b'{"query": "q", "documents": ["' + b"a" * 2000 + b'"]}'
    with TestClient(create_app(Settings(max_body_bytes=1000), client=stub)) as client:
        declared = client.post("/v1/rerank", content=payload, headers={"Content-Type": "application/json"})
        streamed = client.post("/v1/rerank", content=iter([payload[:600], payload[600:]]),
                               headers={"Content-Type": "application/json"})
        small = client.post("/v1/rerank", json={"query": "q", "documents": ["a"]})
    for response in (declared, streamed):
        assert response.status_code == 413
        assert response.json()["message"] == "the body is larger than the limit of 1000 bytes"
    assert small.status_code == 200
    assert len(stub.calls) == 1


@pytest.mark.parametrize(
    "text_1,text_2,sent",
    [
        ("q", "a", [("q", ["a"])]),
        ("q", ["a", "b"], [("q", ["a", "b"])]),
        (["q"], ["a", "b"], [("q", ["a", "b"])]),
        (["q1", "q2", "q1"], ["a", "b", "c"], [("q1", ["a", "c"]), ("q2", ["b"])]),
    ],
)
def test_score_pairs_as_vllm_does_in_one_call_per_query(text_1, text_2, sent):
    stub = StubClient()
    response = post(stub, "/score", query=None, documents=None, text_1=text_1, text_2=text_2)
    assert response.status_code == 200, response.text
    assert [(call[0], call[1]) for call in stub.calls] == sent
    body = response.json()
    assert (body["object"], body["model"], body["id"][:6]) == ("list", "reranker", "score-")
    scores = {}  # the stub scores document i of a call (i / n): find each pair's expected score
    for query, documents in sent:
        for i, document in enumerate(documents):
            scores[(query, document)] = i / len(documents)
    queries = [text_1] * len(text_2) if isinstance(text_1, str) else text_1 * (len(text_2) if len(text_1) == 1 else 1)
    documents = [text_2] if isinstance(text_2, str) else text_2
    assert [(d["index"], d["object"]) for d in body["data"]] == [(i, "score") for i in range(len(documents))]
    assert [d["score"] for d in body["data"]] == pytest.approx([scores[p] for p in zip(queries, documents)])


@pytest.mark.parametrize(
    "body,status,message,param",
    [
        ({"text_1": ["q1", "q2"], "text_2": ["a", "b", "c"]}, 400,
         "text_1 holds 2 texts and text_2 3: input lengths must be either 1:1, 1:N or N:N", "text_2"),
        ({"text_1": [], "text_2": ["a"]}, 400, "text_1 is empty: at least one text element must be given", "text_1"),
        ({"text_1": "q", "text_2": []}, 400, "text_2 is empty: at least one text_pair element must be given", "text_2"),
        ({"text_1": "q", "text_2": ["a"], "model": "other"}, 404,
         "model 'other' is not served here; served: reranker (GET /health lists them)", "model"),
    ],
)
def test_score_refusals_name_the_field(body, status, message, param):
    response = post(StubClient(), "/v1/score", query=None, documents=None, **body)
    assert response.status_code == status
    assert (response.json()["error"]["message"], response.json()["error"]["param"]) == (message, param)


def test_a_score_call_of_many_queries_ends_by_the_gateway_timeout():
    """One Triton request per distinct text_1: 6 of them, one at a time, 0.4 s each, do not fit a 1 s timeout; the
    call is 504 at the timeout, not after every request (2.4 s), and the requests still waiting are never sent."""
    stub = StubClient(rerank_delay_s=0.4)
    settings = Settings(timeout_s=1.0, max_concurrency=1)
    response = post(stub, "/score", settings, query=None, documents=None, text_1=[f"q{i}" for i in range(6)],
                    text_2=[f"d{i}" for i in range(6)])
    assert response.status_code == 504, response.text
    assert response.json()["error"]["message"] == ("the reranker server did not answer in time: 6 queries, 1 s for "
                                                   "all of them")
    assert 1 <= len(stub.calls) < 6  # here 3: the third was cancelled at 1 s, the last three never sent
