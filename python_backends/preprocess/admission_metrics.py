"""What the preprocess step did with each request, as Prometheus counters (python_backends/prometheus.py)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequest, Overloaded
from ..prometheus import StepMetrics


class PreprocessMetrics(StepMetrics):
    """Each request admitted (with its pairs, tokens and cut documents) or refused, by reason. Admitted is not
    scored: a request the engine or Triton refuses later is counted by Triton's own
    `nv_inference_request_failure{model="rerank_engine"}` (README: Long documents, overload, faults)."""

    REASONS = ("invalid", "overloaded", "internal")

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        super().__init__(pb_utils, labels)
        self.requests = self.counter("reranker_admitted_requests_total", "Rerank requests admitted by preprocess")
        self.pairs = self.counter("reranker_admitted_pairs_total", "Query-document pairs of admitted requests")
        self.tokens = self.counter("reranker_admitted_tokens_total", "Tokens of admitted requests (all sequences)")
        self.truncated = self.counter(
            "reranker_truncated_pairs_total", "Admitted pairs whose document was cut or windowed")
        refused = self.family("reranker_rejected_requests_total", "Requests refused by preprocess, by reason", "COUNTER")
        self.rejected = {reason: refused.Metric(labels={**labels, "reason": reason}) for reason in self.REASONS}

    def record(self, result: Any) -> None:
        """Count one request's outcome: engine inputs (admitted) or the exception it was refused with."""
        if isinstance(result, InvalidRequest):
            self.rejected["invalid"].increment(1)
        elif isinstance(result, Overloaded):
            self.rejected["overloaded"].increment(1)
        elif isinstance(result, Exception):
            self.rejected["internal"].increment(1)
        else:
            self.requests.increment(1)
            self.pairs.increment(result.documents)
            self.tokens.increment(int(result.token_ids.size))
            self.truncated.increment(result.truncated)
