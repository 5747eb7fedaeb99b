"""Shadow traffic: a fraction of the default model's answered calls is sent again to a candidate model, and the two
answers are compared, all off the request path.

The caller's answer never waits for the candidate: `offer` runs after the primary has answered, costs a random
draw and a `put_nowait`, and when the bounded queue is full the call is dropped and counted. `concurrency` worker
tasks send the queued calls to the candidate, each with its own deadline; a slow or failing candidate only fills the
queue and the failure count. Per compared call they record the Spearman correlation of the two rankings and the
overlap of their top k (gateway.agreement), and the candidate's raw scores feed the drift window of its calibration
profile (python_backends.calibrate.drift, the statistic the calibrate step exports for the served model).

Prometheus series (GET /metrics), labelled primary and candidate:
- `gateway_shadow_calls_total{outcome}`: compared, failed (error or past the deadline), dropped (queue full);
- `gateway_shadow_spearman` (summary: count and sum, so the mean) and `gateway_shadow_top_k_overlap` (histogram):
  the per-call agreement; the overlap only of calls with more than top_k documents (with fewer it is 1 whatever
  the rankings);
- `gateway_shadow_score_drift_psi{profile}`: PSI of the candidate's last drift_window raw scores against its
  profile's fitted distribution; absent until the window is full or when the profile stores none.
The time of each candidate call is in `gateway_upstream_seconds{model, outcome}` beside the primary's (gateway.upstream).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, disable_created_metrics

from python_backends.calibrate.drift import DriftWindow
from python_backends.calibrate.profile_schema import load_profile
from reranker_client import RerankResponse

from .agreement import spearman, top_k_overlap
from .models import TritonModels
from .settings import ShadowSettings
from .upstream import UpstreamLatency

log = logging.getLogger("gateway")

disable_created_metrics()  # a `_created` timestamp per series is noise to this process's scrape

OVERLAP_BUCKETS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0)


@dataclass(frozen=True)
class ShadowCall:
    """What the candidate is asked (all documents: the comparison needs every score) and the primary's answer."""

    query: str
    texts: list[str]
    instruction: str | None
    max_tokens_per_doc: int | None
    primary: RerankResponse


class ShadowMetrics:
    def __init__(self, registry: CollectorRegistry, primary: str, candidate: str) -> None:
        labels = {"primary": primary, "candidate": candidate}
        calls = Counter("gateway_shadow_calls", "Calls offered to the shadow candidate, by outcome",
                        ["primary", "candidate", "outcome"], registry=registry)
        self.compared, self.failed, self.dropped = (calls.labels(**labels, outcome=o)
                                                    for o in ("compared", "failed", "dropped"))
        # A summary (count, sum: the mean): prometheus_client writes no _sum for a histogram with negative buckets.
        self.spearman = Summary("gateway_shadow_spearman", "Spearman correlation of the candidate's ranking with "
                                "the primary's, per call", list(labels), registry=registry).labels(**labels)
        self.overlap = Histogram("gateway_shadow_top_k_overlap", "Share of the primary's top k in the candidate's "
                                 "top k, per call", list(labels), buckets=OVERLAP_BUCKETS,
                                 registry=registry).labels(**labels)
        self._psi = Gauge("gateway_shadow_score_drift_psi", "PSI of the candidate's recent raw scores against its "
                          "calibration profile's fitted distribution", [*labels, "profile"], registry=registry)
        self._labels = labels

    def set_psi(self, profile: str, value: float) -> None:
        self._psi.labels(**self._labels, profile=profile).set(value)


class Shadow:
    """The candidate's queue, workers and comparison; `start` and `stop` run in the app's lifespan. `models`
    holds the candidate's client (the gateway's own, or those of the candidate's server)."""

    def __init__(self, settings: ShadowSettings, models: TritonModels, metrics: ShadowMetrics, latency: UpstreamLatency,
                 draw: Callable[[], float] = random.random) -> None:
        self.settings, self.models, self.metrics, self.latency, self._draw = settings, models, metrics, latency, draw
        self._queue: asyncio.Queue[ShadowCall] = asyncio.Queue(settings.queue_size)
        self._workers: list[asyncio.Task] = []
        profile = load_profile(settings.profile) if settings.profile else None
        distribution = profile.raw_score_distribution if profile else None
        if profile is not None and distribution is None:
            log.warning("shadow profile %s stores no raw_score_distribution: no drift series", profile.tag)
        self._profile_tag = profile.tag if profile else ""
        self._drift = DriftWindow(distribution, settings.drift_window) if distribution else None

    def offer(self, call: ShadowCall) -> None:
        if self._draw() >= self.settings.fraction:
            return
        try:
            self._queue.put_nowait(call)
        except asyncio.QueueFull:
            self.metrics.dropped.inc()

    def start(self) -> None:
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.settings.concurrency)]

    async def stop(self) -> None:
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            call = await self._queue.get()
            try:
                candidate = await asyncio.wait_for(self._ask(call), self.settings.timeout_s)
            except Exception as error:  # noqa: BLE001 - any candidate failure is counted, never raised
                log.info("shadow call to %s failed: %r", self.settings.model, error)
                self.metrics.failed.inc()
                continue
            self.compare(call.primary.raw_scores, candidate.raw_scores)

    async def _ask(self, call: ShadowCall) -> RerankResponse:
        client = await self.models.client(self.settings.model)
        with self.latency.timed(self.settings.model):
            return await client.rerank(call.query, call.texts, instruction=call.instruction,
                                       max_tokens_per_doc=call.max_tokens_per_doc)

    def compare(self, primary: np.ndarray, candidate: np.ndarray) -> None:
        agreement = spearman(primary, candidate)
        if agreement is not None:
            self.metrics.spearman.observe(agreement)
        overlap = top_k_overlap(primary, candidate, self.settings.top_k)
        if overlap is not None:
            self.metrics.overlap.observe(overlap)
        if self._drift is not None:
            self._drift.add(candidate)
            psi = self._drift.psi()
            if psi is not None:
                self.metrics.set_psi(self._profile_tag, psi)
        self.metrics.compared.inc()
