"""The fairness scenario on a running server, shared by tests/integration/test_fairness.py and
benchmarks/fairness.py: a two-document request's latency alone and behind one maximal request (1024 documents x
64 KB), and one engine step's time (a request of max_num_batched_tokens, 16384 tokens on the CPU server)."""

from __future__ import annotations

import statistics
import threading
import time
import urllib.request

from tritonclient.utils import InferenceServerException

import tritonclient.grpc as grpc_client
from reranker_client import build_inputs
from tests.support.triton_server import RunningServer

PROSE = "The committee reviewed the quarterly budget figures and scheduled another meeting about Paris. "
MAXIMAL = [(PROSE * 700)[:65536]] * 1024  # max_documents x max_document_bytes: 1024 x 256 tokens in the engine
ONE_STEP = [(PROSE * 40)[:2048]] * 63  # 63 x 256 tokens + the query: about max_num_batched_tokens (16384), one step
SMALL = ("capital of France", ["Bananas are yellow.", "Paris is the capital of France."])
SOLO_RUNS = 5
ENGINE = 'model="rerank_engine"'


def engine_series(server: RunningServer, name: str, label: str = "") -> float:
    """One series of rerank_engine from the server's /metrics (`label` e.g. 'outcome="deadline"')."""
    with urllib.request.urlopen(f"http://{server.metrics_url}/metrics") as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + "{") and ENGINE in line and label in line:
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{label}}} of rerank_engine not in /metrics")


def held(server: RunningServer) -> float:
    """vLLM's own count of the sequences it holds (refreshed every second)."""
    return engine_series(server, "reranker_engine_vllm_sequences")


def rerank(server: RunningServer, query: str, documents: list[str], timeout_s: float | None = None) -> tuple[str, float]:
    """One gRPC call; `timeout_s` is the request's Triton timeout (the schedule-policy `timeout` parameter)."""
    client = grpc_client.InferenceServerClient(server.grpc_url)
    started = time.monotonic()
    try:
        kwargs = {"timeout": int(timeout_s * 1e6)} if timeout_s else {}
        result = client.infer("reranker", build_inputs(grpc_client, query, documents), client_timeout=300, **kwargs)
        outcome = f"ranking {result.as_numpy('RANKING')[0].tolist()}"
    except InferenceServerException as exc:
        outcome = f"{exc.status()}: {exc.message()}"
    finally:
        client.close()
    return outcome, time.monotonic() - started


def small_solo_s(server: RunningServer) -> float:
    runs = [rerank(server, *SMALL) for _ in range(SOLO_RUNS)]
    assert {outcome for outcome, _ in runs} == {"ranking [1, 0]"}, runs
    return statistics.median(seconds for _, seconds in runs)


def in_background(call) -> tuple[threading.Thread, list]:
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    return thread, answers
