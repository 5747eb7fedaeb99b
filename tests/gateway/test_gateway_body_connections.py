"""A request's body on a real connection, on uvicorn as `python -m gateway` configures it (a stub in place of
Triton): a body framed two ways is refused and its connection closed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import uvicorn

from gateway import Settings
from tests.gateway.sockets import answer, closed_within, connect, read_all, serving

BODY = json.dumps({"query": "q", "documents": ["a", "b"]}).encode()
POST = b"POST /v1/rerank HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def server() -> Iterator[uvicorn.Server]:
    with serving(Settings()) as running:
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
