"""What every API call passes before the app sees it: one framing of its body, the API key, when one is set, a body
of bounded size that arrives in bounded time, and room for it, as it arrives, among the bodies the gateway already
holds (gateway.bodies). An ASGI middleware, so a caller without the key, with a too-large or too-slow body or past
the gateway's body budget costs no JSON parsing, and the body is read once, here, and handed on whole."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .bodies import VALUE_BYTES, BodyBudget, BodyTooLarge, HeldBody, OverBudget, TooHeavy
from .errors import RETRY_AFTER_S, ApiError, ApiErrorKind, compatible_response
from .settings import Settings

log = logging.getLogger("gateway")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Probes, metrics and the spec: a kubelet, a load balancer or Prometheus has no key, and none of them holds a secret.
OPEN_PATHS = frozenset({"/health", "/health/live", "/metrics", "/openapi.json", "/docs", "/redoc"})


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


async def _receive_body(receive: Receive, body: HeldBody, keep: bool = True) -> None:
    """The body's chunks into `body` until the last; with `keep` False they are read and dropped (a refused call's
    body is taken off the connection, so that its client gets the answer rather than a reset, without being held)."""
    while not body.complete:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        body.add(message.get("body", b""), last=not message.get("more_body", False), keep=keep)


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
            error = ApiError(ApiErrorKind.INVALID,
                             "the request has both Content-Length and Transfer-Encoding: send one of them")
            return await self._refuse(scope, receive, send, error, Connection="close")
        if scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        # compare_digest: the time taken does not tell how much of a guessed key was right
        if self.key is not None and not hmac.compare_digest(_bearer(scope), self.key):
            error = ApiError(ApiErrorKind.UNAUTHORIZED,
                             "a valid API key is required: send `Authorization: Bearer <key>`")
            return await self._refuse(scope, receive, send, error, **{"WWW-Authenticate": "Bearer"})
        declared = self._declared_size(scope)
        if declared is not None and declared > self.max_body_bytes:
            return await self._refuse(scope, receive, send, self._too_large())
        body = HeldBody(self.bodies, self.max_body_bytes)
        try:
            if await self._read(scope, receive, send, body):
                await _answer_unless_gone(self.app(scope, _replay(body.whole(), receive), send), receive)
        finally:
            body.release()

    def _too_large(self) -> ApiError:
        return ApiError(ApiErrorKind.TOO_LARGE, f"the body is larger than the limit of {self.max_body_bytes} bytes")

    async def _read(self, scope: Scope, receive: Receive, send: Send, body: HeldBody) -> bool:
        """Whether the body arrived whole within the body's time, the budget taking it as it came; if not, the call
        is answered here (nobody, when its client is gone). A client that declares a body and sends it slowly, or not
        at all, is answered 408 at that time, however much it sent, and holds no more than it sent until then."""
        deadline = asyncio.get_running_loop().time() + self.body_timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                await _receive_body(receive, body)
            return True
        except (OverBudget, TooHeavy) as refused:
            body.release()
            error = self._too_heavy(refused) if isinstance(refused, TooHeavy) else self._over_budget()
            # within the size limit: the rest is taken off the connection and dropped, so that the client reads the
            # answer, not a reset (a server closes a connection that has unread bytes with one)
            with contextlib.suppress(BodyTooLarge, ClientGone, TimeoutError):
                async with asyncio.timeout_at(deadline):
                    await _receive_body(receive, body, keep=False)
            await self._refuse(scope, receive, send, error)
        except BodyTooLarge:
            await self._refuse(scope, receive, send, self._too_large())
        except ClientGone:  # nobody to answer
            pass
        except TimeoutError:
            error = ApiError(ApiErrorKind.BODY_TIMEOUT, f"the body did not arrive within {self.body_timeout_s:g} s")
            await self._refuse(scope, receive, send, error)
        return False

    def _over_budget(self) -> ApiError:
        return ApiError(ApiErrorKind.OVERLOADED,
                        f"the gateway holds {self.bodies.held} bytes of request bodies, and this one "
                        f"would take it past its limit of {self.bodies.limit}: retry after {RETRY_AFTER_S} s")

    def _too_heavy(self, heavy: TooHeavy) -> ApiError:
        return ApiError(ApiErrorKind.TOO_LARGE,
                        f"the body's JSON holds too many values: {heavy.values} in its first {heavy.size} "
                        f"bytes, which with them weigh {heavy.weight} (a value weighs {VALUE_BYTES} bytes: what it "
                        f"takes once parsed), more than the {self.bodies.limit} bytes of bodies the gateway holds at once")


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
