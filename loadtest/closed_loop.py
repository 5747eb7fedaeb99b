"""Closed-loop load, the one implementation shared by loadtest/grpc_load.py and the GPU benchmark (benchmarks/).

What perf_analyzer's ``--concurrency-range C:C`` does: C workers each take the next request index, send it, wait
for the answer and go on, until ``max_requests`` indices were taken or the ``until`` time (time.perf_counter) has
passed. The caller's ``send(index)`` coroutine does the protocol work (gRPC, HTTP, an in-process engine); an
exception it raises counts as an error, not as a latency.

Throughput is read the way perf_analyzer reads it, over a steady window (`LoopResult.steady`): from the moment
every worker has had one answer (before it, the pipeline is still filling: nothing had time to finish) to the
last send (after it, fewer than C requests are in flight). Over the whole wall clock a short run undercounts by
about C/2 requests' worth of work: on the H200, 616 vs 597 pairs/s at C=8 over 48 requests (benchmarks/results/README.md).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of sorted values."""
    if not sorted_values:
        return float("nan")
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def latency_summary(latencies_s: list[float], digits: int = 3) -> dict:
    """P50/P95/P99/mean/min/max in milliseconds (None where nothing was measured)."""
    lat = sorted(x * 1000.0 for x in latencies_s)
    if not lat:
        return dict.fromkeys(("p50", "p95", "p99", "mean", "min", "max"))
    return {
        "p50": round(percentile(lat, 50), digits),
        "p95": round(percentile(lat, 95), digits),
        "p99": round(percentile(lat, 99), digits),
        "mean": round(sum(lat) / len(lat), digits),
        "min": round(lat[0], digits),
        "max": round(lat[-1], digits),
    }


@dataclass(frozen=True)
class SteadyWindow:
    """The answers that completed inside the steady part of a run, and how long that part lasted."""

    done: list[int]
    seconds: float


@dataclass
class LoopResult:
    concurrency: int
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    client_cpu_s: float = 0.0
    finishes: list[tuple[float, int | None]] = field(default_factory=list)  # (perf_counter, index; None: error)
    last_send: float = 0.0

    @property
    def done(self) -> list[int]:
        """Indices answered, in completion order."""
        return [index for _, index in self.finishes if index is not None]

    @property
    def steady(self) -> SteadyWindow | None:
        """Answers completed after every worker had finished once and up to the last send; None when that
        window holds fewer than `concurrency` answers (too short a run to say)."""
        if len(self.finishes) <= self.concurrency:
            return None
        start = self.finishes[self.concurrency - 1][0]
        inside = [index for at, index in self.finishes[self.concurrency:] if at <= self.last_send and index is not None]
        seconds = self.last_send - start
        return SteadyWindow(inside, seconds) if len(inside) >= self.concurrency and seconds > 0 else None

    def summary(self) -> dict:
        return {
            "concurrency": self.concurrency,
            "requests": len(self.done),
            "errors": len(self.errors),
            "error_examples": self.errors[:3],
            "wall_s": round(self.wall_s, 4),
            "client_cpu_s": round(self.client_cpu_s, 3),
            "latency_ms": latency_summary(self.latencies_s),
        }


async def closed_loop(
    send: Callable[[int], Awaitable[object]],
    concurrency: int,
    *,
    first: int = 0,
    max_requests: int = 0,
    until: float | None = None,
    timeout_s: float | None = None,
) -> LoopResult:
    """Indices first, first+1, ... sent by `concurrency` workers; stops at `max_requests` (0: no cap) or `until`."""
    if max_requests <= 0 and until is None:
        raise ValueError("closed_loop needs max_requests or until")
    result = LoopResult(concurrency)
    taken = 0

    async def worker() -> None:
        nonlocal taken
        while (max_requests <= 0 or taken < max_requests) and (until is None or time.perf_counter() < until):
            index = first + taken
            taken += 1
            t0 = result.last_send = time.perf_counter()
            try:
                await asyncio.wait_for(send(index), timeout_s)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                result.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                result.finishes.append((time.perf_counter(), None))
                continue
            result.latencies_s.append(time.perf_counter() - t0)
            result.finishes.append((time.perf_counter(), index))

    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.wall_s = time.perf_counter() - t0
    result.client_cpu_s = time.process_time() - cpu0
    return result
