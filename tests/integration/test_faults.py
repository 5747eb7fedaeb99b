"""Faults: the engine's stub process freezes or dies under traffic. A freeze inside Triton's stub health wait is ridden
out; a dead stub makes requests fail fast with a clear error, the deep health check sees it, and reloading the engine
model (Triton's repository API) brings correct answers back; a freeze long enough to fail Triton's stub health check
ends tritonserver or leaves it visibly unhealthy (Triton 2.51's own behaviour), so the process supervisor (Kubernetes)
restarts it rather than it hanging."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tritonclient.utils import InferenceServerException

from python_backends.engine.orphan_guard import alive, children
from reranker_client import RerankClient
from reranker_client.healthcheck import check
from tests.support.triton_server import (
    PROBE_DOCUMENTS, PROBE_QUERY, ROOT, RunningServer, probe_ranking, start_server, stop_server, stub_pids,
)
from tests.support.gateway import http_status, start_gateway, stop_gateway
from tests.support.in_flight import IN_FLIGHT_DOCUMENTS, in_flight_outcome
from tests.support.shared_memory import LEDGER
from tests.support.waiting import wait_until

# Run with nothing else on the machine (scripts/test.sh's second pass): how long a frozen stub takes to run again
# after SIGCONT grows when another test worker loads the 2-core machine.
pytestmark = pytest.mark.alone
# Triton 2.51's stub health check (python_backend r24.10, src/stub_launcher.cc ReceiveMessageFromStub): the server
# sets the stub's health flag false, waits a fixed 1 s for the stub's message, and declares the stub not healthy when
# the flag is still false; the stub's health thread sets it every 300 ms. A 0.4 s freeze can fail the check only when
# that thread runs again more than 0.3 s after SIGCONT (its last beat up to 0.3 s before the freeze, the flag cleared
# just after that beat); a freeze of a second or more can fail it however soon the stub runs again.
RIDDEN_OUT_FREEZE_S = 0.4
# How Triton 2.51 ends when a stub it declared not healthy resumes: it has answered and released that batch, and both
# processes go on with shared-memory messages and handles the other has let go of, so the server dies of the first
# fault it meets: boost::interprocess::lock_exception and an abort, a segfault, or a bus error (1 clean-clone run of
# a 1 s freeze: two lock_exceptions, then SIGBUS).
ENDING_SIGNALS = (-signal.SIGABRT, -signal.SIGBUS, -signal.SIGSEGV)
NOT_HEALTHY = "Stub process 'rerank_engine_0_0' is not healthy"  # Triton's error for a dead or frozen engine stub
# tritonserver's --exit-timeout-secs for this module's servers: how long a SIGTERM waits for requests in flight. The
# deployments use 30 (the Helm chart's exitTimeoutSeconds, docker-compose.yml); the shutdown test asserts the same
# bound in terms of it, and 5 spends 25 s less of the test run waiting for requests a dead stub never answers.
EXIT_TIMEOUT_S = 5.0


class Servers:
    """The module's server, started again when a fault before ended it or left its engine dead (a freeze can end
    tritonserver, or leave it running with the engine stub marked unhealthy and gone)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.started, self.running = folder, 0, None

    def live(self) -> RunningServer:
        if self.running is None or not self.running.is_alive() or check(self.running.grpc_url) is not None:
            self.stop()
            self.started += 1
            self.running = start_server(self.folder / f"server-{self.started}.log",
                                        extra_args=(f"--exit-timeout-secs={EXIT_TIMEOUT_S:.0f}",))
        return self.running

    def stop(self) -> None:
        # no graceful stop for a server this module damaged (test_lifecycle.py tests that): after a frozen stub
        # Triton waits its whole exit timeout for requests it will never answer, so its group is killed at once
        if self.running is not None:
            stop_server(self.running, timeout_s=0)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    holder = Servers(tmp_path_factory.mktemp("faults"))
    yield holder
    holder.stop()


@pytest.fixture
def own_server(servers: Servers) -> RunningServer:
    """A server of this module's own: its tests kill parts of it."""
    return servers.live()


