"""vLLM's scheduler, adding a request's sequences to its queue together (`scheduler_cls` in engine_args).

vLLM's engine core starts a step as soon as anything waits. The engine step hands a request's sequences over one
`encode` call at a time (64 documents take ~7 ms to hand over on an H100 host), so with vLLM's own scheduler the
first one or two sequences run in a step of their own and the rest wait for it: on an H100 that first step of
~600 tokens took 13-30 ms (launch overhead: too large for a CUDA graph, too small to keep the GPU busy), a fifth of
a Qwen3-0.6B request's time at concurrency 1. This scheduler holds a window's sequences (`groups.py`) until the last
one has arrived and then queues them all, so they share one step. Sequences whose ids carry no window (another
client of the same engine) are queued at once, as vLLM's scheduler does.

Loaded by name in vLLM's engine-core process, which imports vLLM first; the engine step sets vLLM's environment before
either happens.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler

from .groups import group_of

# A window still incomplete after this long is queued as it is: a sequence the front end failed to send, or one
# aborted before it arrived, must not hold the others back.
GATHER_LIMIT_S = 0.5


@dataclass
class _Gathering:
    size: int
    since: float = field(default_factory=time.monotonic)
    requests: list[Any] = field(default_factory=list)


class WholeRequestScheduler(Scheduler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gathering: dict[str, _Gathering] = {}

    def add_request(self, request: Any) -> None:
        group = group_of(request.request_id)
        if group is None or group.size <= 1:
            super().add_request(request)
            return
        held = self._gathering.setdefault(group.key, _Gathering(group.size))
        held.requests.append(request)
        if len(held.requests) >= held.size:
            self._queue(group.key)

    def _queue(self, key: str) -> None:
        for request in self._gathering.pop(key).requests:
            super().add_request(request)

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        for key in [key for key, held in self._gathering.items() if now - held.since > GATHER_LIMIT_S]:
            self._queue(key)
        return super().schedule(*args, **kwargs)

    def finish_requests(self, request_ids: str | Iterable[str] | None, finished_status: Any) -> Any:
        """Aborted sequences still held are dropped (vLLM never saw them), and their window waits for the rest."""
        if request_ids is None:  # every request
            self._gathering.clear()
        elif self._gathering:
            ids = {request_ids} if isinstance(request_ids, str) else set(request_ids)
            request_ids = list(ids)  # an iterator would be spent by now
            for key, held in list(self._gathering.items()):
                kept = [request for request in held.requests if request.request_id not in ids]
                held.size -= len(held.requests) - len(kept)
                held.requests = kept
                if len(kept) >= held.size:
                    self._queue(key)
        return super().finish_requests(request_ids, finished_status)

    def get_num_unfinished_requests(self) -> int:
        """Held sequences count as unfinished: the engine core keeps stepping (and so gathering) while any wait."""
        return super().get_num_unfinished_requests() + sum(len(held.requests) for held in self._gathering.values())
