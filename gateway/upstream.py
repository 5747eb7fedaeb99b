"""How long the gateway's calls to Triton take, per ensemble: the default model's, the other served models' and the
shadow candidate's calls in one histogram, labelled by model and outcome, so a candidate's speed is read beside the
primary's on the same /metrics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Histogram

# From a short CPU call to the gateway's default 60 s timeout
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class UpstreamLatency:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._seconds = Histogram("gateway_upstream_seconds", "One call to a Triton ensemble, from send to answer or "
                                  "error, by ensemble and outcome", ["model", "outcome"], buckets=BUCKETS,
                                  registry=registry)

    @contextmanager
    def timed(self, model: str) -> Iterator[None]:
        """Time the call made inside the block; an exception out of it counts as outcome "error"."""
        started, outcome = time.perf_counter(), "error"
        try:
            yield
            outcome = "ok"
        finally:
            self._seconds.labels(model=model, outcome=outcome).observe(time.perf_counter() - started)