class Traffic:
    """Public requests from `workers` threads until stopped; counts each outcome."""

    def __init__(self, server: RunningServer, workers: int = 8, timeout_s: float = 60) -> None:
        self.server, self.outcomes, self._stop = server, Counter(), threading.Event()
        self.timeout_s = timeout_s  # each request's deadline: how long a request Triton never answers holds the exit
        self._threads = [threading.Thread(target=self._run) for _ in range(workers)]

    def _run(self) -> None:
        client = RerankClient(self.server.grpc_url, protocol="grpc", max_retries=0, timeout_s=self.timeout_s)
        while not self._stop.is_set():
            try:
                ranking = [r.index for r in client.rerank(PROBE_QUERY, PROBE_DOCUMENTS).results]
                self.outcomes["ok" if ranking == [1, 0] else "wrong"] += 1
            except InferenceServerException as exc:
                self.outcomes[exc.message()[:80]] += 1
                time.sleep(0.05)

    def __enter__(self) -> "Traffic":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)


def _freeze_under_traffic(server: RunningServer, before_s: float, seconds: float, after_s: float) -> Counter:
    """The engine stub stopped (SIGSTOP) for `seconds` while public traffic runs; the traffic's outcomes."""
    (pid,) = stub_pids(server, "rerank_engine")
    # 20 s deadlines: a probe pair takes milliseconds, seconds behind a freeze; a request of a batch Triton lost is
    # never answered, and its deadline is what lets the traffic end (with 60 s such a run took 65 s)
    with Traffic(server, timeout_s=20) as traffic:
        time.sleep(before_s)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(pid, signal.SIGCONT)
        time.sleep(after_s)
    print(f"{seconds:g} s freeze:", dict(traffic.outcomes), "server alive:", server.is_alive())
    return traffic.outcomes


def test_engine_frozen_inside_the_stub_health_wait_under_traffic_is_ridden_out(own_server):
    """A 0.4 s SIGSTOP of the engine stub under traffic (a long pause of the host or the process): every request in
    flight or sent during the freeze gets its right answer, from the same stub, and the server keeps running."""
    stubs = stub_pids(own_server, "rerank_engine")
    outcomes = _freeze_under_traffic(own_server, before_s=1, seconds=RIDDEN_OUT_FREEZE_S, after_s=2)
    assert set(outcomes) == {"ok"}, outcomes
    assert outcomes["ok"] > 8
    assert own_server.is_alive() and stub_pids(own_server, "rerank_engine") == stubs  # the same stub, not a new one


def _descendants(pid: int) -> dict[int, int]:
    found = children(pid)
    for child in list(found):
        found.update(_descendants(child))
    return found


def _still_alive(processes: dict[int, int]) -> list[int]:
    return [pid for pid, started in processes.items() if alive(pid, started)]


def test_engine_process_death_is_reported_and_a_reload_recovers(own_server):
    assert probe_ranking(own_server) == [1, 0]
    pids = stub_pids(own_server, "rerank_engine")
    assert len(pids) == 1, pids
    engine_processes = _descendants(pids[0])  # vLLM's engine core, its workers, the orphan guard
    assert engine_processes
    os.kill(pids[0], signal.SIGKILL)
    time.sleep(1)

    started = time.monotonic()
    with pytest.raises(InferenceServerException) as raised:
        probe_ranking(own_server)
    assert time.monotonic() - started < 10
    assert NOT_HEALTHY in raised.value.message()
    assert own_server.is_alive()
    # Triton still calls the model READY; the deep health check does not.
    assert check(own_server.grpc_url) is not None and "not healthy" in check(own_server.grpc_url)
    # Nothing the dead stub started lives on to hold the memory the reload needs (on a GPU, ~90% of the device).
    assert wait_until(lambda: not _still_alive(engine_processes), timeout_s=30), \
        f"orphaned engine processes {_still_alive(engine_processes)}"

    # Recovery in place (scripts/recover_engine.py: a load with a changed config; unload + load would unload the
    # ensemble too): no request is NOT_FOUND while the engine comes back.
    with Traffic(own_server, workers=2) as traffic:
        reload = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "recover_engine.py"), "--url", own_server.http_url],
            capture_output=True, text=True, timeout=900, env=dict(os.environ, TRITON_ADMIN_KEY=own_server.admin_key),
        )
        time.sleep(2)
    print("during the reload:", dict(traffic.outcomes), reload.stdout.strip())
    assert reload.returncode == 0, reload.stderr
    assert set(traffic.outcomes) <= {"ok", "in ensemble 'reranker', Stub process 'rerank_engine_0_0' is not healthy."}, traffic.outcomes
    assert traffic.outcomes["ok"] > 0
    assert probe_ranking(own_server) == [1, 0]
    assert check(own_server.grpc_url) is None
    assert stub_pids(own_server, "rerank_engine") and stub_pids(own_server, "rerank_engine") != pids


