"""`python -m gateway` started and stopped on a free port in front of a running tritonserver: the gateway tests'
fixture and the tests that put a gateway in front of a server of their own (fairness, two models, shadow)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tools.local_server import free_port
from tests.support.triton_server import ROOT

GATEWAY_START_TIMEOUT_S = 60.0
MODEL_ALIASES = ("rerank-default",)  # GATEWAY_MODEL_ALIASES of the gateway under test


@dataclass
class RunningGateway:
    url: str
    log_path: Path
    process: subprocess.Popen

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def start_gateway(triton_grpc_url: str, log_path: Path, **env: str) -> RunningGateway:
    """`python -m gateway` on a free port in front of `triton_grpc_url`, once it answers /health/live; `env`
    adds GATEWAY_* settings."""
    port = free_port()
    environment = {
        **os.environ,
        "TRITON_GRPC_URL": triton_grpc_url,
        "GATEWAY_HOST": "127.0.0.1",
        "GATEWAY_PORT": str(port),
        "GATEWAY_MODEL_ALIASES": ",".join(MODEL_ALIASES),
        "GATEWAY_LOG_LEVEL": "warning",
        **env,
    }
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway"], cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT
        )
    running = RunningGateway(f"http://127.0.0.1:{port}", log_path, process)
    deadline = time.monotonic() + GATEWAY_START_TIMEOUT_S
    while http_status(f"{running.url}/health/live") != 200:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"gateway did not start:\n{running.log_tail()}")
        time.sleep(0.2)
    return running


def stop_gateway(running: RunningGateway) -> None:
    running.process.send_signal(signal.SIGTERM)
    try:
        running.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        running.process.kill()
        running.process.wait()
