"""benchmarks/step_report.py: an engine core's full steps read from the probe's records."""

from __future__ import annotations

from benchmarks.step_report import MIN_FULL_STEPS, full_steps


def step(t0: float, wall_ms: float, tokens: int, cpu_ms: float) -> list[dict]:
    """One engine-core step and the schedule() it ran (a little after the step began)."""
    return [{"ev": "step", "t0": t0, "t1": t0 + wall_ms / 1e3, "cpu_ms": cpu_ms, "nout": 1},
            {"ev": "sched", "t0": t0 + 1e-4, "ntok": tokens, "nreq": 1}]


def test_full_steps_are_those_of_the_largest_token_count():
    records = [rec for n in range(6) for rec in step(n, 10 + n, 65536, 4 + n)]
    records += step(7, 9, 62500, 3)  # an encoder's step of whole sequences, short of the budget: full
    records += step(10, 99, 1000, 50) + step(11, 0.2, 0, 0.1)  # a partial step and an empty one: not counted
    tokens, full = full_steps(records)
    assert tokens == 65536 and full["cpu"] == [4 + n for n in range(6)] + [3]
    assert [round(ms, 6) for ms in full["wall"]] == [10 + n for n in range(6)] + [9]


def test_too_few_full_steps_give_nothing():
    records = [rec for n in range(MIN_FULL_STEPS - 1) for rec in step(n, 10, 65536, 4)] + step(9, 5, 100, 1)
    assert full_steps(records) is None
