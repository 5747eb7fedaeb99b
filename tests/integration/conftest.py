"""Fixtures of the integration tests; the session's real tritonserver (`server`) is in tests/conftest.py."""

from __future__ import annotations

import pytest

PROTOCOLS = ("http", "grpc")


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param
