"""Custom Prometheus metrics of the Python models, served by Triton on its metrics port next to its own.

Built on `pb_utils.MetricFamily` (passed in: it exists only inside the stub). Names carry the
`reranker_` prefix and the `model` and `version` labels that Triton's own metrics carry (Triton 2.51 does
not add them to custom metrics itself).
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidRequest, Overloaded


class PreprocessMetrics:
    """What the preprocess step did with each request: admitted (with its pairs, tokens and cut documents) or
    refused, by reason. Admitted is not scored: a request the engine or Triton refuses later is counted by
    Triton's own `nv_inference_request_failure{model="rerank_engine"}` (README: Long documents, overload, faults)."""

    REASONS = ("invalid", "overloaded", "internal")

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        counter = pb_utils.MetricFamily.COUNTER
        family = pb_utils.MetricFamily
        self._families = [
            family("reranker_admitted_requests_total", "Rerank requests admitted by preprocess", counter),
            family("reranker_admitted_pairs_total", "Query-document pairs of admitted requests", counter),
            family("reranker_admitted_tokens_total", "Tokens of admitted requests (all sequences)", counter),
            family("reranker_truncated_pairs_total", "Admitted pairs whose document was cut or windowed", counter),
        ]
        self.requests, self.pairs, self.tokens, self.truncated = (f.Metric(labels=labels) for f in self._families)
        refused = family("reranker_rejected_requests_total", "Requests refused by preprocess, by reason", counter)
        self._families.append(refused)
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


class EngineMetrics:
    """How long vLLM held each request. The engine step's `execute` only hands requests over, so Triton's own
    compute time for `rerank_engine` leaves vLLM out; these two counters put it back: their rates' quotient is the
    mean time from hand-over to scores."""

    OUTCOMES = ("ok", "error")

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        counter = pb_utils.MetricFamily.COUNTER
        answered = pb_utils.MetricFamily(
            "reranker_engine_requests_total", "Requests the engine answered after handing them to vLLM, by outcome",
            counter)
        seconds = pb_utils.MetricFamily(
            "reranker_engine_vllm_seconds_total", "Seconds from hand-over to vLLM until the answer, summed", counter)
        self._families = (answered, seconds)
        self.answered = {outcome: answered.Metric(labels={**labels, "outcome": outcome}) for outcome in self.OUTCOMES}
        self.seconds = seconds.Metric(labels=labels)

    def record(self, ok: bool, seconds: float) -> None:
        self.answered["ok" if ok else "error"].increment(1)
        self.seconds.increment(seconds)


class CalibrationMetrics:
    """The calibration profile in force, as an info-style gauge (1 for the current name@version)."""

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        self._labels = labels
        self._family = pb_utils.MetricFamily(
            "reranker_calibration_profile_info", "Calibration profile in use (value 1)", pb_utils.MetricFamily.GAUGE
        )
        self._current: tuple[str, Any] | None = None

    def in_use(self, tag: str) -> None:
        if self._current is not None and self._current[0] == tag:
            return
        if self._current is not None:
            self._current[1].set(0)
        metric = self._family.Metric(labels={**self._labels, "profile": tag})
        metric.set(1)
        self._current = (tag, metric)


def model_labels(args: dict[str, Any]) -> dict[str, str]:
    """The labels of one model instance, from the `args` Triton passes to `initialize`."""
    return {"model": str(args["model_name"]), "version": str(args["model_version"])}
