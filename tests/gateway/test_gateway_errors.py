"""Unit level, no server: how the gateway answers each kind of Triton failure, and what it sends Triton for each
API's fields (a stub in place of the client)."""

from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient
from tritonclient.utils import InferenceServerException

from gateway import Settings, create_app
from gateway.engine_watch import EngineLost
from gateway.schemas import MAX_DEPTH
from python_backends.errors import InvalidRequest, Overloaded, StepError
from reranker_client import CalibrationChangedError
from reranker_client.healthcheck import DOCUMENTS, QUERY

from .stub import StubClient, post


UNAVAILABLE = "the reranker server is unavailable: retry after 1 s"


def answered(error: StepError, status: str, ensemble: bool = True) -> InferenceServerException:
    """A step's error as the client raises it: the step's wire message, after the ensemble's prefix."""
    prefix = "in ensemble 'reranker', " if ensemble else ""
    return InferenceServerException(msg=prefix + error.server_error().message(), status=status)


@pytest.mark.parametrize(
    "error,status,message,param",
    [
        (InferenceServerException(msg="in ensemble 'reranker', Exceeds maximum queue size", status="StatusCode.UNAVAILABLE"),
         503, "the reranker server is overloaded: retry after 1 s", None),
        (answered(Overloaded("rerank_engine is over its waiting bound (5000 tokens wait for vLLM, this request has "
                             "900, the bound is 5200): retry later"), "StatusCode.UNAVAILABLE"), 503, "the reranker server is overloaded: retry after 1 s", None),
        (InferenceServerException(msg="Server is stopping", status="503"), 503, UNAVAILABLE, None),
        (InferenceServerException(msg="Request for unknown model", status="StatusCode.NOT_FOUND"), 503, UNAVAILABLE, None),
        (InferenceServerException(msg="failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:8001: "
                                  "Failed to connect to remote host", status="StatusCode.UNAVAILABLE"), 503, UNAVAILABLE, None),
        (ConnectionRefusedError("connection refused 10.0.0.7:8001"), 503, UNAVAILABLE, None),
        (answered(InvalidRequest("QUERY is empty", "QUERY"), "StatusCode.INVALID_ARGUMENT"), 400, "query is empty", "query"),
        (answered(InvalidRequest("DOCUMENTS[1] is empty", "DOCUMENTS[1]"), "400", ensemble=False), 400, "documents[1] is empty", "documents[1]"),
        (InvalidRequest("TOP_N must be between 1 and the number of documents (2), got 5", "TOP_N"), 400,
         "top_n must be between 1 and the number of documents (2), got 5", "top_n"),
        (InferenceServerException(msg="deadline", status="StatusCode.DEADLINE_EXCEEDED"), 504,
         "the reranker server did not answer in time", None),
        (InferenceServerException(msg="Stub process is not healthy", status="StatusCode.INTERNAL"), 502,
         "the reranker server failed the request", None),
        (CalibrationChangedError("the requests of one call were calibrated by different profiles"), 503, UNAVAILABLE, None),
        (EngineLost(InferenceServerException(msg="in ensemble 'reranker', Stub process 'rerank_engine_0_0' is not "
                                             "healthy.", status="StatusCode.INTERNAL")), 503, UNAVAILABLE, None),
    ],
)
def test_triton_errors_map_to_http_statuses_in_the_callers_words(error, status, message, param):
    response = post(StubClient(error))
    assert response.status_code == status
    body = response.json()
    assert body["message"] == body["detail"] == body["error"]["message"] == message
    assert (body["error"]["code"], body["error"]["param"]) == (status, param)
    assert ("retry-after" in response.headers) == (status == 503)


@pytest.mark.parametrize(
    "error,status,error_type,message",
    [
        (InferenceServerException(msg="Exceeds maximum queue size", status="StatusCode.UNAVAILABLE"), 429, "Overloaded",
         "the reranker server is overloaded: retry after 1 s"),
        (answered(Overloaded("preprocess is over its work budget (9000 of 10000 document tokens in flight, this "
                             "request needs up to 2000): retry later"), "StatusCode.UNAVAILABLE"),
         429, "Overloaded", "the reranker server is overloaded: retry after 1 s"),
        (ConnectionRefusedError("connection refused"), 503, "Unhealthy", UNAVAILABLE),
        (answered(InvalidRequest("DOCUMENTS[0] is empty", "DOCUMENTS[0]"), "StatusCode.INVALID_ARGUMENT"), 422, "Validation", "texts[0] is empty"),
        (InferenceServerException(msg="Stub process is not healthy", status="StatusCode.INTERNAL"), 424, "Backend",
         "the reranker server failed the request"),
    ],
)
def test_tei_errors_are_teis(error, status, error_type, message):
    response = post(StubClient(error), "/rerank", query="q", texts=["a"], documents=None)
    assert response.status_code == status
    assert response.json() == {"error": message, "error_type": error_type}


