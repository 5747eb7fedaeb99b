"""Fixtures of the client tests; the session's real tritonserver (`server`, default model repository) is in
tests/conftest.py, shared with tests/integration, tests/deploy and tests/gateway."""

from __future__ import annotations

import pytest


@pytest.fixture(params=("http", "grpc"))
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param
