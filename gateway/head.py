"""The request head (request line and headers) bounded in size and in time, below the app: a head longer than
GATEWAY_MAX_HEADER_BYTES is answered 431, one not whole GATEWAY_HEADER_TIMEOUT_S after its connection opened or its
last answer was sent is answered 408 (a connection that sent nothing is closed without an answer, as uvicorn's own
keep-alive timeout closes an idle one); either way the connection is closed. uvicorn bounds neither: its keep-alive
timer stops at a request's first byte, and its httptools parser takes a head of any size (10 MB was accepted).

The protocol is uvicorn's h11 one, whatever else is installed, so that the gateway parses the same way wherever it
runs (its image has no httptools): its parser state says when a head is awaited. A body is not this module's: the
Guard bounds it in size and time.

Why a subclass of uvicorn's protocol and not something simpler: an ASGI middleware sees a request only once its head
has been read whole, however large or slow, and h11's own bound answers a bare 400 with no count; the other way is a
reverse proxy in front, which a gateway started by itself would not have.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .errors import ApiError, ApiErrorKind, compatible_response
from .settings import Settings

log = logging.getLogger("gateway")

HEAD_END = b"\r\n\r\n"
# asyncio's transport hands on at most this much per read (selector_events: recv(256 KiB)); h11's own bound on an
# incomplete head is set this far past ours, so that our check, made before each read is parsed, always comes first
READ_SIZE = 256 * 1024


class BoundedHead(H11Protocol):
    """uvicorn's h11 protocol with the head bounded. `refused(status)` is called for each head answered here."""

    def __init__(self, *args: Any, max_bytes: int, timeout_s: float, refused: Callable[[int], None],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_bytes, self.timeout_s, self.refused = max_bytes, timeout_s, refused
        self.head_timer: asyncio.TimerHandle | None = None
        self.head_bytes, self.head_tail = 0, b""
        self.lingering = False  # answered before the body was whole: what comes is dropped

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._follow_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_done()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return
        if self.head_timer is not None and self._head_grows_past_limit(data):
            return self._refuse(self._too_large())
        super().data_received(data)
        self._follow_head()

    def on_response_complete(self) -> None:
        # A pipelined request's head came in the reads of the one before it, uncounted: h11 holds it and parses it
        # as the next cycle starts (in super()), so it is counted here first, as its reads would have been
        waiting = self.conn.their_state is h11.DONE and not self.transport.is_closing()
        pipelined = self.conn.trailing_data[0] if waiting else b""
        if pipelined and self._head_grows_past_limit(pipelined, fresh=True):
            return self._refuse(self._too_large())
        super().on_response_complete()
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self.lingering = True
            self._unset_keepalive_if_required()  # one clock bounds what is left: the head's, below
            self.transport.write_eof()
        self._follow_head(counted=pipelined)

    def _follow_head(self, counted: bytes = b"") -> None:
        """A head is awaited while h11 waits for the client's next request (IDLE), or would be after an early
        answer: its clock runs from the first moment the connection is in that state, and stops once the head is
        whole. `counted`: what of it has arrived already (pipelined behind the last request)."""
        awaited = (self.conn.their_state is h11.IDLE or self.lingering) and not self.transport.is_closing()
        if awaited and self.head_timer is None:
            self.head_bytes, self.head_tail = 0, b""
            self._head_grows_past_limit(counted)
            self.head_timer = self.loop.call_later(self.timeout_s, self._head_late)
        elif not awaited:
            self._head_done()

    def _head_done(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_grows_past_limit(self, data: bytes, fresh: bool = False) -> bool:
        """Counts the head's bytes in `data` (up to its blank line, which may straddle two reads); `fresh`: `data`
        starts a head."""
        if fresh:
            self.head_bytes, self.head_tail = 0, b""
        seen = self.head_tail + data
        end = seen.find(HEAD_END)
        self.head_bytes += len(data) if end < 0 else end + len(HEAD_END) - len(self.head_tail)
        self.head_tail = seen[-(len(HEAD_END) - 1):]
        return self.head_bytes > self.max_bytes

    def _head_late(self) -> None:
        self.head_timer = None
        if self.head_bytes == 0:  # nothing sent: an idle connection, closed without an answer
            self.transport.close()
            return
        self._refuse(ApiError(ApiErrorKind.HEADER_TIMEOUT,
                              f"the request line and headers did not arrive within {self.timeout_s:g} s"))

    def _too_large(self) -> ApiError:
        return ApiError(ApiErrorKind.HEADER_TOO_LARGE,
                        f"the request line and headers are longer than the limit of {self.max_bytes} bytes")

    def _refuse(self, error: ApiError) -> None:
        """The answer written as it is, past h11 (which answers only a request it has read), and the connection
        closed: what else the client sends is not read."""
        self._head_done()
        response = compatible_response(error)
        log.warning("refused a request head from %s: %s", self.client, error.message)
        self.refused(response.status_code)
        status = HTTPStatus(response.status_code)
        head = [f"HTTP/1.1 {status.value} {status.phrase}".encode()]
        head += [name + b": " + value for name, value in response.raw_headers]
        head.append(b"connection: close")
        self.transport.write(b"\r\n".join(head) + HEAD_END + response.body)
        self.transport.close()


def protocol(settings: Settings, refused: Callable[[int], None]) -> Callable[..., BoundedHead]:
    """uvicorn's `http` argument: the protocol bounded by `settings`."""
    return functools.partial(BoundedHead, max_bytes=settings.max_header_bytes, timeout_s=settings.header_timeout_s,
                             refused=refused)


def h11_event_limit(settings: Settings) -> int:
    """uvicorn's `h11_max_incomplete_event_size`: past our bound by one read, so h11's own refusal (a bare 400)
    never comes before ours."""
    return settings.max_header_bytes + READ_SIZE
