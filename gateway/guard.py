"""What every API call passes before the app sees it: one framing of its body, the API key, when one is set, a body
of bounded size that arrives in bounded time, and room for it among the bodies the gateway already holds. An ASGI middleware, so a caller
without the key, with a too-large or too-slow body or past the gateway's body budget costs no JSON parsing, and the
body is read once, here, and handed on whole."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .errors import ApiError, compatible_response
from .settings import Settings

log = logging.getLogger("gateway")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Probes, metrics and the spec: a kubelet, a load balancer or Prometheus has no key, and none of them holds a secret.
OPEN_PATHS = frozenset({"/health", "/health/live", "/metrics", "/openapi.json", "/docs", "/redoc"})


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


def _framed_twice(scope: Scope) -> bool:
    """Both Content-Length and Transfer-Encoding: a proxy in front that reads the other framing sees other requests
    on the connection than the gateway does (request smuggling). RFC 9112, section 6.1: refuse it or read it as
    chunked, and close the connection after the answer either way."""
    names = {name for name, _ in scope.get("headers", ())}
    return b"content-length" in names and b"transfer-encoding" in names


def _bearer(scope: Scope) -> bytes:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else b""
    return b""


async def _read_body(receive: Receive, limit: int, keep: bool = True) -> bytes:
    """The body, up to `limit` bytes; with `keep` False its chunks are read and dropped (a refused call's body is
    taken off the connection, so that its client gets the answer rather than a reset, without being held)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        if keep:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class BodyBudget:
    """Bytes of request bodies held at once, from the first byte read until the answer is sent. A body parsed into
    Python objects takes many times its size (docs/OPERATIONS.md, Gateway memory), so this bounds the gateway's
    memory across calls as max_body_bytes bounds one call's. One event loop: no lock."""

    def __init__(self, limit: int) -> None:
        self.limit, self.held = limit, 0

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


class Guard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.key = settings.api_key.encode() if settings.api_key else None
        self.max_body_bytes = settings.max_body_bytes
        self.body_timeout_s = settings.body_timeout_s
        self.bodies = BodyBudget(settings.max_inflight_body_bytes)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, error: ApiError, **headers: str) -> None:
        response = compatible_response(error)
        response.headers.update(headers)
        await response(scope, receive, send)

    def _declared_size(self, scope: Scope) -> int | None:
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit():
                return int(value)
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if _framed_twice(scope):  # on every path: the probes' connections are no less shared
            error = ApiError("invalid", "the request has both Content-Length and Transfer-Encoding: send one of them")
            return await self._refuse(scope, receive, send, error, Connection="close")
        if scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        # compare_digest: the time taken does not tell how much of a guessed key was right
        if self.key is not None and not hmac.compare_digest(_bearer(scope), self.key):
            error = ApiError("unauthorized", "a valid API key is required: send `Authorization: Bearer <key>`")
            return await self._refuse(scope, receive, send, error, **{"WWW-Authenticate": "Bearer"})
        too_large = ApiError("too_large", f"the body is larger than the limit of {self.max_body_bytes} bytes")
        declared = self._declared_size(scope)
        if declared is not None and declared > self.max_body_bytes:
            return await self._refuse(scope, receive, send, too_large)
        held = self.max_body_bytes if declared is None else declared  # a chunked body may take up to the limit
        if not self.bodies.take(held):
            error = ApiError("overloaded", f"the gateway holds {self.bodies.held} bytes of request bodies and this one "
                             f"has up to {held}, past its limit of {self.bodies.limit}: retry after 1 s")
            with contextlib.suppress(BodyTooLarge, ClientGone, TimeoutError):
                await asyncio.wait_for(_read_body(receive, self.max_body_bytes, keep=False), self.body_timeout_s)
            return await self._refuse(scope, receive, send, error, **{"Retry-After": "1"})
        try:
            await self._read_and_answer(scope, receive, send, too_large)
        finally:
            self.bodies.give(held)

    async def _read_and_answer(self, scope: Scope, receive: Receive, send: Send, too_large: ApiError) -> None:
        try:
            body = await asyncio.wait_for(_read_body(receive, self.max_body_bytes), self.body_timeout_s)
        except BodyTooLarge:
            return await self._refuse(scope, receive, send, too_large)
        except ClientGone:  # nobody to answer
            return None
        except TimeoutError:
            error = ApiError("body_timeout", f"the body did not arrive within {self.body_timeout_s:g} s")
            return await self._refuse(scope, receive, send, error)
        await _answer_unless_gone(self.app(scope, _replay(body, receive), send), receive)


async def _answer_unless_gone(answer: Awaitable[None], receive: Receive) -> None:
    """The app's answer, cancelled when its client disconnects first: its body goes, and the requests of a split call
    not yet sent are never sent. The one already in Triton runs on (Triton 2.51's ensemble does not pass a cancelled
    gRPC call to its steps; its timeout ends it: docs/OPERATIONS.md). Once the body is read, the connection's next
    message is its disconnect, whenever that comes."""
    task = asyncio.ensure_future(answer)
    gone = asyncio.ensure_future(receive())
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            log.info("client gone before its answer: cancelling the call")
    finally:
        gone.cancel()
        task.cancel()  # a no-op once it has answered
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read here, as one message, then the connection's own messages (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
