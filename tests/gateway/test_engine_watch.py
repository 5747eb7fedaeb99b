"""EngineWatch: calls waiting on an ensemble whose engine died end with the probe's error; answered calls and calls on
a busy server are left alone (gateway/engine_watch.py)."""

from __future__ import annotations

import asyncio
import doctest
import time

import pytest

from tritonclient.utils import InferenceServerException

from gateway import engine_watch
from gateway.engine_watch import EngineLost, EngineWatch
from reranker_client.healthcheck import engine_dead
from tests.gateway.stub import until_cancelled

AFTER_S = 0.1
DEAD = RuntimeError("[StatusCode.UNAVAILABLE] Stub process 'rerank_engine_0_0' is not healthy")


class Probe:
    """Counts its runs; answers `verdict` after `takes_s`."""

    def __init__(self, verdict: BaseException | None, takes_s: float = 0.0) -> None:
        self.verdict, self.takes_s, self.runs = verdict, takes_s, 0

    async def __call__(self) -> BaseException | None:
        self.runs += 1
        await asyncio.sleep(self.takes_s)
        return self.verdict


async def answer(after_s: float, value: str = "answer") -> str:
    await asyncio.sleep(after_s)
    return value


def test_a_call_answered_in_time_sends_no_probe():
    probe = Probe(DEAD)
    assert asyncio.run(EngineWatch(probe, AFTER_S).run(answer(0.01))) == "answer"
    assert probe.runs == 0


def test_every_call_waiting_on_a_dead_engine_ends_with_its_error_after_one_probe():
    probe = Probe(DEAD, takes_s=0.05)
    cancelled = []

    async def main():
        watch = EngineWatch(probe, AFTER_S)
        return await asyncio.gather(*(watch.run(until_cancelled(cancelled)) for _ in range(3)), return_exceptions=True)

    started = time.monotonic()
    outcomes = asyncio.run(main())
    assert [type(o) for o in outcomes] == [EngineLost] * 3 and all(o.probe_error is DEAD for o in outcomes)
    assert str(outcomes[0]) == f"the engine died with this call in flight: {DEAD}"
    assert time.monotonic() - started < AFTER_S + 0.05 + 0.5
    assert probe.runs == 1
    assert cancelled == [True] * 3


def test_a_busy_server_is_probed_each_period_and_its_calls_answered():
    probe = Probe(None)

    async def answered_after_three_probes():
        while probe.runs < 3:
            await asyncio.sleep(0.01)
        return "answer"

    assert asyncio.run(EngineWatch(probe, AFTER_S).run(answered_after_three_probes())) == "answer"
    assert probe.runs >= 3  # one each period the call waited


def test_a_call_answered_while_a_probe_runs_is_answered_at_once():
    probe = Probe(DEAD, takes_s=5.0)
    started = time.monotonic()
    assert asyncio.run(EngineWatch(probe, AFTER_S).run(answer(0.15))) == "answer"
    assert time.monotonic() - started < 1.0
    assert probe.runs == 1


def test_a_failed_call_fails_with_its_own_error():
    async def refused():
        raise ValueError("DOCUMENTS[0] is empty")

    with pytest.raises(ValueError, match="DOCUMENTS"):
        asyncio.run(EngineWatch(Probe(DEAD), AFTER_S).run(refused()))


def test_the_docstring_example_runs():
    assert doctest.testmod(engine_watch).failed == 0


class ProbeClient:
    """What engine_dead calls: `rerank` fails with `error` (None: answers) after `takes_s`."""

    def __init__(self, error: Exception | None, takes_s: float = 0.0) -> None:
        self.error, self.takes_s = error, takes_s

    async def rerank(self, query: str, documents: list[str]) -> None:
        await asyncio.sleep(self.takes_s)
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize("status", ["StatusCode.INTERNAL", "StatusCode.UNAVAILABLE"])
def test_the_probe_reads_a_dead_stub_in_tritons_words_whatever_the_status(status):
    """Measured on Triton 2.51: a request sent after the engine stub's death fails within ~1 s with INTERNAL over
    gRPC."""
    dead = InferenceServerException("in ensemble 'reranker', Stub process 'rerank_engine_0_0' is not healthy.",
                                    status=status)
    assert asyncio.run(engine_dead(ProbeClient(dead), 1.0)) is dead


def test_the_probe_reads_no_death_in_other_errors_an_answer_or_a_busy_server():
    refused = InferenceServerException("[invalid QUERY] QUERY is empty", status="StatusCode.INVALID_ARGUMENT")
    assert asyncio.run(engine_dead(ProbeClient(refused), 1.0)) is None
    assert asyncio.run(engine_dead(ProbeClient(None), 1.0)) is None
    assert asyncio.run(engine_dead(ProbeClient(None, takes_s=5.0), 0.1)) is None
