"""A real tritonserver (default model repository) for the client tests; shared with tests/gateway."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client.shared_server import shared_server
from tests.triton_server import RunningServer


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with shared_server(tmp_path_factory) as running:
        yield running


@pytest.fixture(params=("http", "grpc"))
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param
