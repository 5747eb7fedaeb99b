"""What the preprocess step did with each request, as Prometheus counters (python_backends/prometheus.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..prometheus import StepMetrics

if TYPE_CHECKING:
    from .step import Preprocessed


class PreprocessMetrics(StepMetrics):
    """Each request admitted, with its pairs, tokens and cut documents (refused ones: prometheus.Refusals).
    Admitted is not scored: the engine step counts its own refusals and answers."""

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        super().__init__(pb_utils, labels)
        self.requests = self.counter("reranker_admitted_requests_total", "Rerank requests admitted by preprocess")
        self.pairs = self.counter("reranker_admitted_pairs_total", "Query-document pairs of admitted requests")
        self.tokens = self.counter("reranker_admitted_tokens_total", "Tokens of admitted requests (all sequences)")
        self.truncated = self.counter(
            "reranker_truncated_pairs_total", "Admitted pairs whose document was cut or windowed")
        # Triton's compute time for this step ends when `execute` hands the batch to the tokenizing thread; this
        # counter holds the time until each answer (its quotient with reranker_admitted_requests_total: the mean).
        self.seconds = self.counter(
            "reranker_preprocess_seconds_total",
            "Seconds from the execute that took an admitted request to its answer, summed")

    def record(self, admitted: Preprocessed, seconds: float) -> None:
        """Count one admitted request from its answer, answered `seconds` after its execute began."""
        self.requests.increment(1)
        self.seconds.increment(seconds)
        self.pairs.increment(admitted.documents)
        self.tokens.increment(admitted.sequences.tokens)
        self.truncated.increment(admitted.truncated)
