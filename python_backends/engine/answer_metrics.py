"""How long vLLM held each request, as Prometheus counters (python_backends/prometheus.py)."""

from __future__ import annotations

from typing import Any

from ..prometheus import StepMetrics


class EngineMetrics(StepMetrics):
    """The engine step's `execute` only hands requests over, so Triton's own compute time for `rerank_engine` leaves
    vLLM out; these two counters put it back: their rates' quotient is the mean time from hand-over to scores."""

    OUTCOMES = ("ok", "error")

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        super().__init__(pb_utils, labels)
        answered = self.family(
            "reranker_engine_requests_total", "Requests the engine answered after handing them to vLLM, by outcome",
            "COUNTER")
        self.answered = {outcome: answered.Metric(labels={**labels, "outcome": outcome}) for outcome in self.OUTCOMES}
        self.seconds = self.counter(
            "reranker_engine_vllm_seconds_total", "Seconds from hand-over to vLLM until the answer, summed")

    def record(self, ok: bool, seconds: float) -> None:
        self.answered["ok" if ok else "error"].increment(1)
        self.seconds.increment(seconds)
