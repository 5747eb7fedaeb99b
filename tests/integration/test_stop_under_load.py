"""A stop under load ends: SIGTERM to the server and its Python stubs (as scripts/stop_server.sh and the Helm chart's
preStop hook send it) while far more work waits in the engine step than the exit timeout could finish. The step
refuses what has not reached vLLM (UNAVAILABLE, "the server is stopping"), gives what is in vLLM its drain and then
gives it up, so every request is answered, tritonserver exits 0 within the drain and a bound, and leaves nothing
behind. Before the drain, the same stop ran into Triton's exit timeout with requests unanswered, and Triton 2.51 then
aborted in `malloc` and hung (docs/OPERATIONS.md)."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from tritonclient.utils import InferenceServerException

from python_backends.contract import ErrorKind, server_error
from reranker_client import RerankClient
from tests.support.in_flight import IN_FLIGHT_DOCUMENTS
from tests.support.shared_memory import LEDGER
from tests.support.triton_server import (
    PROBE_QUERY, TEST_VARIANT, RunningServer, copy_repository, signal_stop, start_server, stop_server,
)

# Timed from the signal to the server's exit: run with nothing else on the machine (scripts/test.sh's second pass;
# beside another server's tests it stopped in 10.6 s against 11.9 alone, but in the parallel pass, the run's longest
# stretch, it made the whole run 33 s longer)
pytestmark = pytest.mark.alone
DRAIN_S = 3  # the engine's drain_timeout_seconds here (the configs: 20 s, below the 30 s exit timeout)
# After the drain: the refused and given-up answers travel back, each step's finalize, vLLM's shutdown, on 2 busy cores
EXIT_BOUND_S = 20
REQUESTS = 12  # each 64 documents of 256 tokens: 16 k tokens against the CPU engine's 4096 in flight
STOPPING = "the server is stopping"


def _outcome(server: RunningServer, protocol: str) -> str:
    """One large request: "answered", or the kind and first words of the error it was answered with."""
    client = RerankClient(server.url(protocol), protocol=protocol, max_retries=0, timeout_s=120)
    try:
        client.rerank(PROBE_QUERY, IN_FLIGHT_DOCUMENTS)
        return "answered"
    except InferenceServerException as exc:
        error = server_error(str(exc.status()), exc.message())
        return f"{error.kind.value}: {error.text[:len(STOPPING)]}"
    finally:
        client.close()  # an open HTTP connection holds Triton's stop until its exit timeout (docs/OPERATIONS.md)


def test_a_stop_under_load_answers_every_request_and_exits_within_the_drain(tmp_path):
    repository = copy_repository(tmp_path / "repository", {("rerank_engine", "drain_timeout_seconds"): str(DRAIN_S)})
    server = start_server(tmp_path / "server.log", repository, (f"--model-config-name={TEST_VARIANT}",))
    group = server.process.pid
    try:
        with ThreadPoolExecutor(max_workers=REQUESTS) as pool:
            futures = [pool.submit(_outcome, server, ("http", "grpc")[i % 2]) for i in range(REQUESTS)]
            time.sleep(2.0)  # every request sent, one in vLLM, the rest waiting for in-flight room
            signal_stop(server)
            signalled = time.monotonic()
            status = server.wait_exit(DRAIN_S + EXIT_BOUND_S + 30)
            took = time.monotonic() - signalled
            outcomes = Counter(future.result(timeout=30) for future in futures)
    finally:
        stop_server(server)
    print(f"stopped in {took:.1f} s, exit status {status}; outcomes: {dict(outcomes)}")
    assert status == 0, server.log_tail()
    assert took < DRAIN_S + EXIT_BOUND_S, server.log_tail()
    # answered, or refused as a stopping server refuses: by the engine step, or by Triton's ensemble between two steps
    assert {outcome.split(":")[0] for outcome in outcomes} <= {"answered", ErrorKind.UNAVAILABLE.value}, outcomes
    assert outcomes[f"{ErrorKind.UNAVAILABLE.value}: {STOPPING}"] >= REQUESTS // 2, outcomes  # refused, not worked off
    assert sum(outcomes.values()) == REQUESTS
    assert server.left_behind == [] and LEDGER.left_behind(group=group) == []
