"""Shared set-up of the real-vLLM engine tests: the marker, the tiny checkpoints and engine settings."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from python_backends.engine import EngineSettings, VllmScorer
from tests.tiny_models import session_models

# What config.pbtxt's `vllm_env` sets on a CPU machine: vLLM in this process, 1 GiB of KV cache, offline.
VLLM_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
}
MAX_MODEL_LEN = 128


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "engine: runs a real vLLM engine in the test process (CPU is enough)")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return session_models(tmp_path_factory)


def engine_settings(model: str | Path) -> EngineSettings:
    return EngineSettings(
        model=str(model),
        max_model_len=MAX_MODEL_LEN,
        dtype="float32",
        gpu_memory_utilization=0.9,  # unused on CPU: VLLM_CPU_KVCACHE_SPACE sizes the cache
        max_num_batched_tokens=2048,
        max_num_seqs=64,
        enforce_eager=True,
        engine_args={"distributed_executor_backend": "uni"},
        vllm_env=VLLM_ENV,
    )


def open_scorer(model: str | Path):
    """A scorer for a class-scoped fixture: `yield from open_scorer(path)`; the engine is freed afterwards
    so that the next class's engine starts in the same process with the memory back."""
    scorer = VllmScorer(engine_settings(model))
    try:
        yield scorer
    finally:
        scorer.close()
        del scorer
        gc.collect()
