"""The engine step's fairness and deadlines without Triton or vLLM: the in-flight budget's two lanes, the bound of
work waiting inside the step (refused at once past it, never blocking the hand-over), the priority a request's size
gives its sequences, when a request's answer stops being wanted, and how such a request is answered
and counted (against a stand-in for pb_utils)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import types
from concurrent.futures import Future

import numpy as np
import pytest

from python_backends.engine import (
    AsyncEngine, ClientGone, Deadline, DeadlineExceeded, EngineDead, EngineSettings, InflightBudget, ReplyThread,
)
from python_backends.engine.metrics import EngineMetrics
from python_backends.engine.stopping import Drain, ServerStopping
from python_backends.engine.budget import CANCEL_POLL_S, OVERSIZED_IN_FLIGHT, priority
from python_backends.errors import Overloaded
from python_backends.seal import ScoreSeal
from python_backends.tracing import StepTracer
from tests.unit.test_step_metrics import MetricFamily
from tests.support.waiting import wait_until


def _wait_in_loop(budget: InflightBudget, tokens: int, check=lambda: None) -> tuple[bool, asyncio.Future | None]:
    """Reserve `tokens` as `submit` does; if they must wait, wait for room as a task of the running loop."""
    place = budget.reserve(tokens)
    if place is None:
        return True, None
    return False, asyncio.ensure_future(budget.wait_for_room(place, check))


async def _settled(task: asyncio.Future, seconds: float) -> bool:
    await asyncio.wait([task], timeout=seconds)
    return task.done()


def test_requests_within_the_budget_share_it_and_wait_inside_the_step_past_it():
    async def run() -> None:
        budget = InflightBudget(100, waiting_limit=400)
        assert budget.reserve(60) is None
        in_flight, waiting = _wait_in_loop(budget, 50)  # 60 + 50 > 100: it waits, and reserve returned at once
        assert not in_flight and budget.waiting == 50
        assert not await _settled(waiting, 0.3)
        budget.release(60)
        assert await _settled(waiting, 0.1)  # woken by the release, not by the next poll
        assert (budget.used, budget.waiting) == (50, 0)
        budget.release(50)
        assert budget.wait_idle(0.1)

    asyncio.run(run())


def test_requests_of_a_lane_reach_vllm_in_the_order_they_came():
    async def run() -> None:
        budget = InflightBudget(100, waiting_limit=400)
        assert budget.reserve(90) is None
        _, first = _wait_in_loop(budget, 50)  # 90 + 50 > 100: it waits
        _, second = _wait_in_loop(budget, 10)  # 10 would fit, but it came after a request still waiting
        assert not await _settled(second, 0.3)
        budget.release(90)
        assert await _settled(first, 0.1) and await _settled(second, 0.1)  # both fit now: they go in their order
        assert (budget.used, budget.waiting) == (60, 0)

    asyncio.run(run())


def test_a_cancelled_wait_leaves_its_line():
    async def run() -> None:
        budget = InflightBudget(100, waiting_limit=400)
        assert budget.reserve(100) is None
        _, first = _wait_in_loop(budget, 50)
        _, second = _wait_in_loop(budget, 50)
        await asyncio.sleep(0.05)
        first.cancel()
        budget.release(100)
        assert await _settled(second, 0.1)  # not held behind a place nobody waits at
        assert (budget.used, budget.waiting) == (50, 0)

    asyncio.run(run())


def test_a_small_request_passes_while_oversized_ones_are_in_flight():
    async def run() -> None:
        budget = InflightBudget(100, waiting_limit=400)
        for _ in range(OVERSIZED_IN_FLIGHT):
            assert budget.reserve(5000) is None  # larger than the whole budget: its own lane
        assert (budget.used, budget.oversized) == (0, OVERSIZED_IN_FLIGHT)
        assert budget.reserve(100) is None  # the whole shared budget is still free beside them
        in_flight, another_oversized = _wait_in_loop(budget, 5000)  # the oversized lane is full: it waits alone
        assert not in_flight and not await _settled(another_oversized, 0.3)
        budget.release(5000)
        assert await _settled(another_oversized, 0.1) and budget.oversized == OVERSIZED_IN_FLIGHT
        for tokens in (5000, 5000, 100):
            budget.release(tokens)
        started = time.monotonic()
        assert budget.wait_idle(0.1) and time.monotonic() - started < 0.1

    asyncio.run(run())


def test_past_the_waiting_bound_a_request_is_refused_at_once():
    budget = InflightBudget(100, waiting_limit=150)
    assert budget.reserve(100) is None
    assert budget.reserve(90) is not None and budget.reserve(60) is not None  # 150 tokens wait: at the bound, not past it
    started = time.monotonic()
    with pytest.raises(Overloaded) as caught:
        budget.reserve(1)
    assert time.monotonic() - started < 0.05
    assert str(caught.value) == ("rerank_engine is over its waiting bound (150 tokens wait for vLLM, this request has "
                                 "1, the bound is 150): retry later")
    assert caught.value.reason == "work_budget"  # counted as reranker_rejected_requests_total{reason="work_budget"}
    assert (budget.used, budget.waiting) == (100, 150)  # the refused request holds nothing


def test_a_request_larger_than_the_waiting_bound_waits_when_none_waits():
    budget = InflightBudget(100, waiting_limit=400)
    for _ in range(OVERSIZED_IN_FLIGHT):
        assert budget.reserve(5000) is None
    assert budget.reserve(5000) is not None and budget.waiting == 5000  # alone: it waits, so any request can be served
    with pytest.raises(Overloaded):
        budget.reserve(5000)
    assert budget.reserve(100) is None  # one that fits is never held behind the oversized ones waiting


def test_the_waiting_bound_is_four_in_flight_budgets():
    settings = EngineSettings(engine_args={"model": "m"}, max_inflight_tokens=65536, max_sequences=8192,
                              drain_timeout_s=30.0)
    assert settings.max_waiting_tokens == 262144


def test_wait_idle_waits_for_oversized_and_waiting_requests_too():
    budget = InflightBudget(100, waiting_limit=400)
    assert budget.reserve(500) is None
    assert not budget.wait_idle(0.2)
    budget.release(500)
    assert budget.wait_idle(0.1)
    assert budget.reserve(100) is None and budget.reserve(10) is not None
    budget.release(100)
    assert not budget.wait_idle(0.1)  # 10 tokens still wait for room


@pytest.mark.parametrize("failure", [EngineDead("the vLLM engine died while this request waited for room"),
                                     DeadlineExceeded("the request's timeout passed in rerank_engine (100 ms)")])
def test_a_request_waiting_for_room_gives_up_when_its_check_raises(failure):
    async def run() -> None:
        budget = InflightBudget(10, waiting_limit=40)
        assert budget.reserve(10) is None
        gave_up = threading.Event()

        def check() -> None:
            if gave_up.is_set():
                raise failure

        _, waiting = _wait_in_loop(budget, 5, check)
        await asyncio.sleep(0.05)
        gave_up.set()
        assert await _settled(waiting, CANCEL_POLL_S + 0.2)  # seen at the next poll, without a release
        assert waiting.exception() is failure
        assert (budget.used, budget.waiting) == (10, 0)

    asyncio.run(run())


# --- the engine's hand-over: never blocking, refusals counted --------------------------------------------------

class _EngineShell(AsyncEngine):
    """AsyncEngine's hand-over and waiting on its own loop thread, with vLLM's scoring replaced by an event per
    request (this module tests the bound and the waiting, not vLLM)."""

    def __init__(self, limit: int) -> None:  # noqa: D107 - not the real engine's start
        self.budget = InflightBudget(limit, EngineSettings(engine_args={"model": "m"}, max_inflight_tokens=limit,
                                                           max_sequences=1, drain_timeout_s=1).max_waiting_tokens)
        self.llm = types.SimpleNamespace(errored=False)
        self.drain = Drain(timeout_s=60)
        self._ids = itertools.count()
        self._on_refusal = lambda exc: None
        self.tracer = StepTracer.off()
        self.finish: dict[str, asyncio.Event] = {}
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()

    async def _score(self, batch, request_id: str, deadline: Deadline, span) -> np.ndarray:
        deadline.check()
        self.finish[request_id] = event = asyncio.Event()
        await event.wait()
        return np.zeros(1, dtype=np.float32)

    def answer(self, request_id: str) -> None:
        self._loop.call_soon_threadsafe(self.finish[request_id].set)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


@pytest.fixture
def shell():
    """An engine shell with a 100-token in-flight budget and the refusals it counted."""
    engine = _EngineShell(limit=100)
    refused: list[BaseException] = []
    engine.on_refusal(refused.append)
    yield engine, refused
    engine.stop()


def test_submit_never_blocks_waits_inside_the_step_and_refuses_past_the_bound(shell):
    engine, refused = shell
    batch = types.SimpleNamespace(tokens=100)
    started = time.monotonic()
    futures = [engine.submit(batch, Deadline()) for _ in range(5)]  # 1 in flight, 4 x 100 = the bound waiting
    with pytest.raises(Overloaded, match=r"^rerank_engine is over its waiting bound \(400 tokens wait"):
        engine.submit(batch, Deadline())
    assert time.monotonic() - started < 0.5  # nothing blocked the caller (Triton's execute): it would wait for "rerank-0"
    assert (engine.budget.used, engine.budget.waiting) == (100, 400)
    for n in range(5):
        assert wait_until(lambda: f"rerank-{n}" in engine.finish, 5)  # the next waiting one reaches vLLM
        engine.answer(f"rerank-{n}")
    assert [future.result(timeout=2).tolist() for future in futures] == [[0.0]] * 5
    assert engine.budget.wait_idle(1) and refused == []


def test_a_waiting_request_whose_deadline_passes_is_answered_and_counted_as_refused(shell):
    engine, refused = shell
    batch = types.SimpleNamespace(tokens=100)
    first = engine.submit(batch, Deadline())
    waiting = engine.submit(batch, Deadline(timeout_s=0.3))
    with pytest.raises(DeadlineExceeded, match=r"^the request's timeout passed in rerank_engine \(300 ms\)"):
        waiting.result(timeout=0.3 + 2 * CANCEL_POLL_S + 0.5)
    assert [exc.reason for exc in refused] == ["deadline"]  # reranker_rejected_requests_total{reason="deadline"}
    assert (engine.budget.used, engine.budget.waiting) == (100, 0)
    engine.answer("rerank-0")
    assert first.result(timeout=2).tolist() == [0.0] and engine.budget.wait_idle(1)


def test_a_stop_refuses_the_waiting_and_the_new_and_lets_the_request_in_vllm_finish(shell):
    engine, refused = shell
    batch = types.SimpleNamespace(tokens=100)
    first = engine.submit(batch, Deadline())
    waiting = engine.submit(batch, Deadline())
    assert wait_until(lambda: "rerank-0" in engine.finish, 5)
    engine.drain.begin()  # what the stub's SIGTERM starts
    with pytest.raises(ServerStopping, match=r"^the server is stopping: retry on another replica$"):
        waiting.result(timeout=2 * CANCEL_POLL_S + 1)
    with pytest.raises(ServerStopping):
        engine.submit(batch, Deadline())
    assert [exc.reason for exc in refused] == ["stopping"]  # reranker_rejected_requests_total{reason="stopping"}
    engine.answer("rerank-0")  # within its drain
    assert first.result(timeout=2).tolist() == [0.0] and engine.budget.wait_idle(1)


def test_priority_is_the_order_of_magnitude_of_a_request_s_tokens():
    two_documents, maximal = 3 * 12, 1025 * 256  # a bi-encoder's query and two short documents; 1024 full ones
    assert priority(two_documents) == 6 and priority(maximal) == 19
    assert priority(1000) == priority(1023) < priority(1024)  # similar sizes keep their arrival order in vLLM


def test_a_deadline_without_timeout_never_passes():
    deadline = Deadline.from_request(0, lambda: False)
    assert deadline.timeout_s is None
    deadline.check()


def test_a_deadline_passes_its_timeout_after_receipt():
    deadline = Deadline.from_request(200_000, lambda: False)  # Triton's timeout is in microseconds
    deadline.check()
    time.sleep(0.25)
    with pytest.raises(DeadlineExceeded) as caught:
        deadline.check()
    assert str(caught.value) == "the request's timeout passed in rerank_engine (200 ms); its work was aborted"
    assert caught.value.reason == "deadline"


def test_a_client_gone_ends_the_request():
    with pytest.raises(ClientGone, match="^request cancelled: its client left$"):
        Deadline.from_request(60_000_000, lambda: True).check()


# --- answers and their counts -----------------------------------------------------------------------------------

class TritonError:
    UNAVAILABLE, CANCELLED, INTERNAL, INVALID_ARG = "UNAVAILABLE", "CANCELLED", "INTERNAL", "INVALID_ARG"

    def __init__(self, message: str, code: str) -> None:
        self.message, self.code = message, code


class InferenceResponse:
    def __init__(self, output_tensors: list | None = None, error: TritonError | None = None) -> None:
        self.output_tensors, self.error = output_tensors, error


class Sender:
    def __init__(self) -> None:
        self.sent: list[InferenceResponse] = []

    def send(self, response: InferenceResponse, flags: int) -> None:
        assert flags == PB_UTILS.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        self.sent.append(response)


PB_UTILS = types.SimpleNamespace(
    MetricFamily=MetricFamily, TritonError=TritonError, InferenceResponse=InferenceResponse,
    Tensor=lambda name, array: (name, array), TRITONSERVER_RESPONSE_COMPLETE_FINAL=1,
)


def _done(result: object) -> Future:
    future: Future = Future()
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
    return future


def test_each_outcome_is_answered_and_counted_under_its_label():
    metrics = EngineMetrics(PB_UTILS, {"model": "rerank_engine", "version": "1"})
    seal = ScoreSeal(b"k" * 32)
    replies = ReplyThread(PB_UTILS, seal.outputs, metrics, held=lambda: 7)
    passed = DeadlineExceeded("the request's timeout passed in rerank_engine (500 ms); its work was aborted")
    stopped = ServerStopping("the server is stopping and this request was not scored within its drain (20 s): retry "
                             "on another replica")
    outcomes = [np.array([0.5, 0.25], dtype=np.float32), passed, ClientGone("request cancelled: its client left"),
                RuntimeError("boom"), stopped]
    senders = [Sender() for _ in outcomes]
    for sender, result in zip(senders, outcomes):
        replies.send_when_done(sender, _done(result))
    replies.close()
    answers = [sender.sent for sender in senders]
    assert all(len(sent) == 1 for sent in answers)
    (name, scores), (seal_name, sealed) = answers[0][0].output_tensors
    assert name == "RAW_SCORES" and scores.tolist() == [[0.5, 0.25]]
    assert seal_name == "SCORE_SEAL" and sealed.shape == (1, 1) and seal.verifies_tensor(scores[0], sealed)
    assert [(a[0].error.code, a[0].error.message) for a in answers[1:]] == [
        ("UNAVAILABLE", "[deadline] the request's timeout passed in rerank_engine (500 ms); its work was aborted"),
        ("CANCELLED", "[cancelled] request cancelled: its client left"),
        ("INTERNAL", "[internal] internal error: RuntimeError: boom"),
        ("UNAVAILABLE", f"[unavailable] {stopped}"),
    ]
    assert {outcome: metric.value for outcome, metric in metrics.answered.items()} == {
        "ok": 1, "error": 1, "deadline": 1, "cancelled": 1, "stopping": 1}
    assert metrics.sequences.value == 7


# --- a timeout that ran out on the server, as clients see it ------------------------------------------------------

@pytest.mark.parametrize("message", [
    "in ensemble 'reranker', [deadline] the request's timeout passed in rerank_engine (2500 ms); its work was aborted",
    "in ensemble 'reranker', Request timeout expired",
])
def test_a_server_side_timeout_is_neither_retried_nor_a_fault(message):
    from tritonclient.utils import InferenceServerException

    from gateway.errors import triton_error
    from python_backends.contract import ErrorKind, server_error
    from reranker_client import is_retryable

    error = InferenceServerException(message, status="StatusCode.UNAVAILABLE")
    assert server_error("StatusCode.UNAVAILABLE", message).kind is ErrorKind.DEADLINE
    assert not is_retryable(error)  # the caller's deadline has passed: sending it again helps nobody
    assert triton_error(error).kind == "timeout"  # the gateway answers 504, as when its own deadline fires
    assert is_retryable(InferenceServerException("Stub process 'rerank_engine_0_0' is not healthy.",
                                                 status="StatusCode.UNAVAILABLE"))
