"""A server's life on a copy of the model repository, in order: the calibration profile hot-swapped under
concurrent load (the new profile takes effect, no request fails, the engine's vLLM stub is not reloaded), then a
graceful shutdown under load (SIGTERM: every request answered, exit code 0). One server for both: a start costs
~45 s on the 2-core CI machine, and the shutdown needs a server no test has damaged, which a hot swap does not."""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import tritonclient.http as http_client
from tritonclient.utils import InferenceServerException

from python_backends.calibrate.profile_schema import dump_profile, load_profile
from python_backends.calibrate.profiles import CalibrationProfile, PlattCalibrator
from reranker_client import RerankClient, build_inputs
from tests.support.triton_server import ROOT, RunningServer, probe_ranking, start_server, stop_server, stub_pids

PROFILE = Path("rerank_calibrate/profiles/all-minilm-l6-v2.json")


@pytest.fixture(scope="module")
def swap_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Path]]:
    """A server on a copy of the model repository, so the test can rewrite the profile file. The last test of
    this module ends it."""
    repo = tmp_path_factory.mktemp("swap") / "model_repository"
    shutil.copytree(ROOT / "model_repository", repo)
    running = start_server(repo.parent / "server.log", model_repository=repo)
    yield running, repo
    stop_server(running)


def test_new_profile_takes_effect_under_load_without_failures_or_engine_reload(swap_server):
    server, repo = swap_server
    old = load_profile(repo / PROFILE)
    new = CalibrationProfile(
        name=old.name, version="hot-swap-test", model=old.model, score_type=old.score_type,
        calibrator=PlattCalibrator(a=5.0, b=-2.0),
    )
    engine_pids = stub_pids(server, "rerank_engine")
    tags: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def load() -> None:
        client = RerankClient(server.grpc_url, protocol="grpc")
        swapped = False  # this thread's requests go one after another: once one had the new profile, all later do
        while not stop.is_set():
            try:
                response = client.rerank("capital of France", ["Paris is the capital of France.", "Bananas."])
                expected = (old if response.calibration == old.tag else new).apply(response.raw_scores)
                if abs(float(response.scores[0]) - float(expected[0])) > 1e-6:
                    failures.append(f"scores of {response.calibration} do not match that profile")
                if swapped and response.calibration == old.tag:
                    failures.append("the old profile answered a request sent after the new one had answered")
                swapped = swapped or response.calibration == new.tag
                tags.append(response.calibration)
            except Exception as exc:  # noqa: BLE001 - every failure is what this test counts
                failures.append(repr(exc))
        client.close()

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    dump_profile(new, repo / PROFILE)  # atomic rename: the server never reads half a file
    deadline = time.monotonic() + 30
    while new.tag not in tags[-8:] and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)

    print(f"hot swap: {len(tags)} requests, {tags.count(old.tag)} old, {tags.count(new.tag)} new, {len(failures)} failed")
    assert failures == []
    assert old.tag in tags and new.tag in tags
    assert stub_pids(server, "rerank_engine") == engine_pids  # the vLLM engine was not reloaded


# Triton's refusals while it stops: a step's scheduler has stopped, or the request came after the ensemble unloaded
REFUSALS_WHILE_STOPPING = ("Server is stopping", "Request for unknown model: 'reranker' has no available versions")


def _rank_or_refusal(server: RunningServer) -> str:
    try:
        return "ok" if probe_ranking(server) == [1, 0] else "wrong"
    except InferenceServerException as exc:
        if any(refusal in exc.message() for refusal in REFUSALS_WHILE_STOPPING):
            return "refused"
        return f"error: {exc.message()}"


def _aborted_at_their_deadline(server: RunningServer, count: int) -> None:
    """Requests whose timeout (50 ms, Triton's request parameter; 64 documents take seconds here) passes in the
    engine step, which aborts them and answers so. Such requests left garbage holding response senders whose
    cancellation state, collected by the stub's interpreter after its shared memory was gone, crashed the engine stub
    at the stop. Sent without a client deadline of their own, so that the server's answer is what each one gets."""
    client = http_client.InferenceServerClient(server.http_url)
    inputs = build_inputs(http_client, "capital of France", ["Paris is the capital of France. " * 40] * 64)
    try:
        for _ in range(count):
            with pytest.raises(InferenceServerException, match=re.escape(
                    "[deadline] the request's timeout passed in rerank_engine (50 ms); its work was aborted")):
                client.infer("reranker", inputs, timeout=50_000)
    finally:
        client.close()


def test_graceful_shutdown_answers_every_in_flight_request(swap_server):
    """SIGTERM under load, after requests aborted at their deadline: every request gets its answer or an explicit
    UNAVAILABLE, none hangs, exit code 0, and every step unloads cleanly (no stub crashes while the interpreter shuts
    down).

    Triton drains each step's queue, but a request between two ensemble steps when the next step's scheduler
    has stopped is refused ("Server is stopping"), and one that reaches the server after the ensemble unloaded finds
    no model: that is why the Helm chart drains traffic before SIGTERM.
    """
    server, _ = swap_server
    _aborted_at_their_deadline(server, 8)
    assert probe_ranking(server) == [1, 0]
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(_rank_or_refusal, server) for _ in range(8)]
        time.sleep(0.5)
        os.kill(server.process.pid, signal.SIGTERM)
        outcomes = [f.result(timeout=120) for f in futures]
    print("graceful shutdown outcomes:", outcomes)
    assert set(outcomes) <= {"ok", "refused"}, outcomes
    assert server.wait_exit(120) == 0
    # a stub's crash: the Python backend's "Segfault encountered" with its trace, or tritonserver's own "Signal (11)"
    crashes = [line for line in server.log_path.read_text(errors="replace").splitlines()
               if any(sign in line for sign in ("Segfault encountered", "Signal (11)", "SaveToSharedMemory"))]
    assert crashes == []
