"""What every load system shares: probe requests (raw scores kept for the cross-check), warm-up, then the closed-loop
levels of loadtest/closed_loop.py, each turned into pairs/s, tokens/s and useful FLOP/s over the requests answered."""

from __future__ import annotations

import asyncio
import time

from benchmarks.procs import log
from benchmarks.settings import Settings
from benchmarks.workload import Workload
from loadtest.closed_loop import LoopResult, closed_loop


def _rates(done: list[int], seconds: float, work: Workload) -> dict:
    return {
        "requests_per_s": round(len(done) / seconds, 3),
        "pairs_per_s": round(sum(work.pairs(i) for i in done) / seconds, 1),
        "tokens_per_s": round(sum(work.tokens[i] for i in done) / seconds),
        "useful_flops_per_s": sum(work.flops[i] for i in done) / seconds,
    }


def level_result(loop: LoopResult, work: Workload, planned: int) -> dict:
    """Rates over the steady window (perf_analyzer's way, loadtest/closed_loop.py), the whole-wall rates beside
    them; latency percentiles over every answer."""
    out = loop.summary()
    out.update({"planned": planned, "complete": len(loop.done) == planned})
    wall = _rates(loop.done, loop.wall_s, work) if loop.wall_s else {}
    out["wall"] = {"seconds": round(loop.wall_s, 3), **wall}
    window = loop.steady
    if window is None:  # too short to have a steady part: the wall rates, marked so
        out.update(wall, rate_window="wall")
    else:
        out.update(_rates(window.done, window.seconds, work), rate_window="steady",
                   steady={"seconds": round(window.seconds, 3), "requests": len(window.done)})
    return out


async def drive(s: Settings, work: Workload, send, probe, result: dict, deadline: float, between=None) -> None:
    """Probe, warm-up, then the levels; `between(when, before, level)` runs around each level (server stats).
    `deadline` is a time.monotonic() value; a level that would start after it is skipped."""
    k = 0
    result["probe"] = []
    for _ in range(s.probe):
        result["probe"].append({"request": k, "raw": await asyncio.wait_for(probe(k), s.request_timeout_s)})
        k += 1
    t0 = time.perf_counter()
    warm = await closed_loop(send, min(4, max(1, s.warmup)), first=k, max_requests=s.warmup,
                             timeout_s=s.request_timeout_s)
    result["warmup"] = {"requests": len(warm.done), "errors": len(warm.errors), "s": round(time.perf_counter() - t0, 2),
                        "error_examples": warm.errors[:3]}
    if warm.errors and not warm.done:
        raise RuntimeError(f"every warm-up request failed: {warm.errors[:3]}")
    k += s.warmup
    result["levels"] = []
    for conc, n in s.plan():
        left = deadline - time.monotonic()
        if left < 5:
            result.setdefault("skipped_levels", []).append(conc)
            continue
        before = between("before") if between else None
        loop = await closed_loop(send, conc, first=k, max_requests=n, until=time.perf_counter() + left,
                                 timeout_s=s.request_timeout_s)
        level = level_result(loop, work, n)
        if between:
            level.update(between("after", before, level))
        k += n
        result["levels"].append(level)
        lat = level["latency_ms"]
        log(f"  c={conc:<3} {level['requests']}/{n} ok  {level['pairs_per_s']:>8} pairs/s  "
            f"{level['tokens_per_s']:>8} tok/s  p50 {lat['p50']} ms  p99 {lat['p99']} ms  errors {level['errors']}")