def test_top_n_is_capped_and_fields_reach_the_client():
    stub = StubClient()
    documents = ["a", {"text": "b", "id": 7}]
    response = post(stub, documents=documents, top_n=7, return_documents=True, rank_fields=["text"])
    assert response.status_code == 200
    assert stub.calls == [("q", ["a", "b"], 2, None, None)]
    assert [r["document"] for r in response.json()["results"]] == [{"text": "b", "id": 7}, {"text": "a"}]


def test_rank_fields_pick_and_order_the_object_fields():
    stub = StubClient()
    documents = [{"title": "T", "body": "B", "text": "unused"}, {"body": "only body"}]
    assert post(stub, "/v2/rerank", documents=documents, rank_fields=["body", "title"]).status_code == 200
    assert stub.calls[0][1] == ["body: B\ntitle: T", "only body"]
    response = post(stub, "/v2/rerank", documents=[{"title": "no text"}])
    assert response.status_code == 400
    assert response.json()["message"] == (
        "documents[0].text is missing: a document object needs one of the rank fields ['text']"
    )


@pytest.mark.parametrize(
    "path,fields,sent",
    [
        ("/v2/rerank", {"max_tokens_per_doc": 5}, 5),
        ("/rerank", {"truncate_prompt_tokens": 9}, 9),
        ("/rerank", {"truncate_prompt_tokens": -1}, None),
        ("/v1/rerank", {"max_tokens_per_doc": 0}, None),  # vLLM: 0 is no cap
        ("/rerank", {"max_tokens_per_doc": 12, "truncate_prompt_tokens": 8}, 8),
        ("/v2/rerank", {"max_tokens_per_doc": None}, None),  # LangChain sends null
    ],
)
def test_per_request_truncation_becomes_max_tokens_per_doc(path, fields, sent):
    stub = StubClient()
    assert post(stub, path, **fields).status_code == 200
    assert stub.calls[0][4] == sent


@pytest.mark.parametrize(
    "path,fields,param,message",
    [
        ("/v2/rerank", {"max_tokens_per_doc": 0}, "max_tokens_per_doc", "max_tokens_per_doc must be at least 1, got 0"),
        ("/v2/rerank", {"top_n": 0}, "top_n", "top_n must be at least 1, got 0"),
        ("/rerank", {"top_n": -1}, "top_n", "top_n must be at least 1, got -1"),
        ("/rerank", {"truncate_prompt_tokens": 0}, "truncate_prompt_tokens",
         "truncate_prompt_tokens must be -1 or at least 1, got 0"),
        ("/v1/rerank", {"model": "rerank-english-v3.0"}, "model",
         "model 'rerank-english-v3.0' is not served here; served: reranker (GET /health lists them)"),
        ("/v2/rerank", {"documents": ["a", 3]}, "documents[1]", "documents[1]: Input should be a valid string"),
        ("/v1/rerank", {"query": None}, "query", "query: Input should be a valid string"),
    ],
)
def test_bad_fields_are_named(path, fields, param, message):
    response = post(StubClient(), path, **fields)
    assert response.status_code == (404 if param == "model" else 400), response.text
    assert response.json()["error"]["param"] == param
    assert response.json()["message"] == message


def test_vllm_zero_top_n_is_all_and_documents_come_back_by_default():
    stub = StubClient()
    body = post(stub, "/rerank", top_n=0).json()
    assert [r["index"] for r in body["results"]] == [1, 0]
    assert [r["document"] for r in body["results"]] == [{"text": "b"}, {"text": "a"}]
    assert stub.calls[0][2] is None
    assert "document" not in post(stub, "/v2/rerank").json()["results"][0]


