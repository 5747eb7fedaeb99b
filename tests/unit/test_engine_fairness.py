"""The engine step's fairness and deadlines without Triton or vLLM: the in-flight budget's two lanes, the priority a
request's size gives its sequences, when a request's answer stops being wanted, and how such a request is answered
and counted (against a stand-in for pb_utils)."""

from __future__ import annotations

import threading
import time
import types
from concurrent.futures import Future

import numpy as np
import pytest

from python_backends.engine import ClientGone, Deadline, DeadlineExceeded, EngineDead, InflightBudget, ReplyThread
from python_backends.engine.answer_metrics import EngineMetrics
from python_backends.engine.runtime import CANCEL_POLL_S, OVERSIZED_IN_FLIGHT, priority
from tests.unit.test_step_metrics import MetricFamily
from tests.support.waiting import wait_until


def _acquire_in_thread(budget: InflightBudget, tokens: int, check=lambda: None) -> tuple[threading.Event, list]:
    admitted, failures = threading.Event(), []

    def run() -> None:
        try:
            budget.acquire(tokens, check)
            admitted.set()
        except Exception as exc:  # noqa: BLE001 - the test reads it
            failures.append(exc)

    threading.Thread(target=run, daemon=True).start()
    return admitted, failures


def test_requests_within_the_budget_share_it_and_wait_past_it():
    budget = InflightBudget(100)
    budget.acquire(60, lambda: None)
    admitted, _ = _acquire_in_thread(budget, 50)
    assert not admitted.wait(0.3)  # 60 + 50 > 100: it waits (in Triton, the instance stays busy and requests queue)
    budget.release(60)
    assert admitted.wait(2) and budget.used == 50
    budget.release(50)
    assert budget.wait_idle(0.1)


def test_a_small_request_passes_while_oversized_ones_are_in_flight():
    budget = InflightBudget(100)
    for _ in range(OVERSIZED_IN_FLIGHT):
        budget.acquire(5000, lambda: None)  # larger than the whole budget: its own lane
    assert (budget.used, budget.oversized) == (0, OVERSIZED_IN_FLIGHT)
    small, _ = _acquire_in_thread(budget, 100)
    assert small.wait(0.5)  # the whole shared budget is still free beside them
    another_oversized, _ = _acquire_in_thread(budget, 5000)
    assert not another_oversized.wait(0.3)  # the oversized lane is full
    budget.release(5000)
    assert another_oversized.wait(2) and budget.oversized == OVERSIZED_IN_FLIGHT
    for tokens in (5000, 5000, 100):
        budget.release(tokens)
    started = time.monotonic()
    assert budget.wait_idle(0.1) and time.monotonic() - started < 0.1


def test_wait_idle_waits_for_oversized_requests_too():
    budget = InflightBudget(100)
    budget.acquire(500, lambda: None)
    assert not budget.wait_idle(0.2)
    budget.release(500)
    assert budget.wait_idle(0.1)


@pytest.mark.parametrize("failure", [EngineDead("the vLLM engine died while this request waited for room"),
                                     DeadlineExceeded("the request's timeout passed in rerank_engine (100 ms)")])
def test_a_request_waiting_for_room_gives_up_when_its_check_raises(failure):
    budget = InflightBudget(10)
    budget.acquire(10, lambda: None)
    gave_up = threading.Event()

    def check() -> None:
        if gave_up.is_set():
            raise failure

    admitted, failures = _acquire_in_thread(budget, 5, check)
    gave_up.set()
    assert wait_until(lambda: failures == [failure], 2 * CANCEL_POLL_S + 0.5)
    assert not admitted.is_set() and budget.used == 10


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
    replies = ReplyThread(PB_UTILS, "RAW_SCORES", metrics, held=lambda: 7)
    passed = DeadlineExceeded("the request's timeout passed in rerank_engine (500 ms); its work was aborted")
    outcomes = [np.array([0.5, 0.25], dtype=np.float32), passed, ClientGone("request cancelled: its client left"),
                RuntimeError("boom")]
    senders = [Sender() for _ in outcomes]
    for sender, result in zip(senders, outcomes):
        replies.send_when_done(sender, _done(result))
    replies.close()
    answers = [sender.sent for sender in senders]
    assert all(len(sent) == 1 for sent in answers)
    (name, scores), = answers[0][0].output_tensors
    assert name == "RAW_SCORES" and scores.tolist() == [[0.5, 0.25]]
    assert [(a[0].error.code, a[0].error.message) for a in answers[1:]] == [
        ("UNAVAILABLE", "the request's timeout passed in rerank_engine (500 ms); its work was aborted"),
        ("CANCELLED", "request cancelled"),
        ("INTERNAL", "internal error: RuntimeError: boom"),
    ]
    assert {outcome: metric.value for outcome, metric in metrics.answered.items()} == {
        "ok": 1, "error": 1, "deadline": 1, "cancelled": 1}
    assert metrics.sequences.value == 7


# --- a timeout that ran out on the server, as clients see it ------------------------------------------------------

@pytest.mark.parametrize("message", [
    "in ensemble 'reranker', the request's timeout passed in rerank_engine (2500 ms); its work was aborted",
    "in ensemble 'reranker', Request timeout expired",
])
def test_a_server_side_timeout_is_neither_retried_nor_a_fault(message):
    from tritonclient.utils import InferenceServerException

    from gateway.errors import triton_error
    from python_backends.contract import timed_out
    from reranker_client import is_retryable

    error = InferenceServerException(message, status="StatusCode.UNAVAILABLE")
    assert timed_out(message)
    assert not is_retryable(error)  # the caller's deadline has passed: sending it again helps nobody
    assert triton_error(error).kind == "timeout"  # the gateway answers 504, as when its own deadline fires
    assert is_retryable(InferenceServerException("Stub process is not healthy", status="StatusCode.UNAVAILABLE"))
