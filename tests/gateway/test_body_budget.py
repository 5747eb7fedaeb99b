"""The gateway's bound on the request bodies it holds at once (gateway.bodies), at the ASGI level: each body weighs its
bytes and its JSON values, counted as it arrives; calls past the budget are refused without their body reaching the
app (it is read off the connection and dropped), a body heavier than the whole budget is 413, and the room comes back
when an answer is sent, or when the client goes before it (the app's work cancelled)."""

from __future__ import annotations

import asyncio
import json

import pytest

from gateway.bodies import VALUE_BYTES, JsonValues
from gateway.guard import Guard
from gateway.settings import Settings
from tests.gateway.stub import until_cancelled

BODY = b'{"query": "q", "documents": ["' + b"x" * 900 + b'"]}'
WEIGHT = len(BODY) + 5 * VALUE_BYTES  # its values: `{`, `:`, `,`, `:`, `[`


class HeldApp:
    """The app behind the guard: reads the body and answers once `release` is set."""

    def __init__(self) -> None:
        self.release, self.seen = asyncio.Event(), []

    async def __call__(self, scope, receive, send) -> None:
        self.seen.append(len((await receive())["body"]))
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def call(guard: Guard, declared: bool = True, gone_after_s: float | None = None,
               body: bytes = BODY) -> tuple[int, dict[bytes, bytes]]:
    """One call; its client disconnects `gone_after_s` after its body (None: it waits for the answer, as a server's
    receive, which gives the disconnect only when it comes). The answer's body is in the headers, under None."""
    headers = [(b"content-length", str(len(body)).encode())] if declared else []
    scope = {"type": "http", "path": "/v1/rerank", "method": "POST", "headers": headers}
    messages = iter([{"type": "http.request", "body": body, "more_body": False}])
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
        else:
            started["headers"][None] = message.get("body", b"")

    await guard(scope, receive, send)
    return started.get("status"), started.get("headers")


def test_calls_past_the_body_budget_are_refused_at_once_and_its_room_comes_back():
    async def run():
        app = HeldApp()
        guard = Guard(app, Settings(max_body_bytes=1000, max_inflight_body_bytes=2 * WEIGHT + 10))
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


@pytest.mark.parametrize("chunk_bytes", [1, 2, 5, 64])
def test_json_values_are_counted_as_the_body_arrives_whatever_its_strings_hold(chunk_bytes):
    """One per comma, colon and opening bracket outside strings; a string's quotes, escapes and brackets count
    nothing, however the chunks cut them."""
    bodies = {b"[]": 1, b"[[],[]]": 4, b'{"a":"b"}': 2, b'{"a": [1, 2.5, null, true]}': 6,
              b'["x,\\"y", "\\\\", "\\\\\\"[{", {"k:": "\\u005c"}]': 6, b'"[{,:"': 0}
    for body, values in bodies.items():
        counter = JsonValues()
        assert sum(counter.count(body[i:i + chunk_bytes]) for i in range(0, len(body), chunk_bytes)) == values, body


def test_a_body_heavier_than_the_whole_budget_is_413_where_as_many_bytes_of_text_are_taken():
    """900 bytes of empty arrays are 300 values and weigh more than the budget; 900 bytes of text weigh 900."""
    heavy = b'{"query": "q", "documents": [' + b",".join([b"[]"] * 290) + b"]}"
    budget = 1000 + 100 * VALUE_BYTES  # at least the body limit, as the settings want it

    async def run():
        guard = Guard(HeldApp(), Settings(max_body_bytes=1000, max_inflight_body_bytes=budget))
        guard.app.release.set()
        return await call(guard, body=heavy), await call(guard), guard.bodies.held

    (status, headers), (answered, _), left = asyncio.run(run())
    values = 2 * 290 + 4
    message = (f"the body's JSON holds too many values: {values} in its first {len(heavy)} bytes, which with them "
               f"weigh {len(heavy) + values * VALUE_BYTES} (a value weighs {VALUE_BYTES} bytes: what it takes once "
               f"parsed), more than the {budget} bytes of bodies the gateway holds at once")
    assert (status, json.loads(headers[None])["message"]) == (413, message)
    assert (answered, left) == (200, 0)


def test_the_default_budget_holds_two_bodies_at_the_size_limit_of_the_most_document_objects():
    """GATEWAY_MAX_DOCUMENTS objects of three fields, filling GATEWAY_MAX_BODY_BYTES: two of them weigh no more than
    the default GATEWAY_MAX_INFLIGHT_BODY_BYTES, so two such calls are held at once, as before values were weighed."""
    settings = Settings()
    shell, document = '{"query":"q%s","documents":[%s]}', '{"text":"%s","title":"t","url":"u"}'
    room = (settings.max_body_bytes - len(shell % ("", ""))) // settings.max_documents - len(document % "") - 1
    documents = ",".join([document % ("x" * room)] * settings.max_documents)
    body = (shell % ("q" * (settings.max_body_bytes - len(shell % ("", documents))), documents)).encode()
    values = JsonValues().count(body)
    assert (len(body), values) == (settings.max_body_bytes, 5 + 7 * settings.max_documents - 1)
    assert 2 * (len(body) + VALUE_BYTES * values) <= settings.max_inflight_body_bytes
