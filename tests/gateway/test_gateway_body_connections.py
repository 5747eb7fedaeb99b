"""A request's body on a real connection, on uvicorn as `python -m gateway` configures it (a stub in place of
Triton): bodies declared and not sent hold none of the gateway's body budget and are timed out, and a body framed
two ways is refused and its connection closed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import uvicorn

from gateway import Settings
from tests.gateway.sockets import answer, closed_within, connect, read_all, serving

BODY_TIMEOUT_S = 2.0
MAX_BODY_BYTES = Settings().max_body_bytes
BODY = json.dumps({"query": "q", "documents": ["a", "b"]}).encode()
POST = b"POST /v1/rerank HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[uvicorn.Server]:
    # a budget of two bodies at the size limit: two silent ones declared at it would have filled it
    with serving(Settings(body_timeout_s=BODY_TIMEOUT_S, max_inflight_body_bytes=2 * MAX_BODY_BYTES)) as running:
        yield running


@pytest.mark.parametrize("path", [b"/v1/rerank", b"/health/live"])
def test_a_body_framed_both_ways_is_400_and_its_connection_closed(server, path):
    """Content-Length and Transfer-Encoding: chunked together (RFC 9112, section 6.1): a proxy reading the other
    framing would see other requests on this connection (smuggling). It was answered as chunked and the connection
    kept; now 400, then the gateway closes it, a second request on it unread."""
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    head = POST.replace(b"/v1/rerank", path) + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(BODY)
    with connect(server.port) as conn:
        conn.sendall(head + chunked + POST + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
        received = read_all(conn)  # until the gateway closes the connection
    assert received.count(b"HTTP/1.1 ") == 1, received  # the second request is never read
    status, body = answer(received)
    message = "the request has both Content-Length and Transfer-Encoding: send one of them"
    assert (status, body["message"], body["error"]["type"]) == (400, message, "BadRequestError")
    assert closed_within(server, 1.0)


def test_bodies_declared_and_not_sent_hold_nothing_and_end_at_the_body_time_limit(server):
    """Two connections declare a body of GATEWAY_MAX_BODY_BYTES, by Content-Length and chunked, together the whole
    budget (GATEWAY_MAX_INFLIGHT_BODY_BYTES), and send nothing: a third caller is answered at once (it was 503 until
    their body timeout, room being reserved on what they declared), and the silent two are answered 408 at the
    body's time limit, their connections closed."""
    started = time.monotonic()
    silent = [connect(server.port), connect(server.port)]
    silent[0].sendall(POST + b"Content-Length: %d\r\n\r\n" % MAX_BODY_BYTES)
    silent[1].sendall(POST + b"Transfer-Encoding: chunked\r\n\r\n")
    time.sleep(0.2)  # both heads taken, both calls waiting for their body
    with connect(server.port) as conn:
        conn.sendall(POST + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
        status, answered = answer(read_all(conn))
    assert status == 200, answered["message"]
    assert [r["index"] for r in answered["results"]] == [1, 0]  # the stub ranks later documents first
    assert time.monotonic() - started < BODY_TIMEOUT_S / 2
    for conn in silent:
        with conn:
            status, refused = answer(read_all(conn))  # the answer, then the gateway closes the connection
        assert (status, refused["message"]) == (408, f"the body did not arrive within {BODY_TIMEOUT_S:g} s")
    assert BODY_TIMEOUT_S <= time.monotonic() - started < BODY_TIMEOUT_S + 1.0
    assert closed_within(server, 1.0)


def test_a_body_of_too_many_values_is_413_read_whole_before_the_answer(server):
    """12 MB of empty arrays: 8 million values, which weigh more than the whole budget once counted (they would take
    the gateway 800 MB parsed). Refused as they arrive, never parsed; the rest of the body is read and dropped before
    the answer, so that a client that sends it whole, `Connection: close` and all, reads the 413 (closing on unread
    bytes would have reset the connection)."""
    heavy = b'{"query": "q", "documents": [{"text": "a", "x": [' + b",".join([b"[]"] * 4_000_000) + b"]}]}"
    with connect(server.port) as conn:
        conn.sendall(POST + b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(heavy) + heavy)
        status, refused = answer(read_all(conn))
    assert status == 413, refused
    assert refused["message"].startswith("the body's JSON holds too many values: ")
    assert refused["message"].endswith(f"more than the {2 * MAX_BODY_BYTES} bytes of bodies the gateway holds at once")
