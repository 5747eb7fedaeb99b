"""The ceiling: vLLM's AsyncLLM in this process, built from the committed engine_args (same compile and batching
settings as the Triton engine), fed the preprocess step's token ids; no server, no tokenization on the clock.
Each request's sequences are submitted together and answered when all are pooled (raw scores, no activation). Its
sequence ids carry no window (python_backends/engine/groups.py), so the configs' scheduler queues each as it
arrives, as vLLM's own does: the peer is vLLM's behaviour, whatever scheduler_cls the engine_args name."""

from __future__ import annotations

import asyncio
import functools
import time

from benchmarks.procs import log
from benchmarks.settings import Settings
from benchmarks.systems.common import drive
from benchmarks.workload import Workload

CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


@functools.cache
def _score_kind():
    """The engine step's score kind for this vLLM, made once: pooling_params runs for every sequence."""
    import vllm

    from python_backends.engine.settings import check_vllm_version
    from python_backends.families.base import ClassifierLogit

    return ClassifierLogit(vllm.PoolingParams, check_vllm_version(vllm.__version__))


def pooling_params(types: list[int] | None):
    """Raw logits, made by the engine step's own score kind, so that a BERT-style pair's token types travel in the
    form this vLLM rebuilds them from (classify/encode ignore TokensPrompt's token_type_ids)."""
    import numpy as np

    return _score_kind().params(np.asarray(types if types else [], dtype=np.int64))


async def pooled(engine, token_ids: list[list[int]], types: list[list[int]] | None, request_id: str) -> list:
    """vLLM's pooled output of each sequence of one request, all handed to `engine.encode` at once, in order, in the
    form the engine step hands them over (`rendered_tokens`: AsyncLLM takes it as it is, where a `TokensPrompt` goes
    through vLLM's input preprocessor first), so that the peer's hand-over is no slower than the step's."""
    from python_backends.engine.step import rendered_tokens

    async def one(i: int):
        final = None
        async for out in engine.encode(rendered_tokens(token_ids[i]),
                                       pooling_params(types[i] if types else None), f"{request_id}-{i}"):
            final = out
        return final.outputs.data

    return list(await asyncio.gather(*(one(i) for i in range(len(token_ids)))))


def run(s: Settings, result: dict, pgid_file=None) -> None:
    import os

    if s.device == "cpu":
        os.environ.update(CPU_ENV)
    from vllm import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    work = Workload(s)
    deadline = time.monotonic() + s.budgets["async_llm"] - 15
    args = s.engine_args()
    result["engine_args"] = args
    t0 = time.perf_counter()
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
    result["startup_s"] = round(time.perf_counter() - t0, 1)
    log(f"  AsyncLLM ready in {result['startup_s']} s")
    counter = iter(range(10**9))

    async def score(k: int) -> list[float]:
        outputs = await pooled(engine, work.token_ids[k], work.types[k], f"r{k}-{next(counter)}")
        return [float(data.reshape(-1)[0]) for data in outputs]

    async def alone(k: int) -> list[float]:
        """Each sequence of request k in a step of its own: a batch composition no server shares."""
        outputs = [(await pooled(engine, [ids], [work.types[k][i]] if work.types[k] else None,
                                 f"a{k}-{i}-{next(counter)}"))[0] for i, ids in enumerate(work.token_ids[k])]
        return [float(data.reshape(-1)[0]) for data in outputs]

    async def scored_again():
        """The probes again after the levels, as before and alone: what the engine's own scores move by when only
        the steps they share change (the cross-check's yardstick for another system's difference)."""
        await drive(s, work, score, score, result, deadline)
        for key, way in (("probe_repeat", score), ("probe_alone", alone)):
            result[key] = [{"request": p["request"], "raw": await way(p["request"])} for p in result["probe"]]

    try:
        asyncio.run(scored_again())
        result["workload"] = work.describe()
    finally:
        engine.shutdown()
