"""The engine step: vLLM's AsyncLLM pooling engine behind a validated tensor contract.

`settings` (config -> vLLM engine args), `inputs` (the step's own validation), `scoring` (one class per score
kind), `runtime` (the engine on its own loop thread, in-flight budget, cancellation, drain, death),
`replies` (answers through Triton response senders), `orphan_guard` (ends vLLM's processes if the stub dies).
"""

from .inputs import TENSORS, EngineLimits, SequenceBatch
from .replies import ReplyThread
from .runtime import AsyncEngine, EngineDead, InflightBudget
from .settings import QWEN3_RERANKER_OVERRIDES, EngineSettings, check_vllm_version

__all__ = [
    "TENSORS", "EngineLimits", "SequenceBatch", "ReplyThread", "AsyncEngine", "EngineDead", "InflightBudget",
    "QWEN3_RERANKER_OVERRIDES", "EngineSettings", "check_vllm_version",
]
