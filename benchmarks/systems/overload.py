"""Overload of the Triton ensemble on the benchmark's own server: an open loop sending the workload's requests at
`factor` times the rate the server sustained at its highest level, for `seconds`. Every request must end as its
right answer or as a fast refusal (UNAVAILABLE: preprocess's work budget is spent, or the engine's bound of waiting
work), none lost; GPU memory must stay where vLLM's start-up reservation put it
(`gpu_memory_utilization`): overload may only lengthen the steps' waiting work, which their own bounds limit.
Afterwards the first probe request must still get the same raw scores."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from benchmarks.procs import MemoryPoller, log
from loadtest.closed_loop import latency_summary

REFUSED = ("StatusCode.UNAVAILABLE", "StatusCode.RESOURCE_EXHAUSTED")


def _outcome(exc: BaseException) -> str:
    status = getattr(exc, "status", lambda: None)()
    return "refused" if str(status) in REFUSED else f"error: {type(exc).__name__}: {str(exc)[:160]}"


async def _timed(send, k: int) -> tuple[str, float]:
    t0 = time.perf_counter()
    try:
        await send(k)
        return "ok", time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - every request's end is counted
        return _outcome(exc), time.perf_counter() - t0


async def run(send, probe, probe_raw: list[float], n_requests: int, sustained_rps: float, factor: float,
              seconds: float) -> dict:
    """`send(k)` answers request k % n_requests or raises; `probe(k)` returns raw scores (compared afterwards)."""
    rate = sustained_rps * factor
    total = max(1, int(rate * seconds))
    tasks = []
    with MemoryPoller(0.25) as memory:
        t0 = time.perf_counter()
        for i in range(total):
            await asyncio.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
            tasks.append(asyncio.ensure_future(_timed(send, i % n_requests)))
        ends = await asyncio.gather(*tasks)
        wall = time.perf_counter() - t0
    kinds = Counter(kind for kind, _ in ends)
    after = await probe(0)
    out = {
        "factor": factor, "sustained_requests_per_s": round(sustained_rps, 3), "offered_requests_per_s": round(rate, 3),
        "sent": total, "answered": kinds["ok"], "refused": kinds["refused"],
        "other": {k: v for k, v in kinds.items() if k not in ("ok", "refused")},
        "lost": total - sum(kinds.values()), "wall_s": round(wall, 2),
        "answered_per_s": round(kinds["ok"] / wall, 3),
        "answered_latency_ms": latency_summary([t for k, t in ends if k == "ok"]),
        "refused_latency_ms": latency_summary([t for k, t in ends if k == "refused"]),
        "gpu_memory": memory.report(),
        "probe_after_max_abs_diff": max(abs(a - b) for a, b in zip(after, probe_raw)),
    }
    log(f"  overload x{factor}: sent {total} at {rate:.1f}/s: {kinds['ok']} answered, {kinds['refused']} refused "
        f"(p50 {out['refused_latency_ms']['p50']} ms), other {out['other']}, GPU peak {memory.peak} MiB")
    return out
