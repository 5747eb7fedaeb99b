"""A slow candidate does not slow the primary: the P50 of the same calls through a gateway without a shadow and
through one that sends every call to a candidate that never answers (a listener that accepts connections and
stays silent, so every shadow call waits for its deadline and the queue fills), measured alternately in one run.

The candidate takes no CPU here on purpose: on a 2-core machine a candidate that computes competes with the primary
for the cores whatever the gateway does; what is measured is the gateway's own cost of shadowing."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

import numpy as np
import pytest

from tests.support.gateway import RunningGateway, start_gateway, stop_gateway
from tests.gateway.test_two_models import DOCUMENTS, QUERIES, key, series, wait_ready

CALLS = 100  # per gateway
MAX_ADDED_P50_MS = 5.0


def timed_call(gateway: RunningGateway, query: str) -> float:
    body = json.dumps({"query": query, "documents": DOCUMENTS}).encode()
    request = urllib.request.Request(f"{gateway.url}/v2/rerank", body, {"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        response.read()
    return (time.perf_counter() - start) * 1000


@pytest.mark.alone
def test_a_candidate_that_never_answers_adds_under_5_ms_to_the_primarys_p50(server, tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections are accepted by the kernel and never answered
    candidate_url = f"127.0.0.1:{silent.getsockname()[1]}"
    alone = start_gateway(server.grpc_url, tmp_path / "alone.log")
    shadowed = start_gateway(server.grpc_url, tmp_path / "shadowed.log", GATEWAY_SHADOW_MODEL="reranker",
                             GATEWAY_SHADOW_FRACTION="1", GATEWAY_SHADOW_TRITON_GRPC_URL=candidate_url,
                             GATEWAY_SHADOW_TIMEOUT_S="2", GATEWAY_SHADOW_QUEUE="8")
    try:
        for gateway in (alone, shadowed):
            wait_ready(gateway)
            timed_call(gateway, QUERIES[0])  # connections and the limits read before timing
        times = {"alone": [], "shadowed": []}
        for i in range(CALLS):
            for name, gateway in (("alone", alone), ("shadowed", shadowed)):
                times[name].append(timed_call(gateway, QUERIES[i % len(QUERIES)]))
        values = series(shadowed)
    finally:
        stop_gateway(alone)
        stop_gateway(shadowed)
        silent.close()
    p50 = {name: float(np.percentile(ms, 50)) for name, ms in times.items()}
    labels = {"primary": "reranker", "candidate": "reranker"}
    dropped = values[key("gateway_shadow_calls_total", **labels, outcome="dropped")]
    failed = values[key("gateway_shadow_calls_total", **labels, outcome="failed")]
    print(f"P50 alone {p50['alone']:.2f} ms, with the silent shadow {p50['shadowed']:.2f} ms; "
          f"shadow calls dropped {dropped:.0f}, failed {failed:.0f}")
    assert dropped > 0  # the queue did fill: the candidate was slow for real
    assert values[key("gateway_shadow_calls_total", **labels, outcome="compared")] == 0
    assert p50["shadowed"] - p50["alone"] < MAX_ADDED_P50_MS, p50
