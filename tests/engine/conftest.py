"""Shared set-up of the real-vLLM engine tests: the marker, the tiny checkpoints and engine settings."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from python_backends.engine import AsyncEngine, EngineSettings
from python_backends.triton_params import ModelParameters
from python_backends.model_repository import REPOSITORY, config_dict, config_path
from tests.support.loading import one_load_at_a_time
from tests.support.tiny_models import session_models

# The CPU configuration's `vllm_env`, as the server sets it (KV cache size, offline, vLLM's worker in its engine core).
VLLM_ENV = EngineSettings.from_parameters(ModelParameters.from_model_config(
    config_dict(config_path(REPOSITORY, "rerank_engine")))).vllm_env
MAX_MODEL_LEN = 128


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "engine: runs a real vLLM engine from the test process (CPU is enough)")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return session_models(tmp_path_factory)


def engine_args(model: str | Path, **overrides) -> dict:
    return {
        "model": str(model),
        "runner": "pooling",
        "max_model_len": MAX_MODEL_LEN,
        "dtype": "float32",
        "max_num_batched_tokens": 2048,
        "max_num_seqs": 64,
        "enforce_eager": True,
        "distributed_executor_backend": "uni",
        "scheduling_policy": "priority",  # as rerank_engine's configs have it
        "scheduler_cls": "python_backends.engine.scheduler.WholeRequestScheduler",
        **overrides,
    }


def engine_settings(model: str | Path, max_inflight_tokens: int = 1 << 16, **overrides) -> EngineSettings:
    return EngineSettings(
        engine_args=engine_args(model, **overrides),
        max_inflight_tokens=max_inflight_tokens,
        max_sequences=256,
        drain_timeout_s=30.0,
        vllm_env=VLLM_ENV,
    )


def open_engine(settings: EngineSettings):
    """An engine for a class-scoped fixture: `yield from open_engine(...)`; it is shut down afterwards so that the
    next class's engine starts with the memory back."""
    with one_load_at_a_time():
        engine = AsyncEngine(settings)
    try:
        yield engine
    finally:
        engine.close()
        assert not Path(engine.ipc_dir).exists(), "vLLM's sockets outlived the engine"
        del engine
        gc.collect()