def test_tei_truncate_false_refuses_a_cut_text():
    stub = StubClient()
    stub.truncated = 1
    response = post(stub, "/rerank", documents=None, texts=["a", "b"], truncate=False)
    assert response.status_code == 422
    assert response.json() == {
        "error": "texts: 1 of the texts do not fit the model's 256 tokens with the query; send truncate: true to cut them",
        "error_type": "Validation",
    }
    assert post(stub, "/rerank", documents=None, texts=["a", "b"]).status_code == 200  # TEI's default: truncate


def test_too_many_documents_is_400_before_triton():
    stub = StubClient()
    with TestClient(create_app(Settings(max_documents=3), client=stub)) as client:
        response = client.post("/v1/rerank", json={"query": "q", "documents": list("abcd")})
    assert response.status_code == 400
    assert response.json()["detail"] == "documents holds 4 documents, more than the limit of 3"
    assert stub.calls == []


def test_health_is_503_when_triton_is_not_ready():
    with TestClient(create_app(Settings(), client=StubClient(ready=False))) as client:
        response = client.get("/health")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"


def test_health_is_503_when_the_ensemble_answers_with_an_error_and_200_while_it_is_busy():
    """Triton 2.51 keeps the engine READY after its stub died; every request then fails at once with this error."""
    dead = InferenceServerException("Failed to process the request(s) for model instance 'rerank_engine_0_0', message: "
                                    "Stub process 'rerank_engine_0_0' is not healthy.")
    with TestClient(create_app(Settings(), client=StubClient(dead))) as client:
        assert client.get("/health").status_code == 503
    busy = StubClient(rerank_delay_s=30)  # the probe queues behind real work
    with TestClient(create_app(Settings(health_timeout_s=0.4), client=busy)) as client:
        start = time.perf_counter()
        response = client.get("/health")
        assert time.perf_counter() - start < 2
    assert response.status_code == 200
    assert busy.calls[0][:2] == (QUERY, list(DOCUMENTS))  # the deep health check's probe pair


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


def test_a_shadow_setting_is_read_with_its_candidate_and_a_bad_one_names_its_variable():
    assert Settings.from_env({"GATEWAY_SHADOW_TOP_K": "x"}).shadow is None  # no candidate: its settings are not read
    shadow = Settings.from_env({"GATEWAY_SHADOW_MODEL": "c", "GATEWAY_SHADOW_TOP_K": "3"}).shadow
    assert (shadow.model, shadow.top_k, shadow.fraction) == ("c", 3, 0.1)
    with pytest.raises(ValueError) as caught:
        Settings.from_env({"GATEWAY_SHADOW_MODEL": "c", "GATEWAY_SHADOW_TOP_K": "x"})
    assert str(caught.value) == (
        "GATEWAY_SHADOW_TOP_K='x': Input should be a valid integer, unable to parse string as an integer")
    with pytest.raises(ValueError) as caught:
        Settings.from_env({"GATEWAY_SHADOW_MODEL": "c", "GATEWAY_SHADOW_FRACTION": "2"})
    assert str(caught.value) == "GATEWAY_SHADOW_FRACTION=2.0 is not in [0, 1]"


def test_a_body_that_is_not_json_gets_the_same_error_body():
    with TestClient(create_app(Settings(), client=StubClient())) as client:
        broken = client.post("/v2/rerank", content=b"{not json", headers={"Content-Type": "application/json"})
        undecodable = client.post(  # schemathesis found this one: FastAPI's own "error parsing the body"
            "/v2/rerank", content=b"2\x1f\tjng\xffk", headers={"Content-Type": "application/json"}
        )
    assert broken.status_code == 400
    assert broken.json()["message"] == broken.json()["error"]["message"] == "body: JSON decode error"
    assert undecodable.status_code == 400
    assert undecodable.json()["message"] == undecodable.json()["detail"] == "There was an error parsing the body"


LONE = "not valid Unicode: a lone surrogate (U+D800..U+DFFF) in "


