"""The gateway process against the real tritonserver when things go wrong: a body built to cost work (many
objects, many rank fields) leaves /health/live instant; Triton going away and coming back (a TCP forwarder cut
and restored between them) gives 503s that name no address, a /health that follows, and a recovery within about a
second; the API key, the body deadline and the body limit on a real socket; a stop that answers the call in flight."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import requests

from tools.local_server import free_port

from tests.support.gateway import RunningGateway, start_gateway, stop_gateway
from .tcp_proxy import TcpProxy

QUERY = "What is the capital of France?"
RELEVANT = "Paris is the capital and largest city of France."
KEY = "test-key"


def rerank_status(gateway: RunningGateway, **headers: str) -> requests.Response:
    return requests.post(f"{gateway.url}/v2/rerank", json={"query": QUERY, "documents": [RELEVANT]},
                         headers=headers, timeout=30)


def live_latencies(gateway: RunningGateway, until: threading.Event) -> list[float]:
    latencies = []
    while not until.is_set():
        start = time.perf_counter()
        assert requests.get(f"{gateway.url}/health/live", timeout=120).status_code == 200
        latencies.append(time.perf_counter() - start)
        time.sleep(0.05)
    return latencies


def test_a_rank_fields_flood_leaves_health_live_instant(gateway):
    """10,000 objects and 200,000 rank fields (2.2 MB): every object is matched against the fields, the last one
    has none of them. It took 110 s on the event loop, /health/live waiting all along."""
    documents = [{"text": "a"}] * 9_999 + [{"other": "a"}]
    fields = ["text", *(f"f{i}" for i in range(200_000))]
    done, latencies = threading.Event(), []
    watcher = threading.Thread(target=lambda: latencies.extend(live_latencies(gateway, done)))
    watcher.start()
    start = time.perf_counter()
    try:
        response = requests.post(f"{gateway.url}/v1/rerank", timeout=30,
                                 json={"query": QUERY, "documents": documents, "rank_fields": fields})
    finally:
        elapsed = time.perf_counter() - start
        done.set()
        watcher.join()
    print(f"rank_fields flood: answered in {elapsed:.2f} s; /health/live max {max(latencies) * 1000:.0f} ms "
          f"over {len(latencies)} probes")
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "documents[9999]"
    assert elapsed < 5
    assert max(latencies) < 0.5


@pytest.fixture(scope="module")
def proxied(server, tmp_path_factory) -> Iterator[tuple[RunningGateway, TcpProxy]]:
    target = urlsplit(f"grpc://{server.grpc_url}")
    proxy = TcpProxy(free_port(), (target.hostname, target.port))
    proxy.start()
    gateway = start_gateway(f"127.0.0.1:{proxy.port}", tmp_path_factory.mktemp("proxied") / "gateway.log")
    yield gateway, proxy
    stop_gateway(gateway)
    proxy.stop()


def test_triton_away_and_back(proxied):
    gateway, proxy = proxied
    assert rerank_status(gateway).status_code == 200
    proxy.stop()
    down_since = time.monotonic()
    refused = rerank_status(gateway)
    assert refused.status_code == 503
    assert refused.json()["message"] == "the reranker server is unavailable: retry after 1 s"
    assert "127.0.0.1" not in refused.text and str(proxy.port) not in refused.text
    start = time.perf_counter()
    health = requests.get(f"{gateway.url}/health", timeout=10)
    assert (health.status_code, health.json()["status"]) == (503, "unavailable")
    assert time.perf_counter() - start < 3
    while time.monotonic() - down_since < 20:  # a readiness probe each second: gRPC's reconnect backoff grows
        assert requests.get(f"{gateway.url}/health", timeout=10).status_code == 503
        time.sleep(1)
    proxy.start()
    back = time.monotonic()
    while rerank_status(gateway).status_code != 200:
        assert time.monotonic() - back < 15, "the gateway did not recover"
        time.sleep(0.1)
    recovered = time.monotonic() - back
    print(f"Triton back after 20 s away: the gateway answered 200 after {recovered:.2f} s")
    assert recovered < 2.5  # was 6 s here, 15-20 s after longer outages: gRPC's reconnect backoff had grown
    assert requests.get(f"{gateway.url}/health", timeout=10).status_code == 200


@pytest.fixture(scope="module")
def guarded(server, tmp_path_factory) -> Iterator[RunningGateway]:
    gateway = start_gateway(server.grpc_url, tmp_path_factory.mktemp("guarded") / "gateway.log",
                            GATEWAY_API_KEY=KEY, GATEWAY_BODY_TIMEOUT_S="1", GATEWAY_MAX_BODY_BYTES="100000")
    yield gateway
    stop_gateway(gateway)


def test_the_api_key_is_required_and_probes_stay_open(guarded):
    assert rerank_status(guarded).status_code == 401
    assert rerank_status(guarded, Authorization="Bearer wrong").status_code == 401
    assert rerank_status(guarded, Authorization=f"Bearer {KEY}").status_code == 200
    assert requests.get(f"{guarded.url}/health/live", timeout=10).status_code == 200
    assert requests.get(f"{guarded.url}/health", timeout=10).status_code == 200


def test_a_slow_body_gets_408_and_a_large_one_413(guarded):
    host, port = urlsplit(guarded.url).hostname, urlsplit(guarded.url).port
    with socket.create_connection((host, port), timeout=10) as connection:
        connection.sendall(f"POST /v2/rerank HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                           "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\": ".encode())
        start = time.perf_counter()
        answer = b""
        while not answer.endswith(b"}"):  # the head, then the JSON body
            answer += connection.recv(4096)
        waited = time.perf_counter() - start
        answer = answer.decode()
    assert answer.startswith("HTTP/1.1 408"), answer
    assert "the body did not arrive within 1 s" in answer
    assert 0.9 < waited < 3
    large = requests.post(f"{guarded.url}/v2/rerank", json={"query": QUERY, "documents": ["a" * 200_000]},
                          headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    assert (large.status_code, large.json()["message"]) == (413, "the body is larger than the limit of 100000 bytes")


def test_a_stopping_gateway_answers_the_call_it_has_and_takes_no_new_one(guarded):
    """What a rolling update of the gateway relies on: SIGTERM closes the listener, and a call already taken is
    still answered in full (a request of 512 documents: seconds on the CPU server, so it is in flight then). uvicorn
    ends by the signal it was sent, once its calls are answered. The module's last test: it stops the gateway."""
    gateway = guarded
    documents = [f"{RELEVANT} Paragraph {i} of a long page about French cities and their rivers." for i in range(512)]
    answer: dict[str, object] = {}

    def call() -> None:
        answer["response"] = requests.post(f"{gateway.url}/v2/rerank", json={"query": QUERY, "documents": documents},
                                           headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
        answer["at"] = time.monotonic()

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(1.0)
    signalled = time.monotonic()
    gateway.process.terminate()
    caller.join(timeout=120)
    response = answer["response"]
    assert isinstance(response, requests.Response) and response.status_code == 200, response
    assert len(response.json()["results"]) == 512
    assert answer["at"] > signalled, "the call ended before the stop: it tests nothing"
    assert gateway.process.wait(timeout=30) == -signal.SIGTERM
    with pytest.raises(requests.ConnectionError):
        rerank_status(gateway)
