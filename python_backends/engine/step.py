"""One vLLM `AsyncLLM` pooling engine per Triton model instance, driven from its own event-loop thread.

The vllm_backend pattern: the engine lives on an asyncio loop in a thread of its own; `submit` hands one request
over and returns a future at once, so the Triton instance goes back for the next dynamic batch while vLLM's
scheduler packs the sequences of every request in flight into full GPU steps. The in-flight budget (`budget.py`)
keeps that bounded: a request past it waits on the loop, inside the step, or is refused at once.

Fairness: a request larger than the whole budget is handed to vLLM a window at a time (a share of one step), so the
step a small request runs in is never filled up with the rest of it; with vLLM's `scheduling_policy: "priority"`
each request's sequences carry the order of magnitude of its tokens as their priority (`budget.priority`), so vLLM's
next step takes the small request's sequences before a large one's.
A request's `Deadline` aborts its sequences in vLLM once its timeout passes or its client is gone; a stop signalled
to the server (`stopping.py`) refuses what has not reached vLLM and gives up, after the drain, what has.
"""

from __future__ import annotations

import asyncio
import inspect
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

from ..contract import ErrorKind
from ..errors import StepError
from ..families import detect_model
from ..model_source import resolve_model, verify_sha256
from ..sequences import EngineLimits, SequenceBatch
from ..tracing import StepTracer
from .budget import CANCEL_POLL_S, OVERSIZED_IN_FLIGHT, InflightBudget, Place, priority
from .deadline import ClientGone, Deadline, DeadlineExceeded
from .groups import sequence_ids
from .ipc_dir import private_ipc_dir
from .orphan_guard import OrphanGuard, children
from .settings import EngineSettings, check_vllm_version
from .stopping import Drain, ServerStopping, StopSignal

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_S = 20.0  # how long vLLM's engine core may take to exit before it is killed
HEALTH_POLL_S = 1.0  # how often the watchdog looks for a dead engine when no request would notice


class EngineDead(StepError, RuntimeError):
    """vLLM's engine core has died; every request now fails until the model is loaded again."""

    kind = ErrorKind.ENGINE_DEAD
    reason = "engine_dead"  # its label in reranker_rejected_requests_total when it refuses a request


def _import_vllm(settings: EngineSettings, device_id: int | None) -> Any:
    """vLLM, imported once its environment is in place: the step's vllm_env, a UTF-8 locale (Triton's stub starts
    Python without its environment's, so open() would decode ASCII, and torch and vLLM read UTF-8 files at import),
    and on a GPU this instance's device only (one engine per GPU)."""
    os.environ.update(settings.vllm_env)
    locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
    if device_id is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(device_id)
    import vllm

    return vllm


def rendered_tokens(token_ids: list[int]) -> dict[str, Any]:
    """One sequence as vLLM's rendered token input (`vllm.inputs.TokensInput`), which AsyncLLM takes as it is. A
    `TokensPrompt` goes through vLLM's input preprocessor first, a raw prompt's path (in vLLM 0.32 a trip to a thread
    pool per sequence) that a request's whole hand-over waits for. The ids are already checked here."""
    return {"type": "token", "prompt_token_ids": token_ids}


def float32_rows(pooled: list[Any]) -> np.ndarray:
    """vLLM's pooled output of each sequence (a torch tensor, possibly bfloat16, which numpy cannot read) as one
    float32 row each, converted in one call: one conversion per sequence took longer than the rest of the scoring."""
    import torch  # loaded with vLLM already

    return torch.stack(pooled).float().cpu().numpy().reshape(len(pooled), -1)


