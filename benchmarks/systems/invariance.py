"""Batch invariance, measured: does a pair's raw score depend on what else the server is scoring?

A fixed probe set (the workload's first requests) is scored alone, one request at a time. Then, per concurrency
level c, the same probes are scored again, ROUNDS times each, one at a time, while c - 1 other workers keep the
server busy with other requests of other lengths (FILLER_DOCUMENTS documents cut to FILLER_CUTS of their text), so
vLLM batches every probe sequence with sequences of other shapes; at c = 1 nothing runs beside the probe (the same
request twice). Per level: the largest raw difference of a pair against its alone score, how many pair scores moved
at all, and how many probe answers ranked their top 10 differently. Runs on the server the Triton system measured,
after its levels (``--invariance 1,8,32,64``), on the base point and on every ``--config-point`` (e.g.
gpu-deterministic).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Awaitable, Callable, Sequence

import numpy as np

from benchmarks.corpus import Request

PROBES = 2
ROUNDS = 2
TOP_K = 10
FILLER_DOCUMENTS = (5, 17, 33, 64)
FILLER_CUTS = (0.3, 0.6, 1.0)

Score = Callable[[Request], Awaitable[Sequence[float]]]


def fillers(requests: Sequence[Request]) -> list[Request]:
    """The other requests: each with another count of documents, each document cut to another share of its text."""
    out = []
    for i, request in enumerate(requests):
        count, share = FILLER_DOCUMENTS[i % len(FILLER_DOCUMENTS)], FILLER_CUTS[i % len(FILLER_CUTS)]
        documents = tuple(doc[: max(1, round(len(doc) * share))] for doc in request.documents[:count])
        out.append(dataclasses.replace(request, documents=documents, top_n=min(request.top_n, len(documents))))
    return out


def top(raw: Sequence[float]) -> list[int]:
    return [int(i) for i in np.argsort(-np.asarray(raw, dtype=np.float64), kind="stable")[:TOP_K]]


def compare(alone: Sequence[Sequence[float]], seen: Sequence[tuple[int, Sequence[float]]]) -> dict:
    """Each (probe index, raw scores) answer against that probe's alone scores."""
    diffs = [np.abs(np.asarray(raw, dtype=np.float64) - np.asarray(alone[k], dtype=np.float64)) for k, raw in seen]
    return {
        "answers": len(seen),
        "pairs": int(sum(d.size for d in diffs)),
        "max_abs_diff": float(max((d.max() for d in diffs), default=0.0)),
        "pairs_changed": int(sum(np.count_nonzero(d) for d in diffs)),
        "top10_changed": sum(top(raw) != top(alone[k]) for k, raw in seen),
    }


async def level(score: Score, probes: Sequence[Request], others: Sequence[Request], c: int,
                alone: Sequence[Sequence[float]]) -> dict:
    """The probes, ROUNDS times each, while c - 1 workers send the other requests."""
    done, errors = asyncio.Event(), []

    async def fill(worker: int) -> None:
        i = worker
        while not done.is_set():
            try:
                await score(others[i % len(others)])
            except Exception as exc:  # noqa: BLE001 - a refused filler is load that did not happen: counted
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            i += c - 1

    workers = [asyncio.create_task(fill(w)) for w in range(c - 1)]
    t0 = time.perf_counter()
    try:
        seen = [(k, await score(probe)) for _ in range(ROUNDS) for k, probe in enumerate(probes)]
    finally:
        done.set()
        await asyncio.gather(*workers)
    return {"concurrency": c, **compare(alone, seen), "seconds": round(time.perf_counter() - t0, 2),
            "filler_errors": len(errors), "filler_error_examples": errors[:3]}


async def measure(score: Score, requests: Sequence[Request], levels: Sequence[int], deadline: float) -> dict:
    """`requests`: the probes first (PROBES), the rest become the other requests. `deadline`: time.monotonic()."""
    probes, others = list(requests[:PROBES]), fillers(requests[PROBES:])
    alone = [list(await score(probe)) for probe in probes]
    rows, skipped = [], []
    for c in levels:
        if time.monotonic() > deadline - 30:
            skipped.append(c)
            continue
        rows.append(await level(score, probes, others, c, alone))
    return {"probes": len(probes), "rounds": ROUNDS, "filler_documents": list(FILLER_DOCUMENTS),
            "filler_cuts": list(FILLER_CUTS), "levels": rows, "skipped_levels": skipped}
