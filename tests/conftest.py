"""The `server` fixture: a real tritonserver on the default model repository, used by tests/integration,
tests/deploy, tests/client and tests/gateway. scripts/test.sh starts one for the whole run, shared by both workers
(tests/support/shared_server.py); a pytest run of its own (a selection) starts one per test process on first use,
so a run of tests/unit alone starts none. Tests that need a server of another configuration (faults, lifecycle,
long-document windows, the engine's small budget, two models) start it in a module fixture; tests that count exact
metric deltas or bound latency or memory on the shared server run in the `alone` pass, where nothing else sends to
it. Server starts and in-process engine loads take turns (tests/support/loading.py).

scripts/test.sh runs the tests on two pytest-xdist workers with `--dist loadfile`: each file's tests run in order
on one worker, so a module's own server or engine is started once and its tests run in the order written
(test_lifecycle.py's last test ends its server).

Every run ends by checking that it left no shared-memory files behind (tests/support/shared_memory.py)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.alone_gate import pytest_collection, pytest_runtestloop, pytest_sessionfinish  # noqa: F401 - hooks
from tests.support.shared_memory import LEDGER
from tests.support.shared_server import SHARED_SERVER_ENV, attach
from tests.support.triton_server import RunningServer, start_test_server, stop_server


# The order files go out in. scripts/test.sh hands files to its two workers in collection order
# (`--no-loadscope-reorder`), and server starts and engine loads take turns (tests/support/loading.py): the longest
# file, which starts a server of its own, goes first; the unit tests next, so that the other worker computes while the
# shared server and that one load instead of waiting for its turn to load; then the other files of 10 s or more,
# longest first (engines and servers of their own, then the longest on the shared server); then the rest, whose many
# short files fill the gaps at the end (a long file among them, handed out last, kept one worker busy alone).
FIRST = "tests/gateway/test_two_models.py"
WHILE_SERVERS_LOAD = "tests/unit/"
LONGEST = (
    "tests/engine/test_vllm_engine.py",
    "tests/integration/test_lifecycle.py",
    "tests/integration/test_server_kill.py",
    "tests/deploy/test_image.py",
    "tests/deploy/test_quickstart.py",
    "tests/gateway/test_gateway_resilience.py",
    "tests/deploy/test_loadtest_files.py",
    "tests/gateway/test_sdk_clients.py",
    "tests/client/test_client.py",
    "tests/integration/test_reranker.py",
)


def _turn(item: pytest.Item) -> int:
    path = item.nodeid.split("::")[0]
    if path == FIRST:
        return 0
    if path.startswith(WHILE_SERVERS_LOAD):
        return 1
    return 2 + (LONGEST.index(path) if path in LONGEST else len(LONGEST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_turn)  # stable: file order kept otherwise


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The run's shared server when scripts/test.sh started one (tests/support/shared_server.py), else a server of
    this test process's own; either serves the default model repository and the window-mode ensemble beside it."""
    shared = os.environ.get(SHARED_SERVER_ENV)
    if shared:
        yield attach(Path(shared))
        return
    running = start_test_server(tmp_path_factory.mktemp("triton") / "server.log")
    yield running
    stop_server(running)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A test that failed while a server it used had ended says how that server ended and what its log says."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            running = value[0] if isinstance(value, tuple) and value and isinstance(value[0], RunningServer) else value
            if isinstance(running, RunningServer) and not running.is_alive():
                report.sections.append((f"tritonserver of fixture '{name}'", running.ending()))


@pytest.fixture(scope="session", autouse=True)
def no_shared_memory_left_behind() -> Iterator[None]:
    """Fails the run (an error at the last test's teardown) when a process of the test process's own group (an
    in-process engine, a command a test ran) left a Triton region, a vLLM segment or a semaphore in /dev/shm that
    nobody holds any more. Process groups the tests started apart and ended (servers, the quickstart's server) get
    what `stop_server` gives a server's group: what they left is removed, since a process ended by a signal cannot
    unlink its files. The files are removed either way."""
    LEDGER.start()
    yield
    LEDGER.stop()
    own = os.getpgid(0)
    for group in LEDGER.groups() - {own}:
        LEDGER.remove_left_behind(group, settle_s=0)
    left = LEDGER.remove_left_behind()
    # vLLM kills an engine-core process that does not exit within its shutdown grace, and a killed core cannot unlink
    # its segments; AsyncEngine.close gives it SHUTDOWN_GRACE_S, but a loaded 2-core host has still been seen to
    # leave one. Those are reported, not failed; a Triton region or a semaphore left behind still fails the run.
    vllm_cores = [entry for entry in left if "VLLM::EngineCore" in entry]
    if vllm_cores:
        warnings.warn(f"vLLM engine cores left shared-memory segments (removed now): {vllm_cores}", stacklevel=1)
    left = [entry for entry in left if entry not in vllm_cores]
    assert not left, f"the run's processes left {len(left)} shared-memory files in /dev/shm (removed now): {left}"
