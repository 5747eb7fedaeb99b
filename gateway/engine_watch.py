"""Calls in flight on one ensemble, and a probe of it while any has waited long: Triton 2.51 never answers a request
whose engine stub died after taking it (docs/OPERATIONS.md, Faults), so a call in flight then would wait out its
whole deadline. The probe pair (reranker_client.healthcheck) meets the dead stub's error within a second; every call
still waiting on that ensemble then ends with `EngineLost` (503: another replica, or this one once its engine is
recovered, can answer it).

    >>> import asyncio
    >>> async def dead():
    ...     return RuntimeError("Stub process 'rerank_engine_0_0' is not healthy.")
    >>> async def lost():
    ...     await asyncio.sleep(60)
    >>> asyncio.run(EngineWatch(dead, after_s=0.01).run(lost()))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    gateway.engine_watch.EngineLost: the engine died with this call in flight: Stub process ... is not healthy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

log = logging.getLogger("gateway")

T = TypeVar("T")


class EngineLost(Exception):
    """A call in flight when its ensemble's engine died: Triton will never answer it."""

    def __init__(self, probe_error: BaseException) -> None:
        super().__init__(f"the engine died with this call in flight: {probe_error}")
        self.probe_error = probe_error


class EngineWatch:
    """`probe()` answers the error of a dead engine, or None (answered, or busy). One probe runs at a time for every
    call waiting; a call that has waited `after_s` asks for one, and again each `after_s` it waits on."""

    def __init__(self, probe: Callable[[], Awaitable[BaseException | None]], after_s: float) -> None:
        self._probe = probe
        self.after_s = after_s
        self._running: asyncio.Task | None = None

    async def run(self, call: Awaitable[T]) -> T:
        """The call's answer, or the dead engine's error once a probe meets it (the call is cancelled then). A call
        answered while a probe runs is answered at once."""
        task = asyncio.ensure_future(call)
        try:
            while not (await asyncio.wait({task}, timeout=self.after_s))[0]:
                probe = self._probing()
                await asyncio.wait({task, probe}, return_when=asyncio.FIRST_COMPLETED)
                if not task.done() and (dead := probe.result()) is not None:
                    log.error("a call waited over %.0f s on an engine that answers %s: ending it", self.after_s, dead)
                    raise EngineLost(dead)
            return task.result()
        finally:
            task.cancel()

    def _probing(self) -> asyncio.Task:
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._probe())
        return self._running
