"""Every call the gateway answers is counted by path and status, its own refusals before the body (401, 413) and
after it (400), Triton's errors it passes on (503) and unknown paths under one label."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from gateway import Settings, create_app
from tests.gateway.stub import StubClient

BODY = {"query": "q", "documents": ["a", "b"]}


def calls(client: TestClient) -> dict[tuple[str, str], float]:
    return {(s.labels["path"], s.labels["status"]): s.value
            for family in text_string_to_metric_families(client.get("/metrics").text)
            for s in family.samples if s.name == "gateway_calls_total"}


def test_each_answer_is_counted_by_path_and_status():
    settings = Settings(api_key="k", max_body_bytes=1000, max_inflight_body_bytes=1000)
    key = {"Authorization": "Bearer k"}
    with TestClient(create_app(settings, client=StubClient())) as client:
        assert client.post("/v2/rerank", json=BODY, headers=key).status_code == 200
        assert client.post("/v2/rerank", json=BODY, headers=key).status_code == 200
        assert client.post("/v1/rerank", json=BODY).status_code == 401
        assert client.post("/v2/rerank", json={**BODY, "documents": ["x" * 2000]}, headers=key).status_code == 413
        assert client.post("/v2/rerank", json={"query": "q"}, headers=key).status_code == 400
        assert client.post("/rerank", json={"query": "q", "texts": []}, headers=key).status_code == 400
        assert client.get("/no/such/path", headers=key).status_code == 404
        assert calls(client) == {("/v2/rerank", "200"): 2, ("/v1/rerank", "401"): 1, ("/v2/rerank", "413"): 1,
                                 ("/v2/rerank", "400"): 1, ("/rerank", "400"): 1, ("other", "404"): 1}


def test_a_triton_refusal_passed_on_is_counted():
    stopping = InferenceServerException(msg="Server is stopping", status="503")
    overloaded = StubClient(error=stopping, failures=10)
    with TestClient(create_app(Settings(), client=overloaded)) as client:
        assert client.post("/v2/rerank", json=BODY).status_code == 503
        assert calls(client) == {("/v2/rerank", "503"): 1}
