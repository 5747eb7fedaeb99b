"""One real tritonserver shared by tests/client and tests/gateway in a pytest session.

Each directory's conftest has a session fixture `server`; pytest makes one per conftest, so both go through
this reference count: the first starts the server (tests.triton_server.start_server, free ports), the last to
finish stops it. A server start costs ~30 s on the 2-core machines: one, not two.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.triton_server import RunningServer, start_server, stop_server

_lock = threading.Lock()
_server: RunningServer | None = None
_users = 0


@contextmanager
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    global _server, _users
    with _lock:
        if _server is None:
            _server = start_server(tmp_path_factory.mktemp("triton-client") / "server.log")
        _users += 1
        server = _server
    try:
        yield server
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                stop_server(server)
                _server = None
