"""Shared fixtures of tests/deploy: the repository root on sys.path. The load-test tools run against the
session's real tritonserver (`server`, tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
