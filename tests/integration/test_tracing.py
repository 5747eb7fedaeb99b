"""One traced call, from the gateway to vLLM: the gateway (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) spans the HTTP call
and its gRPC request to Triton, whose `traceparent` the shared server (started with the same variable) continues
with its spans of the request, the ensemble and each step; the engine step adds its time in vLLM. Every span reaches
a real OTLP/HTTP receiver as one trace with its parent links."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import requests

from tests.support.gateway import RunningGateway, start_gateway, stop_gateway
from tests.support.otlp import OtlpReceiver, Span
from tests.support.triton_server import RunningServer

pytestmark = pytest.mark.integration

STEPS = ("rerank_preprocess", "rerank_engine", "rerank_calibrate")
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"


@pytest.fixture(scope="module")
def traced(server: RunningServer, tmp_path_factory) -> Iterator[tuple[RunningGateway, OtlpReceiver]]:
    assert server.traces_url, "the test server was started without tracing"
    receiver = OtlpReceiver(urlsplit(server.traces_url).port).start()
    gateway = start_gateway(server.grpc_url, tmp_path_factory.mktemp("traced") / "gateway.log",
                            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="200")
    yield gateway, receiver
    stop_gateway(gateway)
    receiver.stop()


def only(spans: list[Span], name: str, parent: Span | None = None) -> Span:
    """The one span of that name (under `parent`)."""
    found = [s for s in spans if s.name == name and (parent is None or s.parent_id == parent.span_id)]
    assert len(found) == 1, (name, parent, spans)
    return found[0]


def test_a_call_through_the_gateway_is_one_trace_down_to_vllm(traced):
    gateway, receiver = traced
    response = requests.post(f"{gateway.url}/v2/rerank", timeout=60, json={
        "query": "What is the capital of France?", "documents": ["Bananas are yellow.", "Paris is in France."]})
    assert response.status_code == 200, response.text
    call = next(s for s in receiver.wait_for_any("POST /v2/rerank", timeout_s=10) if s.parent_id == "")
    spans = receiver.wait_for(call.trace_id, {"vLLM", *STEPS, "reranker", "InferRequest"}, timeout_s=15)

    assert call.service == "reranker-gateway"
    infer = only(spans, MODEL_INFER, call)
    assert infer.service == "reranker-gateway"
    request = only(spans, "InferRequest", infer)
    ensemble = only(spans, "reranker", request)
    assert {s.service for s in (request, ensemble)} == {"triton-inference-server"}
    steps = {name: only(spans, name, ensemble) for name in STEPS}
    for step in steps.values():
        only(spans, "compute", step)
    vllm = only(spans, "vLLM")
    assert vllm.parent_id == steps["rerank_engine"].span_id and vllm.service == "rerank_engine"
    # the embedded MiniLM is a bi-encoder: the query is a sequence of its own beside the two documents
    assert (vllm.attributes["sequences"], vllm.events) == (3, ("handed over",))
    assert "wait for in-flight room" not in {s.name for s in spans}  # a lone small request never waits


def test_the_readiness_probe_leaves_no_trace(traced):
    gateway, receiver = traced
    requests_traced = len(receiver.wait_for_any("InferRequest", timeout_s=10))
    assert requests.get(f"{gateway.url}/health", timeout=30).status_code == 200  # its probe pair went through Triton
    time.sleep(1.5)  # past both batching delays (the gateway's 0.2 s, Triton's 0.5 s)
    assert len(receiver.wait_for_any("InferRequest", timeout_s=0)) == requests_traced
    assert not receiver.wait_for_any("GET /health", timeout_s=0)
