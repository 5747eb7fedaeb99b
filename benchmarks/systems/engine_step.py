"""The engine step without Triton: the project's own `AsyncEngine` (python_backends/engine: its event-loop thread,
in-flight budget, deadline watcher and priorities) built from the committed `rerank_engine` configuration, in this
process, fed the same token ids as the direct AsyncLLM. Beside `async_llm` and `triton` it splits what the ensemble
adds over the bare engine into what the engine step's code costs and what Triton (its stub process, the hops, the
other steps) costs. After the levels, `single_request_split` sends the same requests one at a time, in turn through
`AsyncEngine.submit` and as the direct AsyncLLM's coroutine run on the engine step's own loop thread: equal
latencies put the engine step's cost over `async_llm` in where its engine lives (a loop thread of its own, built on
that loop), not in its code (budget, deadline watcher, priorities, tensors to token lists)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from benchmarks.procs import log
from benchmarks.settings import Settings
from benchmarks.systems.async_llm import CPU_ENV, pooled
from benchmarks.systems.common import drive
from benchmarks.workload import Workload
from loadtest.closed_loop import latency_summary

SPLIT_REQUESTS = 24  # requests sent each way, alternating which goes first


def sequence_batch(token_ids: list[list[int]], types: list[list[int]] | None):
    """One request's sequences as the preprocess step hands them on (one document each)."""
    from python_backends.sequences import SequenceBatch

    return SequenceBatch.from_sequences(token_ids, types, range(len(token_ids)))


def run(s: Settings, result: dict, pgid_file=None) -> None:
    from python_backends.engine import AsyncEngine, Deadline, EngineSettings
    from python_backends.triton_params import ModelParameters
    from python_backends.model_repository import ENGINE, REPOSITORY, config_dict, config_path

    work = Workload(s)
    deadline = time.monotonic() + s.budgets["engine_step"] - 15
    committed = EngineSettings.from_parameters(
        ModelParameters.from_model_config(config_dict(config_path(REPOSITORY, ENGINE, s.variant))))
    cpu_env = CPU_ENV if s.device == "cpu" else {}
    settings = dataclasses.replace(committed, engine_args=s.engine_args(), vllm_env={**committed.vllm_env, **cpu_env})
    result["engine_args"] = settings.engine_args
    engine = AsyncEngine(settings)
    result["startup_s"] = round(engine.start_seconds, 1)
    log(f"  engine step ready in {result['startup_s']} s")
    batches = [sequence_batch(ids, types) for ids, types in zip(work.token_ids, work.types)]

    async def score(k: int) -> list[float]:
        future = engine.submit(batches[k], Deadline(s.request_timeout_s))
        return [float(x) for x in await asyncio.wrap_future(future)]

    try:
        asyncio.run(drive(s, work, score, score, result, deadline))
        result["workload"] = work.describe()
        if time.monotonic() < deadline - 20:
            result["single_request_split"] = single_request_split(engine, work)
            log(f"  one request at a time: {result['single_request_split']}")
    finally:
        engine.close()


def single_request_split(engine, work: Workload) -> dict:
    """P50/P95 (ms) of one request at a time through `AsyncEngine.submit` and through the direct AsyncLLM's code run
    on the engine step's loop thread, in turn, over the workload's last requests with each sequence's first token
    changed (vLLM's prefix cache holds the requests as the levels sent them: a changed first block misses it, so
    both ways run full prefills, as in the levels)."""
    from python_backends.engine import Deadline

    first = len(work.token_ids) - SPLIT_REQUESTS
    fresh = [[[ids[0] ^ 1, *ids[1:]] for ids in work.token_ids[k]] for k in range(first, len(work.token_ids))]
    batches = [sequence_batch(ids, work.types[first + j]) for j, ids in enumerate(fresh)]

    def direct(j: int) -> list:
        return pooled(engine.llm, fresh[j], work.types[first + j], f"split-{j}")

    ways = {"submit": lambda j: engine.submit(batches[j], Deadline()).result(),
            "direct_on_engine_loop": lambda j: asyncio.run_coroutine_threadsafe(direct(j), engine._loop).result()}
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    for j in range(SPLIT_REQUESTS):
        way = sorted(ways)[(j + j // 2) % 2]  # direct, submit, submit, direct, ...: neither always goes first
        t0 = time.perf_counter()
        ways[way](j)
        seconds[way].append(time.perf_counter() - t0)
    return {way: {key: value for key, value in latency_summary(values).items() if key in ("p50", "p95")}
            for way, values in seconds.items()}
