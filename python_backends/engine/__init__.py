"""The engine step: vLLM's AsyncLLM pooling engine behind a validated tensor contract.

`settings` (config -> vLLM engine args), `inputs` (the step's own validation), `deadline` (when an answer stops being
wanted), `runtime` (the engine on its own loop thread, in-flight budget, fairness, aborts, drain, death), `replies`
(answers through Triton response senders), `answer_metrics` (vLLM's time per request), `orphan_guard` (ends vLLM's processes if the stub dies). How a family's
pooled output becomes its raw score is the family's own (python_backends/families).
"""

from .deadline import ClientGone, Deadline, DeadlineExceeded
from .inputs import TENSORS, EngineLimits, SequenceBatch
from .replies import ReplyThread
from .runtime import AsyncEngine, EngineDead, InflightBudget
from .settings import EngineSettings, check_vllm_version

__all__ = [
    "ClientGone", "Deadline", "DeadlineExceeded", "TENSORS", "EngineLimits", "SequenceBatch", "ReplyThread",
    "AsyncEngine", "EngineDead", "InflightBudget", "EngineSettings", "check_vllm_version",
]
