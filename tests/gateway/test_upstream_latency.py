"""The gateway's calls to Triton, timed per ensemble and outcome: the default model's, and the shadow candidate's
beside them."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from gateway import Settings, create_app
from gateway.settings import ShadowSettings
from tests.gateway.stub import StubClient

BODY = {"query": "q", "documents": ["a", "b"]}


def upstream(client: TestClient) -> dict[tuple[str, str], tuple[float, float]]:
    """(model, outcome) -> (count, sum of seconds) of gateway_upstream_seconds, read from /metrics."""
    found: dict[tuple[str, str], dict[str, float]] = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name in ("gateway_upstream_seconds_count", "gateway_upstream_seconds_sum"):
                found.setdefault((sample.labels["model"], sample.labels["outcome"]), {})[sample.name] = sample.value
    return {key: (values["gateway_upstream_seconds_count"], values["gateway_upstream_seconds_sum"])
            for key, values in found.items()}


def test_each_call_to_triton_is_timed_by_ensemble_and_outcome():
    with TestClient(create_app(Settings(), client=StubClient(rerank_delay_s=0.05))) as client:
        assert [client.post("/v1/rerank", json=BODY).status_code for _ in range(2)] == [200, 200]
        times = upstream(client)
    assert list(times) == [("reranker", "ok")]
    count, seconds = times[("reranker", "ok")]
    assert count == 2 and 0.1 <= seconds < 1.0
    with TestClient(create_app(Settings(), client=StubClient(error=RuntimeError("down")))) as client:
        assert client.post("/v1/rerank", json=BODY).status_code == 502
        assert upstream(client)[("reranker", "error")][0] == 1


def test_the_shadow_candidates_calls_are_timed_beside_the_primarys():
    settings = Settings(shadow=ShadowSettings("candidate", fraction=1.0))
    candidate = StubClient(rerank_delay_s=0.1)
    with TestClient(create_app(settings, client=StubClient(), clients={"candidate": candidate})) as client:
        assert client.post("/v1/rerank", json=BODY).status_code == 200
        deadline = time.monotonic() + 10
        while ("candidate", "ok") not in upstream(client) and time.monotonic() < deadline:
            time.sleep(0.05)
        times = upstream(client)
    assert times[("reranker", "ok")][0] == times[("candidate", "ok")][0] == 1
    assert times[("candidate", "ok")][1] >= 0.1 > times[("reranker", "ok")][1]