class AsyncEngine:
    """Owns the engine, its loop thread and the in-flight budget; `submit` maps one request to its raw scores."""

    def __init__(self, settings: EngineSettings, device_id: int | None = None, tracer: StepTracer | None = None) -> None:
        """`tracer`: the step's spans of traced requests (`submit`'s `trace_parent`); none by default."""
        self.settings = settings
        self.tracer = tracer if tracer is not None else StepTracer.off()
        self._ids = itertools.count()
        self._on_death: Callable[[], None] | None = None
        self._on_refusal: Callable[[BaseException], None] = lambda exc: None
        self._closing = False
        self.drain = Drain(settings.drain_timeout_s)
        vllm = _import_vllm(settings, device_id)
        engine_args = self._engine_args(vllm)
        self._start_loop()
        self._start_vllm(vllm.__version__, engine_args)
        self._read_limits()
        self._watchdog = asyncio.run_coroutine_threadsafe(self._watch_health(), self._loop)

    def _engine_args(self, vllm: Any) -> Any:
        """The model resolved and checked (its pinned bytes, its family), its score kind chosen for this vLLM, and
        vLLM's arguments as configured."""
        release = check_vllm_version(vllm.__version__)
        model_path = resolve_model(self.settings.model)
        verify_sha256(model_path, self.settings.model_sha256)
        family = detect_model(model_path).family
        self.score_kind = family.score_kind(vllm.PoolingParams, release)
        return vllm.AsyncEngineArgs(**self.settings.vllm_args(model_path, family))

    def _start_loop(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-engine-loop", daemon=True)
        self._thread.start()

    def _start_vllm(self, version: str, engine_args: Any) -> None:
        started = time.monotonic()
        before = children(os.getpid())
        with private_ipc_dir() as self.ipc_dir:
            self.llm = self._call(self._build(engine_args))
        self.start_seconds = time.monotonic() - started
        # the engine-core processes vLLM just started, ended by the guard if this process dies without close(); the
        # guard removes the sockets' directory when it exits, either way
        self._guard = OrphanGuard({pid: t for pid, t in children(os.getpid()).items() if pid not in before},
                                   self.ipc_dir)
        log.warning("vLLM %s engine ready in %.1f s", version, self.start_seconds)

    def _read_limits(self) -> None:
        """What a request is checked against, and how it is handed over, as the engine vLLM built has them."""
        scheduler = self.llm.vllm_config.scheduler_config
        self.limits = EngineLimits(
            max_model_len=self.llm.model_config.max_model_len,
            vocab_size=self.llm.model_config.get_vocab_size(),
            max_sequences=self.settings.max_sequences,
            query_row=self.score_kind.query_row,
        )
        self.budget = InflightBudget(self.settings.max_inflight_tokens, self.settings.max_waiting_tokens)
        self._by_priority = scheduler.policy == "priority"
        self._step_tokens = scheduler.max_num_batched_tokens

    @staticmethod
    async def _build(engine_args: Any) -> Any:
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(engine_args)  # inside the loop: its output handler runs on this loop

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def alive(self) -> bool:
        return not self.llm.errored

    def watch_stop(self) -> bool:
        """Drain on the server's stop (SIGTERM to this stub); call from the main thread, as Triton's
        `initialize` runs. False where the signal cannot be watched."""
        self._stop_signal = StopSignal(self._loop, self.drain.begin)
        return self._stop_signal.watching

    def on_death(self, callback: Callable[[], None]) -> None:
        """`callback` runs once, on the loop thread, when the engine is found dead."""
        self._on_death = callback

    def on_refusal(self, callback: Callable[[BaseException], None]) -> None:
        """`callback(exc)` runs, on the loop thread, for a request that gave up while it waited for room (its
        deadline passed, its client left, the engine died): refused before vLLM saw it."""
        self._on_refusal = callback

    def submit(self, batch: SequenceBatch, deadline: Deadline, trace_parent: Any | None = None) -> Future:
        """Hand one validated request over; never blocks. Raises `Overloaded` when it would have to wait and the
        waiting work is at its bound; otherwise the future answers once vLLM has scored it. `trace_parent`: the
        request's span context (`StepTracer.parent_of`), under which its wait and its time in vLLM are spans.
        Raises `ServerStopping` once the server is stopping."""
        self.drain.refuse_new()
        place = self.budget.reserve(batch.tokens)
        request_id = f"rerank-{next(self._ids)}"
        work = self._run(batch, request_id, deadline, place, trace_parent)
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    async def _run(self, batch: SequenceBatch, request_id: str, deadline: Deadline, place: Place | None,
                   trace_parent: Any | None) -> np.ndarray:
        if place is not None:
            try:
                with self.tracer.span("wait for in-flight room", trace_parent, tokens=batch.tokens):
                    await self.budget.wait_for_room(place, lambda: self._check(deadline))
            except (EngineDead, DeadlineExceeded, ClientGone, ServerStopping) as exc:
                self._on_refusal(exc)
                raise
        try:
            with self.tracer.span("vLLM", trace_parent, tokens=batch.tokens) as span:
                return await self._score(batch, request_id, deadline, span)
        finally:
            self.budget.release(batch.tokens)

    def _check(self, deadline: Deadline) -> None:
        if not self.alive:
            raise EngineDead("the vLLM engine died while this request waited for room")
        deadline.check()
        self.drain.refuse_new()

    async def _score(self, batch: SequenceBatch, request_id: str, deadline: Deadline, span: Any | None) -> np.ndarray:
        """`span` (traced requests): the sequences, and an event per window handed to vLLM."""
        ids, types = batch.split()
        if span is not None:
            span.set_attribute("sequences", len(ids))
        rank = priority(batch.tokens) if self._by_priority else 0
        tasks: list[asyncio.Future] = []  # every sequence handed to vLLM so far: what the watcher cancels
        names: list[str] = []  # their request ids in vLLM
        watcher = asyncio.ensure_future(self._abort_when(deadline, tasks))
        pooled: list[Any] = []
        try:
            for number, window in enumerate(self._windows(batch)):
                deadline.check()  # passed, or the client left, while it waited for room or for the last window
                window_names = sequence_ids(request_id, number, window)
                handed = [asyncio.ensure_future(self._pool(rendered_tokens(ids[n].tolist()),
                                                           self.score_kind.params(types[n]), name, rank))
                          for n, name in zip(window, window_names)]
                tasks.extend(handed)
                names.extend(window_names)
                if span is not None:
                    span.add_event("handed over", {"sequences": len(window)})
                pooled.extend(await asyncio.gather(*handed))
        except BaseException:
            for task in tasks:
                task.cancel()  # encode() aborts its request in vLLM (AsyncLLM.abort) when cancelled
            if not self.alive:
                raise EngineDead(f"the vLLM engine died: {self.llm.dead_error}") from None
            await self._abort_all(tasks, names)
            if watcher.done() and not watcher.cancelled():
                # why the watcher cancelled the sequences, raised afresh (a deadline that passed stays passed, a
                # client gone stays gone, a drain that ran out stays out): raising the watcher's own exception would
                # tie it to this frame, which holds the watcher, in a garbage cycle keeping the request (its sender,
                # its tokens) alive
                try:
                    self._give_up_when_due(deadline)
                except (DeadlineExceeded, ClientGone, ServerStopping) as reason:
                    raise reason from None  # not "during handling of" the sequences' cancellation
            raise
        finally:
            watcher.cancel()
        return batch.document_scores(self.score_kind.sequence_scores(float32_rows(pooled)))

    def _windows(self, batch: SequenceBatch) -> list[range]:
        """A request within the in-flight budget goes to vLLM whole. An oversized one goes a window at a time, each
        of 1/OVERSIZED_IN_FLIGHT of vLLM's step (its max_num_batched_tokens), the next once the last is scored: so
        vLLM never holds more of it than one step's share, and a small request that arrives meanwhile runs in the
        next step with no more than that share beside it (vLLM fills a step with whatever waits, priority or not)."""
        if batch.tokens <= self.budget.limit:
            return [range(len(batch.lengths))]
        return batch.windows(self._step_tokens // OVERSIZED_IN_FLIGHT)

    async def _abort_all(self, tasks: list[asyncio.Future], names: list[str]) -> None:
        """Once the cancelled sequences have ended, abort every one of them in vLLM by its id: the request fails only
        once vLLM holds none of it (its reply reports what vLLM holds as it answers). encode() aborts only a request
        that vLLM's add_request has returned; one cancelled inside it, while its send to the engine core waited, is
        left registered in vLLM's front end for good (vLLM 0.26-0.32 guard only n > 1 sampling against that).
        Aborting an id vLLM no longer holds does nothing."""
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.llm.abort(names)

    async def _pool(self, prompt: Any, params: Any, request_id: str, rank: int) -> Any:
        final = None
        async for output in self.llm.encode(prompt, params, request_id, priority=rank):
            final = output
        return final.outputs.data

    async def _abort_when(self, deadline: Deadline, tasks: list[asyncio.Future]) -> None:
        """Cancel the request's sequences, and so abort them in vLLM, once its deadline passes, its client is gone
        or the drain of a stop runs out (`_give_up_when_due` then says which)."""
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            try:
                self._give_up_when_due(deadline)
            except (DeadlineExceeded, ClientGone, ServerStopping):
                for task in tasks:
                    task.cancel()
                return

    def _give_up_when_due(self, deadline: Deadline) -> None:
        deadline.check()
        self.drain.check_in_flight()

    @property
    def unfinished_sequences(self) -> int:
        """vLLM's own count of the sequences it holds (waiting or running), as its output processor tracks them."""
        return self.llm.output_processor.get_num_unfinished_requests()

    async def _watch_health(self) -> None:
        while self.alive or self._closing:
            if self._closing:
                return
            await asyncio.sleep(HEALTH_POLL_S)
        log.error("vLLM engine is dead: %s", self.llm.dead_error)
        if self._on_death is not None:
            self._on_death()

    def _shutdown_vllm(self) -> None:
        """Stop vLLM, giving its engine-core process SHUTDOWN_GRACE_S to exit. vLLM's own default is 5 s, after which
        it kills the process, and a killed engine core cannot unlink its shared-memory segments: they stay in
        /dev/shm until the host restarts. On a busy host (a CPU server under load) exiting can take longer."""
        if "timeout" in inspect.signature(self.llm.shutdown).parameters:  # releases that take one
            self.llm.shutdown(timeout=SHUTDOWN_GRACE_S)
        else:
            self.llm.shutdown()

    def close(self) -> None:
        """Drain what is in flight (up to the configured timeout), then stop the engine and its loop."""
        if not self.budget.wait_idle(self.settings.drain_timeout_s):
            log.warning("finalize: %d tokens in flight, %d waiting after %.0f s", self.budget.used,
                        self.budget.waiting, self.settings.drain_timeout_s)
        self._closing = True  # a shut-down engine reads as errored: not a death to report
        self._watchdog.cancel()
        self._shutdown_vllm()
        self._guard.close()
        self.tracer.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
