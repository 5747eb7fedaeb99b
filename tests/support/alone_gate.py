"""The gate between scripts/test.sh's two passes. The `alone` pass starts beside the parallel pass, so that its start
and collection (every test module imported: ~20 s of one core) run on the core the parallel pass leaves idle at its
end, when one worker has run out of files; none of its tests runs before the parallel pass has ended.

test.sh makes a FIFO, holds it open read-write (so that neither side's open waits) and names it in
OPEN_GATE_ENV to the parallel pass and in WAIT_GATE_ENV to the alone pass. Each line written to it is a stage:
`collect` comes from the first parallel worker that runs out of work (or from test.sh when the pass ends), `run`
from test.sh once the parallel pass has ended. At the end of the FIFO without `run` (test.sh died, closing it), the
alone pass stops without running a test.
"""

from __future__ import annotations

import os

import pytest

OPEN_GATE_ENV = "RERANKER_TEST_OPEN_GATE"
WAIT_GATE_ENV = "RERANKER_TEST_WAIT_GATE"
STAGES = ("collect", "run")


class Gate:
    def __init__(self, path: str) -> None:
        self._reader = open(path, encoding="ascii")  # test.sh holds the FIFO open for writing: this does not wait
        self._reached = -1

    def wait_for(self, stage: str) -> None:
        wanted = STAGES.index(stage)
        while self._reached < wanted:
            line = self._reader.readline()
            if not line:
                pytest.exit(f"scripts/test.sh closed the gate before `{stage}`: the parallel pass did not end", 2)
            if line.strip() in STAGES:
                self._reached = max(self._reached, STAGES.index(line.strip()))


def open_for(stage: str) -> None:
    """Writes `stage` to the gate of OPEN_GATE_ENV, when there is one."""
    path = os.environ.get(OPEN_GATE_ENV)
    if path:
        with open(path, "w", encoding="ascii") as writer:  # the FIFO has its readers: this does not wait
            writer.write(f"{stage}\n")


_gates: dict[str, Gate] = {}


def wait_for(stage: str) -> None:
    """Waits for `stage` at the gate of WAIT_GATE_ENV, when there is one."""
    path = os.environ.get(WAIT_GATE_ENV)
    if path:
        if path not in _gates:
            _gates[path] = Gate(path)
        _gates[path].wait_for(stage)


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    wait_for("collect")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    wait_for("run")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # a parallel worker that has run out of work
        open_for("collect")
