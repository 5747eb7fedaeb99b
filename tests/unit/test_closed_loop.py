"""The closed loop's steady window: what it counts, and that it is None when a run is too short to have one."""

from __future__ import annotations

import asyncio

from loadtest.closed_loop import closed_loop

LATENCY_S = 0.05


async def _answer(index: int) -> int:
    await asyncio.sleep(LATENCY_S)
    return index


def test_steady_window_runs_from_every_workers_first_answer_to_the_last_send():
    loop = asyncio.run(closed_loop(_answer, 2, max_requests=10))
    assert sorted(loop.done) == list(range(10))
    # 5 rounds of 2 answers at 0.05 s steps; the window starts at the 2nd answer (end of round 1) and ends at the
    # last send (start of round 5): rounds 2, 3 and 4 are inside it
    window = loop.steady
    assert window is not None
    assert sorted(window.done) == [2, 3, 4, 5, 6, 7]
    assert abs(window.seconds - 3 * LATENCY_S) < LATENCY_S
    assert abs(len(window.done) / window.seconds - 2 / LATENCY_S) / (2 / LATENCY_S) < 0.3


def test_a_run_of_one_round_has_no_steady_window():
    assert asyncio.run(closed_loop(_answer, 4, max_requests=4)).steady is None


def test_errors_are_not_counted_in_the_window():
    async def every_third_fails(index: int) -> int:
        await asyncio.sleep(LATENCY_S)
        if index % 3 == 2:
            raise RuntimeError("refused")
        return index

    loop = asyncio.run(closed_loop(every_third_fails, 1, max_requests=9))
    assert len(loop.errors) == 3
    window = loop.steady
    assert window is not None
    assert window.done == [1, 3, 4, 6, 7]  # after the first answer, up to the last send (of 8); errors left out
