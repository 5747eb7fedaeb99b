"""One model load at a time on this machine during a test run.

A tritonserver aborted while its engine stub started (`boost::interprocess::lock_exception`) as the other test
worker's server loaded beside it on the two cores. In Triton 2.51's Python backend a starting stub has a fixed 1 s to
show its health thread is alive, and a stub that dies holding one of the shared region's robust mutexes makes the
server's next lock of it throw that exception, caught nowhere on the load path. Loads take this lock so that no two
run at once: a file lock, so it holds across the test workers, the shared server's keeper and whatever else of the
run starts a server, and the kernel drops it when its holder dies.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = Path(os.environ.get("RERANKER_TEST_LOAD_LOCK", Path(__file__).resolve().parents[2] / "build" / "load.lock"))


@contextmanager
def one_load_at_a_time() -> Iterator[None]:
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
