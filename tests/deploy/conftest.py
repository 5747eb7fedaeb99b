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


@pytest.fixture(scope="session")
def http_max_input_size() -> str:
    """The `--http-max-input-size` every GPU deployment passes: the committed `gpu` variant's limits' own."""
    from python_backends.contract import RequestLimits
    from python_backends.model_repository import ENGINE, PREPROCESS, config_dict, variant_file

    limits = RequestLimits.from_model_configs(
        *(config_dict(variant_file(REPO / "model_repository", step, "gpu")) for step in (PREPROCESS, ENGINE)))
    return f"--http-max-input-size={limits.http_max_input_size}"
