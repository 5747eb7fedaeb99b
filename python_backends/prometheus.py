"""Custom Prometheus metrics of the Python models, served by Triton on its metrics port next to its own.

Built on `pb_utils.MetricFamily` (passed in: it exists only inside the stub). Names carry the `reranker_` prefix and
the `model` and `version` labels that Triton's own metrics carry (Triton 2.51 does not add them to custom metrics
itself). `Refusals` is every step's count of the requests it answered with an error before doing its work. Each
step's other series are in its folder: preprocess/metrics.py, engine/metrics.py,
calibrate/metrics.py.
"""

from __future__ import annotations

from typing import Any


def model_labels(args: dict[str, Any]) -> dict[str, str]:
    """The labels of one model instance, from the `args` Triton passes to `initialize`."""
    return {"model": str(args["model_name"]), "version": str(args["model_version"])}


class StepMetrics:
    """Base of one step's series: makes its metric families and keeps them alive, since Triton fails a Metric's
    calls once its family is deleted. The step's `finalize` calls `close`."""

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        self._pb = pb_utils
        self.labels = labels
        self._families: list[Any] = []

    def family(self, name: str, description: str, kind: str) -> Any:
        """A `pb_utils.MetricFamily` of `kind` ("COUNTER", "GAUGE" or "HISTOGRAM")."""
        family = self._pb.MetricFamily(name, description, getattr(self._pb.MetricFamily, kind))
        self._families.append(family)
        return family

    def counter(self, name: str, description: str) -> Any:
        """One counter with the instance's labels."""
        return self.family(name, description, "COUNTER").Metric(labels=self.labels)

    def close(self) -> None:
        """Delete every series of this step now, while the stub can still tell the server. A family left to the
        interpreter's shutdown is deleted after the stub's shared memory is gone, and the stub crashes in
        `Metric::SaveToSharedMemory` (Triton 2.51) on every unload."""
        vars(self).clear()  # the families and their Metric objects: the last references, so deleted here


class Refusals(StepMetrics):
    """`reranker_rejected_requests_total{model, version, reason}`: one count per request a step refused, by the
    error's `reason` (python_backends/errors.py; "internal" for any other failure). Triton 2.51 counts such a
    request as a success of the step and only the public model's failures show it, without the reason."""

    def __init__(self, pb_utils: Any, labels: dict[str, str], refused_as: tuple[type[BaseException], ...]) -> None:
        """`refused_as`: the errors the step refuses requests with (its REFUSED_AS); their reasons' series exist from
        the start at 0, so that an alert's rate() has them before the first refusal."""
        super().__init__(pb_utils, labels)
        # the same description in every step: Triton serves one family of this name for all of them
        self._family = self.family("reranker_rejected_requests_total", "Requests a step refused, by reason", "COUNTER")
        self._by_reason: dict[str, Any] = {}
        for reason in (*(error.reason for error in refused_as), "internal"):
            self._series(reason)

    def _series(self, reason: str) -> Any:
        if reason not in self._by_reason:
            self._by_reason[reason] = self._family.Metric(labels={**self.labels, "reason": reason})
        return self._by_reason[reason]

    def count(self, exc: BaseException) -> None:
        """Under the error's reason; one the step did not name is counted under its own all the same."""
        self._series(getattr(exc, "reason", "internal")).increment(1)
