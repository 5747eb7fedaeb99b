"""Every call the gateway answers, by path and status, in one counter: its own refusals (431 and 408 on the request
head, 401, 408, 413 and the body budget's 503 before a body is parsed, 400/404/422 after), the errors of Triton's it
passes on and its answers.
A request Triton itself refuses for its type or shape is counted by no series of Triton 2.51's, so for the
gateway's callers this is where every refusal is seen, whoever made it."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

OTHER_PATH = "other"  # a path the gateway does not serve: one label, whatever callers send
HEAD_PATH = "head"  # refused on its request line and headers (gateway.head), before its path was taken


def calls_counter(registry: CollectorRegistry) -> Counter:
    return Counter("gateway_calls", "API calls answered, by path and HTTP status", ["path", "status"],
                   registry=registry)


class CallCounter:
    """Pure ASGI middleware, added last so that it sees every answer, the other middleware's refusals included."""

    def __init__(self, app: ASGIApp, calls: Counter, paths: Iterable[str]) -> None:
        """`calls`: a `calls_counter`; `paths`: the app's routes, each its own label value."""
        self.app = app
        self.paths = frozenset(paths)
        self.calls = calls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the server answers when the app raises before it starts a response

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            path = scope["path"] if scope["path"] in self.paths else OTHER_PATH
            self.calls.labels(path=path, status=str(status)).inc()