@pytest.mark.parametrize("path,body,status,field,where", [
    ("/v1/rerank", {"query": "x\ud800", "documents": ["a"]}, 400, "query", "query"),
    ("/v2/rerank", {"query": "q", "documents": ["a", {"text": "b\udfff"}]}, 400, "documents", "documents[1].text"),
    ("/v2/rerank", {"query": "q", "documents": [{"t\ud800": "x"}]}, 400, "documents", "documents[0].t\\ud800"),
    ("/rerank", {"query": {"text": "x\udc00"}, "documents": ["a"]}, 400, "query", "query.text"),
    ("/rerank", {"query": "q", "texts": ["a", "b\ud800"]}, 422, "texts", "texts[1]"),
    ("/v1/rerank", {"model": "m\ud800", "query": "q", "documents": ["a"]}, 400, "model", "model"),
    ("/score", {"text_1": "q", "text_2": ["ok", "b\ud800"]}, 400, "text_2", "text_2[1]"),
    ("/v1/score", {"text_1": ["q\ud800"], "text_2": ["ok"]}, 400, "text_1", "text_1[0]"),
])
def test_text_that_is_not_valid_unicode_is_the_callers_error_naming_where(path, body, status, field, where):
    """JSON may escape a lone surrogate ("\\ud800"); no UTF-8 text holds one, so it is refused before anything
    encodes it, in each API's error shape, on every POST route."""
    stub = StubClient()
    with TestClient(create_app(Settings(), client=stub)) as client:
        routes = {route.path for route in client.app.routes if "POST" in getattr(route, "methods", ())}
        response = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert routes == {"/rerank", "/score", "/v1/rerank", "/v1/score", "/v2/rerank"}  # each one is in the table
    assert response.status_code == status
    message = f"{field}: {LONE}{where}"
    if status == 422:  # TEI's shape
        assert response.json() == {"error": message, "error_type": "Validation"}
    else:
        assert (response.json()["message"], response.json()["error"]["param"]) == (message, field)
    assert stub.calls == []


@pytest.mark.parametrize("path", ["/v1/rerank", "/v2/rerank", "/rerank"])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 400, 900])
def test_a_document_nested_too_deep_is_the_callers_error_naming_it(path, depth):
    """A document object nested past the limit is refused as bad input naming the document, however deep (400-900
    levels ran the Unicode check out of Python's stack, from 256 the answer's serializer: 500s with a traceback);
    at the limit it is answered, and returned as sent."""

    def documents(levels: int) -> str:  # nested `levels` deep, the documents list and the document object included
        return '["a", {"text": "b", "x": %s}]' % ("[" * (levels - 2) + "]" * (levels - 2))

    stub = StubClient()
    with TestClient(create_app(Settings(), client=stub)) as client:
        refused = client.post(path, content='{"query": "q", "documents": %s}' % documents(depth),
                              headers={"content-type": "application/json"})
        within = client.post("/v1/rerank", json={"query": "q", "documents": json.loads(documents(MAX_DEPTH))})
    assert refused.status_code == 400
    message = f"documents: nested more than {MAX_DEPTH} levels deep in documents[1]"
    assert (refused.json()["message"], refused.json()["error"]["param"]) == (message, "documents")
    assert within.status_code == 200, within.text
    assert [r["document"] for r in within.json()["results"]] == [json.loads(documents(MAX_DEPTH))[1], {"text": "a"}]
    assert len(stub.calls) == 1


def test_tei_rerank_routes_by_model_like_the_other_routes():
    stub = StubClient()
    settings = Settings(model_aliases=("rerank-default",))
    unknown = post(stub, "/rerank", settings, documents=None, texts=["a", "b"], model="bge")
    assert (unknown.status_code, unknown.json()) == (422, {
        "error": "model 'bge' is not served here; served: reranker, rerank-default (GET /health lists them)",
        "error_type": "Validation"})
    assert stub.calls == []
    for model in ("rerank-default", "reranker", None):
        answered = post(stub, "/rerank", settings, documents=None, texts=["a", "b"], model=model)
        assert answered.status_code == 200 and [r["index"] for r in answered.json()] == [1, 0]
    assert len(stub.calls) == 3


def test_a_flood_of_health_calls_sends_triton_one_probe_pair_a_second():
    """/health needs no key: 50 calls at once share one check, and one more within READY_FOR_S reuses its answer,
    so the keyless flood that slowed keyed callers reaches Triton as one probe pair."""
    from concurrent.futures import ThreadPoolExecutor

    stub = StubClient(rerank_delay_s=0.2)  # the probe pair takes a while, so the calls overlap it
    with TestClient(create_app(Settings(), client=stub)) as client:
        with ThreadPoolExecutor(max_workers=50) as pool:
            statuses = list(pool.map(lambda _: client.get("/health").status_code, range(50)))
        assert client.get("/health").status_code == 200
        assert statuses == [200] * 50 and len(stub.calls) == 1
        time.sleep(1.1)  # READY_FOR_S later, a new check
        assert client.get("/health").status_code == 200 and len(stub.calls) == 2
