"""One real tritonserver with the default model repository for the whole integration session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.triton_server import RunningServer, start_server, stop_server

PROTOCOLS = ("http", "grpc")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("triton") / "server.log")
    yield running
    stop_server(running)


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param
