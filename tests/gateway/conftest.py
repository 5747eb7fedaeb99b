"""`python -m gateway` in front of the session's real tritonserver (`server`, tests/conftest.py), on free ports, and
the venv of the official client SDKs (build/sdk-venv) the SDK tests run in."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tools.local_server import free_port
from tests.support.triton_server import ROOT, RunningServer

GATEWAY_START_TIMEOUT_S = 60.0
SDK_LOCK = ROOT / "requirements" / "gateway-sdk.lock.txt"
SDK_VENV = ROOT / "build" / "sdk-venv"
SDK_INSTALL_TIMEOUT_S = 600
MODEL_ALIASES = ("rerank-default",)  # GATEWAY_MODEL_ALIASES of the gateway under test


@dataclass
class RunningGateway:
    url: str
    log_path: Path
    process: subprocess.Popen

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def _status(url: str) -> int | None:
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
    while _status(f"{running.url}/health/live") != 200:
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


@pytest.fixture(scope="session")
def gateway(server: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    running = start_gateway(server.grpc_url, tmp_path_factory.mktemp("gateway") / "gateway.log")
    deadline = time.monotonic() + GATEWAY_START_TIMEOUT_S
    while _status(f"{running.url}/health") != 200:
        if time.monotonic() > deadline:
            stop_gateway(running)
            raise RuntimeError(f"gateway did not become ready:\n{running.log_tail()}")
        time.sleep(0.2)
    yield running
    stop_gateway(running)


def _run(command: list[str], timeout: float) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-4000:]}")


@pytest.fixture(scope="session")
def sdk_python() -> Path:
    """build/sdk-venv's python, made from requirements/gateway-sdk.lock.txt when missing or when the lock changed.

    The SDKs need numpy 2 and other versions the server venv does not hold, hence a venv of their own. uv (from
    requirements/gateway-test.txt) installs the pinned list (about 450 MB) without resolving: 5 s from an empty cache.
    """
    digest = hashlib.sha256(SDK_LOCK.read_bytes()).hexdigest()
    marker = SDK_VENV / "lock.sha256"
    python = SDK_VENV / "bin" / "python"
    if python.exists() and marker.exists() and marker.read_text() == digest:
        return python
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv is missing: `scripts/setup.sh --tests` installs it (requirements/gateway-test.txt)")
    shutil.rmtree(SDK_VENV, ignore_errors=True)
    _run([uv, "venv", "--quiet", "--python", sys._base_executable, str(SDK_VENV)], SDK_INSTALL_TIMEOUT_S)
    _run([uv, "pip", "install", "--quiet", "--python", str(python), "--no-deps", "-r", str(SDK_LOCK)],
         SDK_INSTALL_TIMEOUT_S)
    marker.write_text(digest)
    return python
