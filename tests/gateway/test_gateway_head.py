"""The request head is bounded below the app, on uvicorn as `python -m gateway` configures it (a stub in place of
Triton): a head past GATEWAY_MAX_HEADER_BYTES is 431, one not whole within GATEWAY_HEADER_TIMEOUT_S is 408, an idle
connection is closed; a head within both, a keep-alive connection's next request and a call slower than the head's
bound are answered as before. Each refusal is counted under the path `head`."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from gateway import Settings
from tests.gateway.sockets import answer, closed_within, connect, one_answer, read_all, serving

MAX_BYTES, TIMEOUT_S, MAX_BODY_BYTES = 4096, 1.0, 1000
LIVE = b"GET /health/live HTTP/1.1\r\nHost: gateway\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[uvicorn.Server]:
    with serving(Settings(max_header_bytes=MAX_BYTES, header_timeout_s=TIMEOUT_S,
                          max_body_bytes=MAX_BODY_BYTES)) as running:
        yield running


@pytest.fixture(scope="module")
def port(server: uvicorn.Server) -> int:
    return server.port


def padded_head(size: int) -> bytes:
    """A GET of /health/live whose request line and headers, blank line included, are `size` bytes."""
    start, end = LIVE + b"X-Pad: ", b"\r\n\r\n"
    return start + b"p" * (size - len(start) - len(end)) + end


def head_calls(port: int) -> dict[str, float]:
    with connect(port) as conn:
        conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n")
        text = read_all(conn).partition(b"\r\n\r\n")[2].decode()
    return {s.labels["status"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "gateway_calls_total" and s.labels["path"] == "head"}


def test_a_head_at_the_limit_is_answered_one_byte_more_is_431(port):
    before = head_calls(port)
    with connect(port) as conn:
        conn.sendall(padded_head(MAX_BYTES))
        assert one_answer(conn) == 200
    with connect(port) as conn:
        conn.sendall(padded_head(MAX_BYTES + 1))
        status, body = answer(read_all(conn))
    message = f"the request line and headers are longer than the limit of {MAX_BYTES} bytes"
    assert (status, body["message"], body["error"]["type"]) == (431, message, "RequestHeaderFieldsTooLargeError")
    assert head_calls(port).get("431", 0) == before.get("431", 0) + 1


def test_a_ten_megabyte_header_is_refused_without_being_read(port):
    before = head_calls(port)
    with connect(port) as conn:
        try:  # the gateway closes after the first read past the limit: the rest of the send may meet a reset
            conn.sendall(LIVE + b"X-Pad: " + b"p" * 10_000_000 + b"\r\n\r\n")
            received = read_all(conn)
        except (BrokenPipeError, ConnectionResetError):
            received = b""
    assert received == b"" or received.startswith(b"HTTP/1.1 431 ")
    assert head_calls(port).get("431", 0) == before.get("431", 0) + 1


@pytest.mark.parametrize("size, statuses", [(MAX_BYTES, [200, 200]), (MAX_BYTES + 1, [200, 431])])
def test_a_head_pipelined_behind_a_request_is_bounded_like_the_first(port, size, statuses):
    """Two requests in one send: the second head arrives in the first one's read, and is held to the same limit."""
    before = head_calls(port)
    second = padded_head(size).replace(b"X-Pad: ", b"Connection: close\r\nX-Pad: " , 1)[:-len(b"\r\n\r\n")]
    second = second[:size - len(b"\r\n\r\n")] + b"\r\n\r\n"  # the added header's bytes taken from the padding
    with connect(port) as conn:
        conn.sendall(LIVE + b"\r\n" + second)
        raw = read_all(conn)
    assert len(second) == size
    assert [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", raw)] == statuses  # answers follow bodies
    assert head_calls(port).get("431", 0) == before.get("431", 0) + (431 in statuses)


def test_a_head_not_whole_in_time_is_408_even_while_bytes_trickle_in(port):
    started = time.monotonic()  # before connecting: the gateway's clock starts when it accepts, which may come first
    with connect(port) as conn:
        conn.sendall(LIVE)
        for _ in range(3):  # a byte every 0.4 s: each read would stop uvicorn's own keep-alive timer
            time.sleep(0.4)
            try:
                conn.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                break
        status, body = answer(read_all(conn))
        waited = time.monotonic() - started
    assert (status, body["message"]) == (408, f"the request line and headers did not arrive within {TIMEOUT_S:g} s")
    assert TIMEOUT_S <= waited < TIMEOUT_S + 1.0


def test_an_idle_connection_is_closed_without_an_answer(port):
    started = time.monotonic()  # before connecting, as above
    with connect(port) as conn:
        assert read_all(conn) == b""
        assert TIMEOUT_S <= time.monotonic() - started < TIMEOUT_S + 1.0


def test_the_bound_restarts_per_request_and_spares_a_call_slower_than_it(port):
    """A keep-alive connection's second request, sent 0.6 s after the first answer, is answered; so is a call whose
    body takes 2 s (the Guard's body timeout bounds that, not the head's)."""
    with connect(port) as conn:
        for _ in range(2):
            conn.sendall(LIVE + b"\r\n")
            assert one_answer(conn) == 200
            time.sleep(0.6)
        body = json.dumps({"query": "q", "documents": ["a", "b"]}).encode()
        conn.sendall(b"POST /v2/rerank HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
        for half in (body[:10], body[10:]):
            time.sleep(1.0)
            conn.sendall(half)
        status, answered = answer(read_all(conn))
    assert (status, [r["index"] for r in answered["results"]]) == (200, [1, 0])  # the stub ranks later documents first


def test_an_answer_before_the_body_is_whole_ends_the_connection_whatever_comes_after(server):
    """A body declared past the limit is answered 413 at once, and the gateway's side of the connection is closed
    after that answer: one more byte from the client (any byte of the body stopped uvicorn's keep-alive timer, and
    h11 waited for the rest of the body before a next request) does not keep it open; what the client sends is
    dropped, and the connection is gone once a next head's time is up."""
    started = time.monotonic()
    with connect(server.port) as conn:
        conn.sendall(b"POST /v2/rerank HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1))
        time.sleep(0.2)
        conn.sendall(b"{")
        status, body = answer(read_all(conn))  # the answer, then the gateway's end of the connection
        ended = time.monotonic() - started
        assert (status, body["message"]) == (413, f"the body is larger than the limit of {MAX_BODY_BYTES} bytes")
        assert ended < TIMEOUT_S
        conn.sendall(b"x" * 100)  # dropped
        assert closed_within(server, TIMEOUT_S + 1.0 - (time.monotonic() - started))
