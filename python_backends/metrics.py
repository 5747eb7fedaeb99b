"""Custom Prometheus metrics of the Python models, served by Triton on its metrics port next to its own.

Built on `pb_utils.MetricFamily` (passed in: it exists only inside the stub). Names carry the
`reranker_` prefix and the `model` and `version` labels that Triton's own metrics carry (Triton 2.51 does
not add them to custom metrics itself).
"""

from __future__ import annotations

from typing import Any


class PreprocessMetrics:
    """What the preprocess step saw: requests, pairs, tokens and how many pairs were cut."""

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        counter = pb_utils.MetricFamily.COUNTER
        self._families = [
            pb_utils.MetricFamily("reranker_requests_total", "Rerank requests accepted by preprocess", counter),
            pb_utils.MetricFamily("reranker_pairs_total", "Query-document pairs sent to the engine", counter),
            pb_utils.MetricFamily("reranker_tokens_total", "Tokens sent to the engine (all sequences)", counter),
            pb_utils.MetricFamily(
                "reranker_truncated_pairs_total", "Pairs whose document was cut to fit max_model_len", counter
            ),
            pb_utils.MetricFamily("reranker_rejected_requests_total", "Requests refused as invalid input", counter),
        ]
        self.requests, self.pairs, self.tokens, self.truncated, self.rejected = (f.Metric(labels=labels) for f in self._families)

    def accepted(self, pairs: int, tokens: int, truncated: int) -> None:
        self.requests.increment(1)
        self.pairs.increment(pairs)
        self.tokens.increment(tokens)
        self.truncated.increment(truncated)


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
