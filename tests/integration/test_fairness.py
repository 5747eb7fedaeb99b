"""Deadlines and fairness on the real server: a two-document request sent while one maximal request (1024
documents x 64 KB) is scored is answered within 3x its solo latency plus one engine step (the engine hands the
maximal request to vLLM half a step at a time: the step in progress and the one the small request runs in hold half a
step of it each) plus CONTENDED_S; a request whose timeout passes has its work aborted in vLLM: the engine counts it
under outcome "deadline", vLLM's count of the sequences it holds falls to 0, and vLLM's processes go idle within the
step they were running (their CPU time, from /proc); a gateway 504 leaves no work running.

Timed against each other, so marked `alone`. One server (the session's) for all of it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import requests

from python_backends.engine.orphan_guard import children
from tests.support.fairness import (
    MAXIMAL, ONE_STEP, SMALL, engine_series, held, in_background, rerank, small_solo_s,
)
from tests.support.gateway import start_gateway, stop_gateway
from tests.support.triton_server import RunningServer, stub_pids
from tests.support.waiting import wait_until

ABORTED_WITHIN_S = 2.0  # the abort poll (0.25 s) and the gauge's refresh (1 s), with room on 2 busy cores
STEP_S = 4.0  # one 16384-token step of the CPU engine (3.4-3.7 s measured alone): vLLM's core ends it, then aborts
# The small request's own way through Triton and three stubs while vLLM keeps both cores busy (it came to 0.2-0.3 s
# here): what is measured alone does not include that contention.
CONTENDED_S = 1.0
IDLE_CORES = 0.2  # CPU use of vLLM's processes with no work (their busy steps use both cores)
UTIME, STIME = 11, 12  # /proc/<pid>/stat fields after the command name


def vllm_cpu_s(server: RunningServer) -> float:
    """CPU seconds so far of the engine stub's vLLM processes (its descendants), from /proc/<pid>/stat."""
    (stub,) = stub_pids(server, "rerank_engine")
    pending, total = list(children(stub)), 0.0
    while pending:
        pid = pending.pop()
        pending.extend(children(pid))
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[UTIME]) + int(fields[STIME])) / os.sysconf("SC_CLK_TCK")
    return total


def vllm_idle(server: RunningServer, window_s: float = 1.0) -> bool:
    """vLLM's processes used under IDLE_CORES over the next `window_s`."""
    before = vllm_cpu_s(server)
    time.sleep(window_s)
    return (vllm_cpu_s(server) - before) / window_s < IDLE_CORES


def aborted(server: RunningServer) -> float:
    return engine_series(server, "reranker_engine_requests_total", 'outcome="deadline"')


@pytest.mark.alone
def test_a_small_request_behind_a_maximal_one_is_answered_within_3x_its_solo_latency_plus_one_step(server):
    solo = small_solo_s(server)
    outcome, step = rerank(server, "budget", ONE_STEP)
    assert outcome.startswith("ranking"), outcome
    # The maximal request gets a timeout so that the test does not wait for all of it (its abort: the next test).
    before = aborted(server)
    maximal, answers = in_background(lambda: rerank(server, "budget", MAXIMAL, timeout_s=10))
    assert wait_until(lambda: held(server) > 0, 60, poll_s=0.2), "the maximal request never reached vLLM"
    outcome, behind = rerank(server, *SMALL)
    maximal.join()
    # its abort is counted by the engine after its answer went out: the next test counts aborts from here
    assert wait_until(lambda: aborted(server) - before == 1, 10, poll_s=0.1), aborted(server) - before
    print(f"small alone {solo:.3f} s, one step {step:.2f} s, small behind the maximal {behind:.2f} s, "
          f"maximal: {answers[0][0][:60]} after {answers[0][1]:.1f} s")
    assert outcome == "ranking [1, 0]"
    assert behind <= 3 * solo + step + CONTENDED_S, (behind, solo, step)


@pytest.mark.alone
def test_a_request_whose_timeout_passes_has_its_work_aborted_in_vllm(server):
    before = aborted(server)
    maximal, answers = in_background(lambda: rerank(server, "budget", MAXIMAL, timeout_s=5))
    assert wait_until(lambda: held(server) > 0, 60, poll_s=0.2), "the maximal request never reached vLLM"
    assert not vllm_idle(server)  # busy with it: what "idle" below is measured against
    maximal.join()
    outcome, seconds = answers[0]
    assert outcome == ("StatusCode.UNAVAILABLE: in ensemble 'reranker', [deadline] the request's timeout passed in "
                       "rerank_engine (5000 ms); its work was aborted"), outcome
    assert aborted(server) - before == 1
    # vLLM's own count: the window of sequences it held is gone, long before the request's work would have ended
    assert wait_until(lambda: held(server) == 0, ABORTED_WITHIN_S, poll_s=0.1), held(server)
    assert wait_until(lambda: vllm_idle(server), STEP_S + 2.0, poll_s=0), "vLLM kept working after the abort"
    print(f"maximal request with a 5 s timeout answered after {seconds:.1f} s; vLLM holds 0 sequences and is idle")


@pytest.mark.alone
def test_a_gateway_504_leaves_no_work_running(server, tmp_path):
    gateway = start_gateway(server.grpc_url, tmp_path / "gateway.log", GATEWAY_TIMEOUT_S="5")
    before = aborted(server)
    try:
        started = time.monotonic()
        # 1024 documents of 2 KB: cut to 256 tokens each, the engine's share of a maximal request, in a 2 MB body
        answer = requests.post(f"{gateway.url}/v2/rerank", timeout=120, json={
            "query": "budget", "documents": [document[:2048] for document in MAXIMAL]})
        gave_up = time.monotonic() - started
    finally:
        stop_gateway(gateway)
    assert answer.status_code == 504, answer.text
    assert wait_until(lambda: aborted(server) - before == 1, 30, poll_s=0.2), "the engine never aborted the request"
    aborted_after = time.monotonic() - started
    assert wait_until(lambda: held(server) == 0, ABORTED_WITHIN_S, poll_s=0.1), held(server)
    assert wait_until(lambda: vllm_idle(server), STEP_S + 2.0, poll_s=0), "vLLM kept working after the 504"
    # the engine counts the timeout from its own receipt: the abort follows the 504 by the time spent in preprocess
    print(f"gateway 504 after {gave_up:.1f} s; the engine's work aborted by {aborted_after:.1f} s; vLLM idle")
