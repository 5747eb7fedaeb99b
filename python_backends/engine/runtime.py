"""One vLLM `AsyncLLM` pooling engine per Triton model instance, driven from its own event-loop thread.

The vllm_backend pattern: the engine lives on an asyncio loop in a thread of its own; `submit` hands one request
over and returns a future at once, so the Triton instance goes back for the next dynamic batch while vLLM's
scheduler packs the sequences of every request in flight into full GPU steps. What keeps that bounded is
`InflightBudget`: past `max_inflight_tokens`, `submit` blocks, the instance stays busy, and new requests wait in
Triton's queue, where the queue policy's limits and fast rejects apply.
"""

from __future__ import annotations

import asyncio
import itertools
import locale
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..families import detect_model
from ..model_source import resolve_model, verify_sha256
from .inputs import EngineLimits, SequenceBatch
from .orphan_guard import OrphanGuard, children
from .settings import EngineSettings, check_vllm_version

log = logging.getLogger(__name__)
CANCEL_POLL_S = 0.25  # how often an in-flight request asks Triton whether its client is gone
HEALTH_POLL_S = 1.0  # how often the watchdog looks for a dead engine when no request would notice


class EngineDead(RuntimeError):
    """vLLM's engine core has died; every request now fails until the model is loaded again."""

    reason = "engine_dead"  # its label in reranker_rejected_requests_total when it refuses a request


class InflightBudget:
    """Tokens handed to vLLM and not yet answered. A request larger than the whole budget runs alone."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._cond = threading.Condition()

    def acquire(self, tokens: int, alive: Callable[[], bool]) -> None:
        with self._cond:
            while not (self.used == 0 or self.used + tokens <= self.limit):
                if not alive():
                    raise EngineDead("the vLLM engine died while this request waited for room")
                self._cond.wait(timeout=HEALTH_POLL_S)
            self.used += tokens

    def release(self, tokens: int) -> None:
        with self._cond:
            self.used -= tokens
            self._cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.used == 0, timeout=timeout_s)


class AsyncEngine:
    """Owns the engine, its loop thread and the in-flight budget; `submit` maps one request to its raw scores."""

    def __init__(self, settings: EngineSettings, device_id: int | None = None) -> None:
        os.environ.update(settings.vllm_env)
        # Triton's stub starts Python without the locale of its environment, so open() would decode as ASCII;
        # torch and vLLM read UTF-8 files at import.
        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
        if device_id is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(device_id)  # one engine per GPU: this instance's GPU only
        import vllm  # imported here: after the environment above is in place

        vllm_release = check_vllm_version(vllm.__version__)
        from vllm import AsyncEngineArgs, PoolingParams
        from vllm.inputs import TokensPrompt

        self._tokens_prompt = TokensPrompt
        self.settings = settings
        model_path = resolve_model(settings.model)
        verify_sha256(model_path, settings.model_sha256)
        family = detect_model(model_path).family
        self.kind = family.score_kind(PoolingParams, vllm_release)
        engine_args = AsyncEngineArgs(**settings.vllm_args(model_path, family))

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-engine-loop", daemon=True)
        self._thread.start()
        started = time.monotonic()
        before = children(os.getpid())
        self.llm = self._call(self._build(engine_args))
        self.start_seconds = time.monotonic() - started
        # the engine-core processes vLLM just started: ended by the guard if this process dies without close()
        self._guard = OrphanGuard({pid: t for pid, t in children(os.getpid()).items() if pid not in before})
        log.warning("vLLM %s engine ready in %.1f s", vllm.__version__, self.start_seconds)
        config = self.llm.model_config
        self.limits = EngineLimits(
            max_model_len=config.max_model_len,
            vocab_size=config.get_vocab_size(),
            max_sequences=settings.max_sequences,
            query_row=self.kind.query_row,
        )
        self.budget = InflightBudget(settings.max_inflight_tokens)
        self._ids = itertools.count()
        self._on_death: Callable[[], None] | None = None
        self._closing = False
        self._watchdog = asyncio.run_coroutine_threadsafe(self._watch_health(), self._loop)

    @staticmethod
    async def _build(engine_args: Any) -> Any:
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(engine_args)  # inside the loop: its output handler runs on this loop

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def alive(self) -> bool:
        return not self.llm.errored

    def on_death(self, callback: Callable[[], None]) -> None:
        """`callback` runs once, on the loop thread, when the engine is found dead."""
        self._on_death = callback

    def submit(self, batch: SequenceBatch, is_cancelled: Callable[[], bool]) -> Future:
        """Hand one validated request to vLLM; blocks only while the in-flight budget is spent."""
        self.budget.acquire(batch.tokens, lambda: self.alive)
        request_id = f"rerank-{next(self._ids)}"
        future = asyncio.run_coroutine_threadsafe(self._score(batch, request_id, is_cancelled), self._loop)
        future.add_done_callback(lambda _: self.budget.release(batch.tokens))
        return future

    async def _score(self, batch: SequenceBatch, request_id: str, is_cancelled: Callable[[], bool]) -> np.ndarray:
        if is_cancelled():  # the client left (or its timeout passed) while the request waited: vLLM never sees it
            raise asyncio.CancelledError
        ids, types = batch.split()
        tasks = [
            asyncio.ensure_future(self._pool(self._tokens_prompt(prompt_token_ids=seq.tolist()), self.kind.params(t),
                                             f"{request_id}-{n}"))
            for n, (seq, t) in enumerate(zip(ids, types))
        ]
        watcher = asyncio.ensure_future(self._cancel_when(is_cancelled, tasks))
        try:
            pooled = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()  # vLLM aborts a request whose encode() is cancelled
            if not self.alive:
                raise EngineDead(f"the vLLM engine died: {self.llm.dead_error}") from None
            raise
        finally:
            watcher.cancel()
        return batch.document_scores(self.kind.sequence_scores(pooled))

    async def _pool(self, prompt: Any, params: Any, request_id: str) -> Any:
        final = None
        async for output in self.llm.encode(prompt, params, request_id):
            final = output
        return final.outputs.data

    @staticmethod
    async def _cancel_when(is_cancelled: Callable[[], bool], tasks: list[asyncio.Future]) -> None:
        """Cancel the request's sequences in vLLM once Triton reports the client gone (or its timeout passed)."""
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            if is_cancelled():
                for task in tasks:
                    task.cancel()
                return

    async def _watch_health(self) -> None:
        while self.alive or self._closing:
            if self._closing:
                return
            await asyncio.sleep(HEALTH_POLL_S)
        log.error("vLLM engine is dead: %s", self.llm.dead_error)
        if self._on_death is not None:
            self._on_death()

    def close(self) -> None:
        """Drain what is in flight (up to the configured timeout), then stop the engine and its loop."""
        if not self.budget.wait_idle(self.settings.drain_timeout_s):
            log.warning("finalize: %d tokens still in flight after %.0f s", self.budget.used, self.settings.drain_timeout_s)
        self._closing = True  # a shut-down engine reads as errored: not a death to report
        self._watchdog.cancel()
        self.llm.shutdown()
        self._guard.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
