"""How long vLLM held each request and what it holds now, as Prometheus series (python_backends/prometheus.py)."""

from __future__ import annotations

from typing import Any

from ..prometheus import StepMetrics


class EngineMetrics(StepMetrics):
    """The engine step's `execute` only hands requests over, so Triton's own compute time for `rerank_engine` leaves
    vLLM out; these two counters put it back: their rates' quotient is the mean time from hand-over to scores.
    `outcome` "deadline", "cancelled" and "stopping" count requests whose work in vLLM was aborted (timeout passed,
    client gone, a stop's drain run out); the gauge is vLLM's own count of the sequences it holds, so abandoned work shows there until it ends."""

    OUTCOMES = ("ok", "error", "deadline", "cancelled", "stopping")

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        super().__init__(pb_utils, labels)
        answered = self.family(
            "reranker_engine_requests_total", "Requests the engine answered after handing them to vLLM, by outcome",
            "COUNTER")
        self.answered = {outcome: answered.Metric(labels={**labels, "outcome": outcome}) for outcome in self.OUTCOMES}
        self.seconds = self.counter(
            "reranker_engine_vllm_seconds_total", "Seconds from hand-over to vLLM until the answer, summed")
        self.sequences = self.family(
            "reranker_engine_vllm_sequences", "Sequences the vLLM engine holds, waiting or running (its own count)",
            "GAUGE").Metric(labels=labels)

    def record(self, outcome: str, seconds: float) -> None:
        self.answered[outcome].increment(1)
        self.seconds.increment(seconds)

    def held(self, sequences: int) -> None:
        self.sequences.set(sequences)
