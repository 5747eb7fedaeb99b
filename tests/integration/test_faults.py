"""Faults: the engine's stub process dies; requests fail fast with a clear error, the server keeps running,
and reloading the engine model (Triton's repository API) brings correct answers back."""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tritonclient.utils import InferenceServerException

from reranker_client import RerankClient
from reranker_client.healthcheck import check
from tests.triton_server import RunningServer, start_server, stop_server, stub_pids

QUERY, RELEVANT, IRRELEVANT = "What is the capital of France?", "Paris is the capital of France.", "Bananas are yellow."


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A server of its own: this module kills parts of it."""
    running = start_server(tmp_path_factory.mktemp("faults") / "server.log")
    yield running
    stop_server(running)


def _rank(server: RunningServer) -> list[int]:
    client = RerankClient(server.grpc_url, protocol="grpc")
    try:
        return [r.index for r in client.rerank(QUERY, [IRRELEVANT, RELEVANT]).results]
    finally:
        client.close()


def test_engine_process_death_is_reported_and_a_reload_recovers(own_server):
    assert _rank(own_server) == [1, 0]
    pids = stub_pids(own_server, "rerank_engine")
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGKILL)
    time.sleep(1)

    started = time.monotonic()
    with pytest.raises(InferenceServerException) as raised:
        _rank(own_server)
    assert time.monotonic() - started < 10
    assert "Stub process 'rerank_engine_0_0' is not healthy" in raised.value.message()
    assert own_server.is_alive()
    # Triton still calls the model READY; the deep health check does not.
    assert check(own_server.grpc_url) is not None and "not healthy" in check(own_server.grpc_url)

    # A plain `load` of a model whose files did not change is a no-op in Triton 2.51: unload, then load.
    for action in ("unload", "load"):
        url = f"http://{own_server.http_url}/v2/repository/models/rerank_engine/{action}"
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=300) as response:
            assert response.status == 200
    assert _rank(own_server) == [1, 0]
    assert check(own_server.grpc_url) is None
    assert stub_pids(own_server, "rerank_engine") and stub_pids(own_server, "rerank_engine") != pids


def _rank_or_refusal(server: RunningServer) -> str:
    try:
        return "ok" if _rank(server) == [1, 0] else "wrong"
    except InferenceServerException as exc:
        if str(exc.status()) == "StatusCode.UNAVAILABLE" and "Server is stopping" in exc.message():
            return "refused"
        return f"error: {exc.message()}"


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[RunningServer]:
    """A server no test has damaged: exit code 0 after SIGTERM is only asserted for a healthy one."""
    running = start_server(tmp_path / "server.log")
    yield running
    stop_server(running)


def test_graceful_shutdown_answers_every_in_flight_request(fresh_server):
    """SIGTERM under load: every request gets its answer or an explicit UNAVAILABLE, none hangs, exit code 0.

    Triton drains each step's queue, but a request between two ensemble steps when the next step's scheduler
    has stopped is refused ("Server is stopping"): that is why the Helm chart drains traffic before SIGTERM.
    """
    from concurrent.futures import ThreadPoolExecutor

    assert _rank(fresh_server) == [1, 0]
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(_rank_or_refusal, fresh_server) for _ in range(8)]
        time.sleep(0.5)
        os.kill(fresh_server.process.pid, signal.SIGTERM)
        outcomes = [f.result(timeout=120) for f in futures]
    print("graceful shutdown outcomes:", outcomes)
    assert set(outcomes) <= {"ok", "refused"}, outcomes
    fresh_server.process.wait(timeout=120)
    assert fresh_server.process.returncode == 0