def test_a_step_triton_unloaded_is_found_and_loaded_back_with_its_ensemble(own_server):
    """When the engine dies on a model it cannot run, Triton can unload the step and the ensembles that use it (every
    request then gets "unknown model"): the recovery script reads the repository index, loads the step from its
    files and the ensemble after it. The calibrate step stands in for the engine here: the same states and loads,
    without a vLLM start (~17 s on 2 cores) in a test that runs alone."""
    key = {"admin-key": own_server.admin_key}
    unload = urllib.request.Request(
        f"http://{own_server.http_url}/v2/repository/models/rerank_calibrate/unload", method="POST",
        data=json.dumps({"parameters": {"unload_dependents": True}}).encode(), headers=key)
    urllib.request.urlopen(unload, timeout=120).close()

    def state() -> str:
        index = urllib.request.Request(f"http://{own_server.http_url}/v2/repository/index", method="POST",
                                       data=b"{}", headers=key)
        with urllib.request.urlopen(index, timeout=30) as answer:
            return next(entry.get("state", "") for entry in json.load(answer) if entry["name"] == "rerank_calibrate")

    assert wait_until(lambda: state() == "UNAVAILABLE", timeout_s=60), state()
    assert "unknown model" in check(own_server.grpc_url)
    recovery = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "recover_engine.py"), "--url", own_server.http_url, "--model",
         "rerank_calibrate"],
        capture_output=True, text=True, timeout=900, env=dict(os.environ, TRITON_ADMIN_KEY=own_server.admin_key))
    assert recovery.returncode == 0, recovery.stderr
    lines = recovery.stdout.splitlines()
    assert [re.sub(r"[0-9.]+ s$", "N s", line) for line in lines] == [
        "rerank_calibrate was not loaded (UNAVAILABLE: unloaded); loaded from the repository in N s",
        "reranker loaded in N s"], lines
    assert probe_ranking(own_server) == [1, 0]
    assert check(own_server.grpc_url) is None


IN_FLIGHT = 6  # half over HTTP, half over gRPC
# Each in-flight request (64 documents cut at 256 tokens) is still in the engine step 1 s after it was sent, when the
# stub is killed; a dead stub never answers it, so each ends at this deadline.
CLIENT_DEADLINE_S = 5.0


def _gateway_outcome(gateway_url: str) -> tuple[int, str, float]:
    """The same large request through the gateway (its own deadline, GATEWAY_TIMEOUT_S, is 60 s): status, body, when."""
    body = json.dumps({"query": PROBE_QUERY, "documents": IN_FLIGHT_DOCUMENTS}).encode()
    request = urllib.request.Request(f"{gateway_url}/v1/rerank", body, {"Content-Type": "application/json"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode(), time.monotonic() - started
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), time.monotonic() - started


ENGINE_WATCH_S = 2.0  # the gateway's GATEWAY_ENGINE_WATCH_S here


def test_requests_in_flight_when_the_engine_stub_dies_end_by_the_deadline_and_shutdown_is_bounded(own_server, tmp_path):
    """Triton 2.51's Python backend never answers a request whose stub died after `execute` handed it over (its
    response factory is released only by the stub; docs/OPERATIONS.md, Faults): each in-flight request ends at the
    client's deadline, a gateway's calls end with 503 once its engine watch has probed the ensemble, requests sent
    afterwards are refused at once, and a SIGTERM afterwards waits the whole exit timeout for those requests and exits
    1 naming them: bounded by the exit timeout, which the Helm chart keeps inside its termination grace period (30 s
    of 60)."""
    (pid,) = stub_pids(own_server, "rerank_engine")
    gateway = start_gateway(own_server.grpc_url, tmp_path / "gateway.log", GATEWAY_ENGINE_WATCH_S=str(ENGINE_WATCH_S))
    try:
        with ThreadPoolExecutor(max_workers=IN_FLIGHT + 2) as pool:
            futures = [pool.submit(in_flight_outcome, own_server, ("http", "grpc")[i % 2], CLIENT_DEADLINE_S)
                       for i in range(IN_FLIGHT)]
            through_gateway = [pool.submit(_gateway_outcome, gateway.url) for _ in range(2)]
            time.sleep(1.0)
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            gateway_outcomes = [f.result(timeout=60) for f in through_gateway]
            gateway_took = time.monotonic() - killed
            dead_health = http_status(f"{gateway.url}/health")
            outcomes = [f.result(timeout=CLIENT_DEADLINE_S + 30) for f in futures]
    finally:
        stop_gateway(gateway)
    print("in flight at the stub's death:", [(kind, round(t, 1)) for kind, t in outcomes],
          "through the gateway:", [(status, round(t, 1)) for status, _, t in gateway_outcomes])
    assert all(t < CLIENT_DEADLINE_S + 5 for _, t in outcomes), outcomes  # none outlives its client's deadline
    # one watch period, one probe (the dead stub's error, after the client's retries of it), not the 60 s deadline
    assert [status for status, _, _ in gateway_outcomes] == [503, 503], gateway_outcomes
    assert gateway_took < 2 * ENGINE_WATCH_S + 5, gateway_took
    ended = [line for line in gateway.log_tail(20000).splitlines() if line.endswith(": ending it")]
    assert ended and all(NOT_HEALTHY in line for line in ended), gateway.log_tail()
    assert dead_health == 503  # Triton still calls the model READY; the gateway's probe pair meets the dead stub
    started = time.monotonic()
    with pytest.raises(InferenceServerException, match="Stub process 'rerank_engine_0_0' is not healthy"):
        probe_ranking(own_server)
    assert time.monotonic() - started < 10

    started = time.monotonic()
    os.kill(own_server.process.pid, signal.SIGTERM)
    # reaped, as its supervisor (the container's init, a shell) reaps it: a stub ends once its server is gone, and
    # a server left unreaped still counts as alive to its stubs, which then wait for stop_server.sh's grace time
    code = own_server.process.wait(EXIT_TIMEOUT_S + 30)
    took = time.monotonic() - started
    unanswered = sum(kind != "answered" and not kind.startswith("error") for kind, _ in outcomes)
    print(f"shutdown after the stub's death: {took:.1f} s, exit {code}, {unanswered} requests never answered")
    assert took < EXIT_TIMEOUT_S + 15
    assert ("in-flight inferences" in own_server.log_tail(20000)) == (code == 1), code
    # What the server left in /dev/shm (every stub's region: it ended without unloading its models) goes with
    # scripts/stop_server.sh; the dead engine's vLLM segments went with multiprocessing's resource tracker.
    port = own_server.http_url.rsplit(":", 1)[1]
    stop = subprocess.run([str(ROOT / "scripts" / "stop_server.sh")], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, RUN_DIR=str(own_server.log_path.parent), HTTP_PORT=port))
    assert "was not running" in stop.stdout, stop.stdout + stop.stderr
    assert LEDGER.left_behind(group=own_server.process.pid) == []


