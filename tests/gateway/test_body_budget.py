"""The gateway's bound on the request bodies it holds at once (gateway.bodies.BodyBudget), at the ASGI level: calls
past it are refused without their body reaching the app (it is read off the connection and dropped), and the room
comes back when an answer is sent, or when the client goes before it (the app's work cancelled)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.guard import Guard
from gateway.settings import Settings
from tests.gateway.stub import until_cancelled

BODY = b'{"query": "q", "documents": ["' + b"x" * 900 + b'"]}'


class HeldApp:
    """The app behind the guard: reads the body and answers once `release` is set."""

    def __init__(self) -> None:
        self.release, self.seen = asyncio.Event(), []

    async def __call__(self, scope, receive, send) -> None:
        self.seen.append(len((await receive())["body"]))
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def call(guard: Guard, declared: bool = True, gone_after_s: float | None = None) -> tuple[int, dict[bytes, bytes]]:
    """One call; its client disconnects `gone_after_s` after its body (None: it waits for the answer, as a server's
    receive, which gives the disconnect only when it comes)."""
    headers = [(b"content-length", str(len(BODY)).encode())] if declared else []
    scope = {"type": "http", "path": "/v1/rerank", "method": "POST", "headers": headers}
    messages = iter([{"type": "http.request", "body": BODY, "more_body": False}])
    started: dict = {}

    async def receive():
        if (message := next(messages, None)) is not None:
            return message
        if gone_after_s is None:
            await asyncio.Event().wait()
        await asyncio.sleep(gone_after_s)
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            started.update(status=message["status"], headers=dict(message["headers"]))

    await guard(scope, receive, send)
    return started.get("status"), started.get("headers")


def test_calls_past_the_body_budget_are_refused_at_once_and_its_room_comes_back():
    async def run():
        app = HeldApp()
        guard = Guard(app, Settings(max_body_bytes=1000, max_inflight_body_bytes=2 * len(BODY) + 10))
        held = [asyncio.create_task(call(guard)) for _ in range(2)]
        await asyncio.sleep(0.05)
        refused = await asyncio.gather(call(guard), call(guard))
        chunked = await call(guard, declared=False)  # no length: refused on its bytes as they come, as the others
        app.release.set()
        answered = await asyncio.gather(*held)
        after = await call(guard)
        return app, refused, chunked, answered, after, guard.bodies.held

    app, refused, chunked, answered, after, left = asyncio.run(run())
    assert [status for status, _ in refused] == [503, 503] and chunked[0] == 503
    assert refused[0][1][b"retry-after"] == b"1"
    assert [status for status, _ in answered] == [200, 200] and after[0] == 200
    assert app.seen == [len(BODY)] * 3  # the refused bodies never reached the app
    assert left == 0


def test_a_budget_smaller_than_one_body_at_the_limit_is_refused_at_start():
    with pytest.raises(ValueError, match="^GATEWAY_MAX_INFLIGHT_BODY_BYTES=1000 is less than GATEWAY_MAX_BODY_BYTES=2000"):
        Settings(max_body_bytes=2000, max_inflight_body_bytes=1000)


def test_a_client_gone_before_its_answer_cancels_the_work_and_gives_its_room_back():
    """What the app waits on (the Triton requests of the call) is cancelled when the client disconnects."""
    cancelled = []

    class NeverAnswers:
        async def __call__(self, scope, receive, send) -> None:
            await receive()
            await until_cancelled(cancelled)

    async def run():
        guard = Guard(NeverAnswers(), Settings(max_body_bytes=1000, max_inflight_body_bytes=2000))
        status, _ = await asyncio.wait_for(call(guard, gone_after_s=0.05), 5)
        return status, guard.bodies.held

    assert asyncio.run(run()) == (None, 0)  # nobody to answer, the room given back
    assert cancelled == [True]
