"""Which errors are worth another try, how long to wait before it, and the retry loops (sync and asyncio)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from tritonclient.utils import InferenceServerException

from .server_errors import read_error

try:  # the HTTP clients' transport errors; aiohttp comes with tritonclient[http]
    import aiohttp

    _TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, aiohttp.ClientConnectionError)
except ImportError:  # pragma: no cover
    _TRANSPORT_ERRORS = (ConnectionError,)

T = TypeVar("T")


def is_retryable(error: BaseException) -> bool:
    """A server's error whose kind may be answered if sent again (python_backends.contract.ErrorKind.retryable: too
    busy, not ready, its engine dead), or a connection that could not be made or was dropped. Never an invalid
    request (the same request gets the same answer) nor one whose own deadline passed on the server."""
    if isinstance(error, InferenceServerException):
        return read_error(error).kind.retryable
    return isinstance(error, _TRANSPORT_ERRORS)


@dataclass(frozen=True)
class RetryPolicy:
    """At most `max_retries` further attempts after the first; before retry k (0-based) wait
    min(max_backoff_s, backoff_s * 2**k) scaled by a random factor in [1 - jitter, 1]."""

    max_retries: int = 3
    backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0 or self.max_backoff_s < 0 or not 0 <= self.jitter <= 1:
            raise ValueError("backoff_s and max_backoff_s must be >= 0 and jitter in 0..1")

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        rng = rng or random.Random()
        for attempt in range(self.max_retries):
            delay = min(self.max_backoff_s, self.backoff_s * 2**attempt)
            yield delay * (1 - self.jitter * rng.random())

    def next_delay(self, delays: Iterator[float], error: BaseException) -> float | None:
        """The wait before the next attempt after `error`, or None when the error is to be raised."""
        if not is_retryable(error):
            return None
        return next(delays, None)


def call_with_retry(call: Callable[[], T], policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep) -> T:
    delays = policy.delays()
    while True:
        try:
            return call()
        except Exception as error:
            delay = policy.next_delay(delays, error)
            if delay is None:
                raise
        sleep(delay)


async def call_with_retry_async(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    delays = policy.delays()
    while True:
        try:
            return await call()
        except Exception as error:
            delay = policy.next_delay(delays, error)
            if delay is None:
                raise
        await sleep(delay)
