"""Shared fixtures of tests/deploy: the repository root on sys.path, and a contract-checking
stand-in Triton server on loopback for the load-test tools."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def fake_triton():
    from fake_triton import FakeTriton

    with FakeTriton() as server:
        yield server
