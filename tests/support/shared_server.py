"""The test run's shared server: one tritonserver on the default model repository for every test that needs
nothing else, whichever worker runs it.

scripts/test.sh starts this keeper before pytest and keeps a pipe to its stdin open for the whole run:

    python -m tests.support.shared_server build/test-run/server.json

It starts the server (tests.support.triton_server.start_test_server: the default model repository, and beside it
the window-mode ensemble of window_repository), writes what a test needs to reach it to the JSON
file (renamed into place whole), and stops it with stop_server when the pipe closes: at the end of the run, or when
test.sh dies. A start that fails writes {"error": ...} instead, so the tests that wait for the file fail with the
reason at once. The `server` fixture (tests/conftest.py) reads the file named by SHARED_SERVER_ENV.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tests.support.shared_memory import LEDGER
from tests.support.triton_server import START_TIMEOUT_S, RunningServer, start_test_server, stop_server

SHARED_SERVER_ENV = "RERANKER_TEST_SERVER"
FIELDS = ("http_url", "grpc_url", "metrics_url", "admin_key", "traces_url")


def _write(path: Path, content: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(content))
    partial.rename(path)


def attach(path: Path, timeout_s: float = START_TIMEOUT_S + 60) -> RunningServer:
    """The shared server as the keeper describes it, once it is ready (waits for the file)."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the shared test server was not described in {path} within {timeout_s:.0f} s")
        time.sleep(0.5)
    info = json.loads(path.read_text())
    if "error" in info:
        raise RuntimeError(f"the shared test server did not start: {info['error']}")
    return RunningServer(**{key: info[key] for key in FIELDS}, log_path=Path(info["log_path"]), pid=info["pid"],
                         started=info["started"])


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    LEDGER.start()
    try:
        server = start_test_server(path.parent / "shared-server.log")
    except Exception as exc:  # noqa: BLE001 - the tests report it
        _write(path, {"error": str(exc)})
        print(f"shared server: did not start: {exc}", file=sys.stderr)
        return 1
    _write(path, {**{key: getattr(server, key) for key in FIELDS}, "log_path": str(server.log_path),
                  "pid": server.pid, "started": server.started})
    print(f"shared server: ready (pid {server.pid}, HTTP {server.http_url}, gRPC {server.grpc_url})", flush=True)
    sys.stdin.read()  # until scripts/test.sh closes the pipe
    if not server.is_alive():
        print(f"shared server: it ended during the run: {server.ending()}", file=sys.stderr)
    status = stop_server(server)
    LEDGER.stop()
    left = f"; left in /dev/shm and removed: {server.left_behind}" if server.left_behind else ""
    print(f"shared server: stopped, exit status {status}{left}", flush=True)
    os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
