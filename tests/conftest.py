"""One real tritonserver (default model repository, free ports) for the whole pytest session, shared by
tests/integration, tests/deploy, tests/client and tests/gateway: a server start costs ~30 s on the 2-core
machines, so one, not one per directory. It starts on first use only: a run of tests/unit alone never starts it.
Tests that need a server of their own (faults, lifecycle, long-document windows) start it themselves.

scripts/test.sh runs the tests on two pytest-xdist workers (`--dist loadgroup`, groups set below)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _pytest.nodeid import NodeId  # pytest 9's node id (see pytest_collection_modifyitems)

from tests.support.triton_server import RunningServer, start_server, stop_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("triton") / "server.log")
    yield running
    stop_server(running)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist's `--dist loadgroup`: every test of the session server on one worker (one server
    start, not one per worker); every other module on one worker as a whole, because a module-scoped server or
    engine is started once and its tests run in order (test_lifecycle.py's last test ends its server)."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist's workers under --dist loadgroup
        return
    for item in items:
        group = "session-server" if "server" in item.fixturenames else item.nodeid.split("::", 1)[0]
        # What xdist 3.8 does for xdist_group marks (`item._nodeid = f"{nodeid}@{group}"`) has no effect on
        # pytest 9, whose node id is `item._id`: set the suffix the scheduler splits on there. Built from the
        # item's name, because schemathesis gives its 5 generated items one shared node id on pytest 9, and xdist
        # would run 1 of them.
        item._id = NodeId.parse(f"{item.parent.nodeid}::{item.name}@{group}")
