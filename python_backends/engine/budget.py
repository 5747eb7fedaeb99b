"""The engine step's in-flight budget: tokens handed to vLLM and not yet answered, and the work waiting for room.

Past `max_inflight_tokens` a request waits on the engine's loop, inside the step (never in `execute`, so Triton's
queue stays empty), and past `max_waiting_tokens` of waiting work it is refused at once (`Overloaded`, counted by
the step), so no refusal is left to Triton's queue. A request larger than the whole budget holds none of it
(its own lane, `OVERSIZED_IN_FLIGHT` at a time), so small requests still reach vLLM while it is scored.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable

from ..errors import Overloaded

CANCEL_POLL_S = 0.25  # how often a request in flight or waiting for room looks at its deadline and its client
OVERSIZED_IN_FLIGHT = 2  # requests larger than the whole budget in flight at once: one scored, the next queued in vLLM


class Place:
    """A request's place in its lane's line while it waits for room: lines are first come, first served."""

    __slots__ = ("tokens",)

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens


class InflightBudget:
    """Tokens handed to vLLM and not yet answered, in two lanes, and the work waiting for room. Requests of at most
    `limit` tokens share `limit`. A larger request (oversized) takes none of the shared tokens: up to
    OVERSIZED_IN_FLIGHT of them are in flight beside the shared lane, so one maximal request never holds up the
    small ones behind it. `reserve` never blocks: a request that does not fit, or finds others of its lane waiting,
    takes a place in its lane's line and waits (`wait_for_room`, on the engine's loop) while the waiting work stays
    within `waiting_limit` tokens; past it the request is refused. A request always may wait when none does, so one
    larger than the bound is still served."""

    def __init__(self, limit: int, waiting_limit: int) -> None:
        self.limit = limit
        self.waiting_limit = waiting_limit
        self.used = 0  # tokens of the shared lane
        self.oversized = 0  # oversized requests in flight
        self.waiting = 0  # tokens of the requests waiting for room
        self._lines: dict[bool, deque[Place]] = {False: deque(), True: deque()}  # keyed by "oversized"
        self._cond = threading.Condition()  # guards the counts and lines; `wait_idle` waits on it from another thread
        self._freed = asyncio.Event()  # set (and replaced) on the loop when room may have freed: wakes the waiting

    def _fits(self, tokens: int) -> bool:
        if tokens > self.limit:
            return self.oversized < OVERSIZED_IN_FLIGHT
        return self.used + tokens <= self.limit

    def _take(self, tokens: int) -> None:
        if tokens > self.limit:
            self.oversized += 1
        else:
            self.used += tokens

    def _line(self, tokens: int) -> deque[Place]:
        return self._lines[tokens > self.limit]

    def reserve(self, tokens: int) -> Place | None:
        """None: the request is in flight now. A `Place`: it waits (`wait_for_room` next), behind the requests of
        its lane that came first. Raises `Overloaded`, without waiting, when the waiting work would pass
        `waiting_limit`."""
        with self._cond:
            line = self._line(tokens)
            if not line and self._fits(tokens):
                self._take(tokens)
                return None
            if self.waiting and self.waiting + tokens > self.waiting_limit:
                raise Overloaded(f"rerank_engine is over its waiting bound ({self.waiting} tokens wait for vLLM, "
                                 f"this request has {tokens}, the bound is {self.waiting_limit}): retry later")
            self.waiting += tokens
            line.append(place := Place(tokens))
            return place

    async def wait_for_room(self, place: Place, check: Callable[[], None]) -> None:
        """Wait, on the engine's loop, until the request is first in its line and fits; `check` raises to give up
        (a dead engine, a passed deadline, a client gone), asked at every wake-up and every CANCEL_POLL_S. A request
        that gives up, or is cancelled, leaves its line."""
        line = self._line(place.tokens)
        try:
            while True:
                freed = self._freed  # taken before the look at the room: a release after it still wakes this wait
                if self._admitted(line, place):
                    break
                check()
                try:
                    await asyncio.wait_for(freed.wait(), CANCEL_POLL_S)
                except TimeoutError:
                    pass
        except BaseException:
            with self._cond:
                line.remove(place)
                self._leave(place)
            self._wake()
            raise
        self._wake()  # the next in line may fit too

    def _admitted(self, line: deque[Place], place: Place) -> bool:
        with self._cond:
            if line[0] is not place or not self._fits(place.tokens):
                return False
            line.popleft()
            self._leave(place)
            self._take(place.tokens)
            return True

    def _leave(self, place: Place) -> None:
        self.waiting -= place.tokens
        self._cond.notify_all()

    def _wake(self) -> None:
        self._freed.set()
        self._freed = asyncio.Event()

    def release(self, tokens: int) -> None:
        """On the engine's loop, when a request in flight is answered."""
        with self._cond:
            if tokens > self.limit:
                self.oversized -= 1
            else:
                self.used -= tokens
            self._cond.notify_all()
        self._wake()

    def wait_idle(self, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.used == 0 and self.oversized == 0 and self.waiting == 0,
                                       timeout=timeout_s)


def priority(tokens: int) -> int:
    """vLLM priority of a request's sequences (lower runs first): its tokens' order of magnitude (bit length), so a
    two-document request goes before the rest of a maximal one, and requests of similar size keep their order."""
    return tokens.bit_length()
