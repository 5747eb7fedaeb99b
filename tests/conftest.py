"""One real tritonserver (default model repository, free ports) for the whole pytest session, shared by
tests/integration, tests/deploy, tests/client and tests/gateway: a server start costs ~30 s on the 2-core
machines, so one, not one per directory. It starts on first use only: a run of tests/unit alone never starts it.
Tests that need a server of their own (faults, hot swap, long-document windows) start it themselves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.triton_server import RunningServer, start_server, stop_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("triton") / "server.log")
    yield running
    stop_server(running)
