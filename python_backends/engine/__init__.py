"""The engine step: vLLM's AsyncLLM pooling engine behind a validated tensor contract (python_backends/sequences).

`settings` (config -> vLLM engine args), `deadline` (when an answer stops being wanted), `step` (the engine on
its own loop thread, fairness, aborts, drain, death), `budget` (tokens in flight and the work waiting for room),
`replies` (answers through Triton response senders), `stopping` (the drain when the server stops), `metrics` (vLLM's time per request), `orphan_guard`
(ends vLLM's processes if the stub dies), `groups` and `scheduler` (a request's sequences queued together in vLLM).
How a family's pooled output becomes its raw score is the family's own (python_backends/families).
"""

from ..errors import InvalidRequest, Overloaded
from ..sequences import TENSORS, EngineLimits, SequenceBatch
from .budget import InflightBudget
from .deadline import ClientGone, Deadline, DeadlineExceeded
from .replies import ReplyThread
from .step import AsyncEngine, EngineDead
from .stopping import ServerStopping
from .settings import EngineSettings, check_vllm_version

# What the engine step refuses a request with, each error's `reason` a label of reranker_rejected_requests_total
REFUSED_AS = (InvalidRequest, Overloaded, EngineDead, DeadlineExceeded, ClientGone, ServerStopping)

__all__ = [
    "ClientGone", "Deadline", "DeadlineExceeded", "TENSORS", "EngineLimits", "SequenceBatch", "ReplyThread",
    "AsyncEngine", "EngineDead", "InflightBudget", "EngineSettings", "REFUSED_AS", "ServerStopping",
    "check_vllm_version",
]