def test_engine_frozen_past_the_stub_health_check_never_hangs_the_server(own_server):
    """Triton 2.51's own behaviour, not configurable (`stub-timeout-seconds=60` changes nothing: the health check
    waits a fixed 1 s): a stub frozen for 5 s under traffic may be declared unhealthy, and then tritonserver dies
    when it resumes (boost::interprocess::lock_exception and SIGABRT: 2 of 2 runs on a fresh server; 0 of 1 after
    the in-place reload above; SIGSEGV once, on the loaded 2-core machine with two test workers; once it lived on
    with the engine stub marked unhealthy; once it lived on with the engine's batch lost, its requests unanswered).
    Nothing hangs unseen: the server answers right again, or the deep health check reports the dead engine or the
    unanswered request (the Helm chart's liveness probe, which restarts the pod), or it has ended by a signal, which
    the container's restart policy turns into a fresh server. Runs last: it may end this module's server."""
    _freeze_under_traffic(own_server, before_s=1, seconds=5, after_s=10)
    problem = check(own_server.grpc_url) if own_server.is_alive() else "it has ended"
    if problem is None:
        assert probe_ranking(own_server) == [1, 0]
        return
    if own_server.is_alive():
        # Alive and not serving: the stub declared not healthy, or dead as it resumed (requests fail at once, naming
        # it), or the engine's batch lost (the stub segfaulted in PbTensor::LoadFromSharedMemory as it resumed, and
        # Triton 2.51 answers neither that batch nor the requests queued behind it, nor ends; the deep check's own
        # request runs into its deadline). Whichever, the deep check keeps failing, and the Helm chart's liveness
        # probe, the same check, restarts the pod.
        if NOT_HEALTHY in problem:
            started = time.monotonic()
            with pytest.raises(InferenceServerException) as raised:
                probe_ranking(own_server)
            assert time.monotonic() - started < 10
            assert NOT_HEALTHY in raised.value.message() or not own_server.is_alive()
        if own_server.is_alive():
            assert check(own_server.grpc_url) is not None
            return
    # ended, or ending: the abort can come seconds after the freeze
    assert own_server.wait_exit(60) in ENDING_SIGNALS, problem
