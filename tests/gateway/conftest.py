"""`python -m gateway` in front of the session's real tritonserver (`server`, tests/conftest.py; started by
tests/support/gateway.py), and the venv of the official client SDKs (build/sdk-venv) the SDK tests run in."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gateway import GATEWAY_START_TIMEOUT_S, RunningGateway, http_status, start_gateway, stop_gateway
from tests.support.triton_server import ROOT, RunningServer

SDK_LOCK = ROOT / "requirements" / "gateway-sdk.lock.txt"
SDK_VENV = ROOT / "build" / "sdk-venv"
SDK_INSTALL_TIMEOUT_S = 600


@pytest.fixture(scope="session")
def gateway(server: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    running = start_gateway(server.grpc_url, tmp_path_factory.mktemp("gateway") / "gateway.log")
    deadline = time.monotonic() + GATEWAY_START_TIMEOUT_S
    while http_status(f"{running.url}/health") != 200:
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

    The SDKs need numpy 2 and other versions the server venv does not hold, hence a venv of their own. uv (which
    scripts/setup.sh installs) installs the pinned list (about 450 MB) without resolving: 5 s from an empty cache.
    """
    digest = hashlib.sha256(SDK_LOCK.read_bytes()).hexdigest()
    marker = SDK_VENV / "lock.sha256"
    python = SDK_VENV / "bin" / "python"
    if python.exists() and marker.exists() and marker.read_text() == digest:
        return python
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv is missing: `scripts/setup.sh` installs it (requirements/uv.txt)")
    shutil.rmtree(SDK_VENV, ignore_errors=True)
    _run([uv, "venv", "--quiet", "--python", sys._base_executable, str(SDK_VENV)], SDK_INSTALL_TIMEOUT_S)
    _run([uv, "pip", "install", "--quiet", "--python", str(python), "--no-deps", "-r", str(SDK_LOCK)],
         SDK_INSTALL_TIMEOUT_S)
    marker.write_text(digest)
    return python
