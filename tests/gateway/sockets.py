"""The gateway on uvicorn as `python -m gateway` configures it (its protocol, the head's bounds), in a thread, with a
stub in place of Triton, and raw-socket helpers: for the tests of what happens on the connection itself."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from gateway import Settings, create_app
from gateway.__main__ import server_options
from tests.gateway.stub import StubClient


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[uvicorn.Server]:
    """The server, started; its port is `server.port`, its open connections `server.server_state.connections`."""
    app = create_app(settings, client=StubClient())
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # as uvicorn binds: no Nagle
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, **{**server_options(app), "log_level": "warning"}))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    server.port = listener.getsockname()[1]
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(10)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def read_all(conn: socket.socket) -> bytes:
    """What the gateway sends until it closes the connection."""
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def one_answer(conn: socket.socket) -> int:
    """The status of the next answer on a kept-alive connection, read whole (its head and body may come apart)."""
    reader = conn.makefile("rb")
    status, length = int(reader.readline().split()[1]), 0
    while (line := reader.readline()) != b"\r\n":
        name, _, value = line.partition(b":")
        length = int(value) if name.lower() == b"content-length" else length
    reader.read(length)
    return status


def answer(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def closed_within(server: uvicorn.Server, seconds: float) -> bool:
    """Whether the server holds no connection within `seconds` (its side of a closed one goes a moment after)."""
    deadline = time.monotonic() + seconds
    while server.server_state.connections and time.monotonic() < deadline:
        time.sleep(0.05)
    return not server.server_state.connections
